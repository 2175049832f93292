"""Executor: which executor a build targets and how its entry points are called.

``Executor.create("aot -interface-api=c")`` parses the same ``kind -option=value`` form as
a target string (``ember.build(..., executor="aot -interface-api=c")``); ``-executor=aot``
inside a target string is read the same way. Options (names as in TVM):

==================  ==========================  =========================================
option              values                      meaning
==================  ==========================  =========================================
interface-api       packed (default), c         the run function as a PackedFunc, or a typed
                                                C entry ``ember_<mod>_run(inputs*, outputs*,
                                                workspace*)`` with a header (AOT only)
calling-convention  unpacked (default),         how the run function calls operators: their
                    cpacked, packed             unpacked C entry, their packed symbol
                                                directly with DLTensor arguments, or
                                                (``packed``) a function found once through
                                                the runtime by name, then called packed
link-params         false (default; true for c) constants compiled into the library
==================  ==========================  =========================================

The combinations design document 001 forbids are refused when the executor is created,
each error naming its rule:

* ``interface-api=c`` needs ``unpacked`` operator calls ("when using --interface-api=c you
  must also use the unpacked calling convention");
* ``interface-api=c`` needs ``link-params``: the C entry takes no constants (ember's rule);
* the graph executor has none of these options (its calls are packed by construction).

The document's rule for TVM's C++ runtime ("unpacked may not be used with the AOT
executor, as the interface has not settled") does not apply: ember has one runtime, which
loads C-ABI libraries like TVM's C runtime, and the unified metadata settles the
interface; so ember's default is ``unpacked``. The rule that ``call_packed`` is needed
when non-DSO-exportable modules exist holds by construction: a kernel of another module (a
``relay_to_runtime`` artifact) is always called through ``call_packed``, whatever the
convention of the host's kernels, and so cannot be combined with ``interface-api=c``.
``link-params`` with the packed interface is not implemented yet and is refused as such.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from ember.errors import EmberValueError

#: executors ``build`` can target.
EXECUTORS: tuple[str, ...] = ("graph", "aot")
INTERFACE_APIS = ("packed", "c")
CALLING_CONVENTIONS = ("unpacked", "cpacked", "packed")
_BOOLS = {"1": True, "true": True, "on": True, "0": False, "false": False, "off": False}


@dataclass(frozen=True)
class Executor:
    """An executor kind with its interface options (see the module docstring)."""

    kind: str = "graph"
    interface_api: str = "packed"
    calling_convention: str = "unpacked"
    link_params: bool = False

    @staticmethod
    def create(spec: str | Executor) -> Executor:
        """Parse ``"aot -interface-api=c ..."`` (or return ``spec``), checking the rules."""
        if isinstance(spec, Executor):
            spec.check()
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise EmberValueError(f"an executor must be a string like 'aot', got {spec!r}")
        try:
            words = shlex.split(spec)
        except ValueError as err:
            raise EmberValueError(f"executor {spec!r} cannot be split into words: {err}") from None
        kind = words[0]
        if kind not in EXECUTORS:
            raise EmberValueError(f"unknown executor {kind!r}; known: {', '.join(EXECUTORS)}")
        values: dict[str, Any] = {}
        for word in words[1:]:
            name, sep, text = word.lstrip("-").partition("=")
            if not word.startswith("-") or not sep:
                raise EmberValueError(f"executor {spec!r}: option {word!r} must be -name=value")
            values[name] = text
        return Executor.from_options(kind, values, f"executor {spec!r}")

    @staticmethod
    def from_options(kind: str, values: dict[str, Any], where: str) -> Executor:
        """An executor from option values given as text or Python values."""
        known = ("interface-api", "calling-convention", "link-params")
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise EmberValueError(
                f"{where}: unknown option(s) {', '.join('-' + u for u in unknown)}; "
                f"known: {', '.join('-' + k for k in known)}"
            )
        api = str(values.get("interface-api", "packed"))
        default_link = "true" if api == "c" else "false"
        link_text = str(values.get("link-params", default_link)).lower()
        if link_text not in _BOOLS:
            raise EmberValueError(f"{where}: -link-params must be true or false, got {link_text!r}")
        executor = Executor(
            kind, api, str(values.get("calling-convention", "unpacked")), _BOOLS[link_text]
        )
        executor.check(where)
        return executor

    def check(self, where: str = "") -> None:
        """Refuse the combinations design document 001 (or ember) forbids, naming the rule."""
        where = where or f"executor '{self}'"
        if self.kind not in EXECUTORS:
            raise EmberValueError(f"unknown executor {self.kind!r}; known: {', '.join(EXECUTORS)}")
        if self.interface_api not in INTERFACE_APIS:
            raise EmberValueError(
                f"{where}: -interface-api={self.interface_api} is unknown; known: "
                f"{', '.join(INTERFACE_APIS)}"
            )
        if self.calling_convention not in CALLING_CONVENTIONS:
            raise EmberValueError(
                f"{where}: -calling-convention={self.calling_convention} is unknown; known: "
                f"{', '.join(CALLING_CONVENTIONS)}"
            )
        if self.kind == "graph" and self != Executor("graph"):
            raise EmberValueError(
                f"{where}: the graph executor takes no interface options (it calls every "
                "kernel through its packed entry); use executor 'aot' for them"
            )
        if self.interface_api == "c" and self.calling_convention != "unpacked":
            raise EmberValueError(
                f"{where}: -interface-api=c needs -calling-convention=unpacked (design "
                "document 001: the C interface uses the unpacked convention for operators)"
            )
        if self.interface_api == "c" and not self.link_params:
            raise EmberValueError(
                f"{where}: -interface-api=c needs -link-params=true: the C entry takes only "
                "inputs, outputs and the workspace, so constants must be in the code"
            )
        if self.interface_api == "packed" and self.link_params:
            raise EmberValueError(
                f"{where}: -link-params with the packed interface is not implemented yet; "
                "use -interface-api=c, or leave constants to the executor (the default)"
            )

    def __str__(self) -> str:
        parts = [self.kind]
        if self.interface_api != "packed":
            parts.append(f"-interface-api={self.interface_api}")
        if self.calling_convention != "unpacked":
            parts.append(f"-calling-convention={self.calling_convention}")
        if self.link_params != (self.interface_api == "c"):
            parts.append(f"-link-params={'true' if self.link_params else 'false'}")
        return " ".join(parts)
