"""Target: a target kind plus option values, parsed from a string like ``"c -mcpu=skylake"``.

A composite target adds external kinds in front of a host: ``"openblas, onednn, c"`` (the
last item is the host, the others are external kinds in priority order) or, the same,
``Target(["openblas", "onednn"], host="c")``. The composite's kind and options are the
host's; ``externals`` lists the external kinds, whose pattern tables the partitioner
(:mod:`ember.transform.partition`) uses to move parts of the graph to them. The host comes
last as in TVM's ``"ethos-u, cmsisnn, llvm"``: everything nobody else claims falls through
to it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.errors import EmberValueError
from ember.target.cpu import CpuInfo, cpu_info
from ember.target.kind import HOOKS, TargetKind, TargetOption, get_target_kind

#: the host target a kind without its own ``tir_to_runtime`` hook generates code through.
DEFAULT_HOST = "c"


@dataclass(frozen=True)
class Target:
    """A compilation target: its kind, option values and an optional host target."""

    kind: TargetKind
    attrs: Mapping[str, Any] = field(default_factory=dict)
    host: Target | None = None
    #: external kinds of a composite target, in priority order (empty for a plain target).
    externals: tuple[Target, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.kind, TargetKind):
            return
        # Target("openblas, c"), Target("c -mcpu=x"), Target(["openblas"], host="c")
        spec: Any = self.kind
        parsed = Target.create(spec, self.host)  # type: ignore[arg-type]
        for name in ("kind", "attrs", "host", "externals"):
            object.__setattr__(self, name, getattr(parsed, name))

    @staticmethod
    def create(
        spec: str | Target | list[str] | tuple[str, ...], host: str | Target | None = None
    ) -> Target:
        """Parse ``spec`` (``"<kind> -opt=value ..."``, ``"ext1, ext2, host"`` or a list of
        external kinds with ``host``) into a Target with all defaults filled."""
        if isinstance(spec, list | tuple) or (isinstance(spec, str) and "," in spec):
            return _composite(spec, host)
        if isinstance(spec, Target):
            if host is None:
                return spec
            return Target(spec.kind, spec.attrs, Target.create(host), spec.externals)
        if not isinstance(spec, str) or not spec.strip():
            raise EmberValueError(f"a target must be a non-empty string like 'c', got {spec!r}")
        try:
            words = shlex.split(spec)
        except ValueError as err:
            raise EmberValueError(f"target {spec!r} cannot be split into words: {err}") from None
        kind = get_target_kind(words[0])
        values: dict[str, Any] = {k: opt.default for k, opt in kind.options.items()}
        for word in words[1:]:
            if not word.startswith("-") or "=" not in word:
                raise EmberValueError(
                    f"target '{spec}': option {word!r} must look like -name=value"
                )
            name, text = word.lstrip("-").split("=", 1)
            opt = _option(kind, name, f"target '{spec}'")
            values[name] = opt.parse(text, f"target '{spec}' option -{name}")
        host_target = Target.create(host) if host is not None else None
        return Target(kind, dict(sorted(values.items())), host_target)

    def with_attrs(self, changes: Mapping[str, Any]) -> Target:
        """A copy with some options changed (``opt_level`` and ``opt-level`` both name
        ``-opt-level``); values are type-checked against the kind's declaration."""
        values = dict(self.attrs)
        for key, value in changes.items():
            name = key.replace("_", "-")
            opt = _option(self.kind, name, f"target '{self}'")
            if isinstance(value, str) and opt.kind is not str:
                value = opt.parse(value, f"target '{self}' option -{name}")
            elif not _is_type(value, opt.kind):
                raise EmberValueError(
                    f"target '{self}' option -{name} takes {opt.kind.__name__}, got {value!r}"
                )
            values[name] = opt.validate(value, f"target '{self}' option -{name}")
        return Target(self.kind, dict(sorted(values.items())), self.host, self.externals)

    @property
    def cpu(self) -> CpuInfo:
        """Vector resources of the CPU this target compiles for (``-mcpu``, else the host;
        the kind's ``cpu`` function when it has one)."""
        if self.kind.cpu is not None:
            return self.kind.cpu(self.attrs)
        mcpu = self.attrs.get("mcpu", "native")
        return cpu_info(mcpu if isinstance(mcpu, str) else "native")

    @property
    def keys(self) -> tuple[str, ...]:
        """Keys schedules are registered under, most specific first: the kind's own, then
        the CPU's (e.g. ``x86-avx512``, ``x86``, ``cpu``)."""
        return tuple(dict.fromkeys((*self.kind.keys, *self.cpu.keys)))

    def external(self, name: str) -> Target | None:
        """The external target of kind ``name`` in this composite target, if any."""
        return next((t for t in self.externals if t.kind.name == name), None)

    def host_or_default(self) -> Target:
        """The host target, or the default host (``c``) when none was given."""
        return self.host if self.host is not None else Target.create(DEFAULT_HOST)

    def __getitem__(self, name: str) -> Any:
        try:
            return self.attrs[name]
        except KeyError:
            known = ", ".join(sorted(self.attrs)) or "none"
            raise EmberValueError(
                f"target '{self}' has no option '{name}'; options: {known}"
            ) from None

    def hook(self, name: str) -> str | None:
        """The registered-function name of hook ``name`` on this target's kind, if any."""
        if name not in HOOKS:
            raise EmberValueError(f"unknown hook '{name}'; known: {', '.join(HOOKS)}")
        return self.kind.hooks.get(name)

    @property
    def device_type(self) -> int:
        """The DLPack device type this target runs on."""
        return self.kind.device_type

    def __str__(self) -> str:
        own = self._own_str()
        return ", ".join([*(str(t) for t in self.externals), own]) if self.externals else own

    def _own_str(self) -> str:
        parts = [self.kind.name]
        for name, value in sorted(self.attrs.items()):
            default = self.kind.options[name].default if name in self.kind.options else None
            if value != default:
                text = str(value).lower() if isinstance(value, bool) else str(value)
                parts.append(f"-{name}={text}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"


def _composite(spec: str | list[str] | tuple[str, ...], host: str | Target | None) -> Target:
    """``"a, b, host"`` or ``["a", "b"]`` with ``host``: the host Target with externals."""
    items = [p.strip() for p in spec.split(",")] if isinstance(spec, str) else list(spec)
    if isinstance(spec, str):
        if host is not None:
            raise EmberValueError(
                f"target {spec!r} already names its host (the last item); drop host={host!r}"
            )
        host, items = items[-1], items[:-1]
    if any(not isinstance(p, str) or not p for p in items):
        raise EmberValueError(
            f"composite target {spec!r}: every external kind must be a non-empty string, "
            "e.g. 'openblas, c' or Target(['openblas'], host='c')"
        )
    base = Target.create(host if host is not None else DEFAULT_HOST)
    externals = tuple(Target.create(p) for p in items)
    names = [t.kind.name for t in externals]
    if base.kind.name in names or len(set(names)) != len(names):
        raise EmberValueError(
            f"composite target {spec!r}: each kind may appear once, and the host "
            f"'{base.kind.name}' not among the external kinds"
        )
    return Target(base.kind, base.attrs, base.host, externals)


def _option(kind: TargetKind, name: str, where: str) -> TargetOption:
    opt = kind.options.get(name)
    if opt is None:
        known = ", ".join(f"-{k}" for k in sorted(kind.options)) or "none"
        raise EmberValueError(
            f"{where}: unknown option -{name} for kind '{kind.name}'; known: {known}"
        )
    return opt


def _is_type(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, kind)
