"""Module: a named collection of PackedFuncs with imports, as in TVM's runtime.Module.

A subclass implements ``_get_function(name)`` (None when absent) and
``function_names()``; everything else (lookup through imports, helpful misses,
time_evaluator) lives here. :class:`PythonModule` builds a module from Python callables.
Example::

    mod = ember.runtime.PythonModule({"add": lambda a, b: a + b})
    mod["add"](1, 2)      # -> 3
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.errors import EmberTypeError, RegistryError
from ember.runtime.c_api import TypeCode
from ember.runtime.hooks import EXPORT_LIBRARY, call_hook
from ember.runtime.packed_func import PackedFunc, as_packed_func, register_identity_type
from ember.runtime.time_evaluator import TimeEvaluator

if TYPE_CHECKING:
    from ember.runtime.device import Device


class Module:
    """Base class of runtime modules: functions by name, plus imported modules."""

    type_key: str = "module"

    def __init__(self) -> None:
        self._imports: list[Module] = []
        self._cache: dict[str, PackedFunc] = {}

    # ---- to implement --------------------------------------------------------------
    def _get_function(self, name: str) -> PackedFunc | None:
        """This module's own function ``name`` or None (subclasses override)."""
        return None

    def function_names(self) -> list[str]:
        """Names of this module's own functions, sorted (subclasses override)."""
        return []

    # ---- lookup ----------------------------------------------------------------------
    @property
    def imports(self) -> list[Module]:
        """The modules imported by this one (looked up after its own functions)."""
        return list(self._imports)

    def import_module(self, module: Module) -> None:
        """Import ``module``: its functions become reachable through this module."""
        if not isinstance(module, Module):
            raise EmberTypeError(f"import_module needs a Module, got {type(module).__name__}")
        if module is self or self in _transitive_imports(module):
            raise EmberTypeError(f"importing {module!r} into {self!r} would create a cycle")
        self._imports.append(module)

    def export_library(self, path: str | os.PathLike[str]) -> Path:
        """Export the artifacts this module was loaded from as one shared library."""
        exported: Path = call_hook(EXPORT_LIBRARY, self, path)
        return exported

    def implements_function(self, name: str, query_imports: bool = False) -> bool:
        """Whether the module (and, if asked, its imports) has the function ``name``."""
        return self._find(name, query_imports) is not None

    def _find(self, name: str, query_imports: bool) -> PackedFunc | None:
        func = self._cache.get(name)
        if func is None:
            func = self._get_function(name)
            if func is not None:
                self._cache[name] = func
        if func is None and query_imports:
            for mod in self._imports:
                func = mod._find(name, True)
                if func is not None:
                    break
        return func

    def get_function(self, name: str, query_imports: bool = True) -> PackedFunc:
        """The function ``name``; a miss raises a KeyError-style error naming close names."""
        func = self._find(name, query_imports)
        if func is not None:
            return func
        names = self.function_names()
        if query_imports:
            for mod in _transitive_imports(self):
                names += mod.function_names()
        close = difflib.get_close_matches(name, sorted(set(names)), n=3, cutoff=0.5)
        msg = f"module {self!r} has no function '{name}'"
        if close:
            msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
        elif names:
            shown = sorted(set(names))
            msg += f"; it has: {', '.join(shown[:20])}{', ...' if len(shown) > 20 else ''}"
        raise RegistryError(msg)

    def __getitem__(self, name: str) -> PackedFunc:
        if not isinstance(name, str):
            raise EmberTypeError(f"module functions are looked up by name, got {name!r}")
        return self.get_function(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.implements_function(name, query_imports=True)

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        cooldown_interval_ms: int = 0,
    ) -> TimeEvaluator:
        """A callable timing ``func_name`` with TVM's time_evaluator semantics."""
        return TimeEvaluator(
            self.get_function(func_name),
            dev,
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_interval_ms,
        )

    def __repr__(self) -> str:
        return f"Module({self.type_key})"


# Modules cross C by identity (a MODULE_HANDLE value pins the Python object).
register_identity_type(Module, TypeCode.MODULE_HANDLE)


def _transitive_imports(module: Module) -> list[Module]:
    seen: list[Module] = []
    stack = list(module._imports)
    while stack:
        mod = stack.pop()
        if any(mod is s for s in seen):
            continue
        seen.append(mod)
        stack.extend(mod._imports)
    return seen


class PythonModule(Module):
    """A module whose functions are given in Python (callables or PackedFuncs)."""

    type_key = "python"

    def __init__(
        self, funcs: Mapping[str, Callable[..., Any] | PackedFunc], type_key: str = "python"
    ) -> None:
        super().__init__()
        self.type_key = type_key
        self._funcs = {name: as_packed_func(f) for name, f in funcs.items()}

    def _get_function(self, name: str) -> PackedFunc | None:
        return self._funcs.get(name)

    def function_names(self) -> list[str]:
        """Names of the functions given at construction, sorted."""
        return sorted(self._funcs)


def ModuleFromFuncs(  # noqa: N802 - TVM-style constructor name
    funcs: Mapping[str, Callable[..., Any] | PackedFunc], type_key: str = "python"
) -> PythonModule:
    """A :class:`PythonModule` over ``funcs`` (TVM-style spelling)."""
    return PythonModule(funcs, type_key=type_key)
