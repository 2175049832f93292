"""Target kinds: what a target string's first word names, with its options and hooks.

A kind carries the four hook attributes of design document 003; each names a function in
the global function registry, so an external code generator plugs in at one stage::

    register_target_kind(TargetKind(
        "woofles", device_type=1,
        options={"tile": TargetOption(int, 8, "tile size")},
        hooks={"relay_to_tir": "target.woofles.lower"},
    ))

Back ends, the built-in ``c`` included, register their kind through that same call from
their own package. A package makes its kinds known without being imported first through
an entry point in the group ``ember.target_kinds`` (name: the kind, value: the module
whose import registers it); ember's own ``pyproject.toml`` declares ``c`` that way, and a
lookup of an unregistered kind imports the module its entry point names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from ember.errors import EmberValueError, RegistryError
from ember.support.registry import Registry
from ember.target.cpu import CpuInfo

#: hook attribute names a target kind may carry (design document 003).
HOOKS: tuple[str, ...] = ("relay_to_tir", "tir_to_runtime", "relay_to_runtime", "constant_updater")

#: DLPack device type codes of the devices targets run on.
DEVICE_CPU = 1

#: the entry-point group through which packages announce target kinds.
ENTRY_POINT_GROUP = "ember.target_kinds"


@dataclass(frozen=True)
class TargetOption:
    """One option of a target kind: its Python type, default and help text."""

    kind: type
    default: Any
    help: str = ""
    #: returns why a value is refused (e.g. "must be 0-3"), or None when it is fine.
    check: Callable[[Any], str | None] | None = None

    def parse(self, text: str, where: str) -> Any:
        """Convert the option's text from a target string to its typed, checked value."""
        try:
            if self.kind is bool:
                low = text.lower()
                if low not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                    raise ValueError(text)
                value: Any = low in ("1", "true", "on", "yes")
            else:
                value = self.kind(text)
        except ValueError:
            raise EmberValueError(
                f"{where}: cannot read {text!r} as {self.kind.__name__}"
            ) from None
        return self.validate(value, where)

    def validate(self, value: Any, where: str) -> Any:
        """Return ``value`` if this option accepts it, else raise naming why."""
        problem = self.check(value) if self.check is not None else None
        if problem:
            raise EmberValueError(f"{where} {problem}, got {value!r}")
        return value


@dataclass(frozen=True)
class TargetKind:
    """A registered kind of target (``c``, ``llvm``, an external codegen ...)."""

    name: str
    device_type: int = DEVICE_CPU
    options: Mapping[str, TargetOption] = field(default_factory=dict)
    hooks: Mapping[str, str] = field(default_factory=dict)
    doc: str = ""
    #: schedule keys of this kind, tried before the CPU's (e.g. ``("mylib",)``).
    keys: tuple[str, ...] = ()
    #: the CPU record of a target of this kind from its option values (None: ``-mcpu``'s,
    #: ember.target.cpu.cpu_info); a kind whose options also name a triple or features says
    #: what they change (llvm: -mtriple, -mattr).
    cpu: Callable[[Mapping[str, Any]], CpuInfo] | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.hooks) - set(HOOKS))
        if unknown:
            raise EmberValueError(
                f"target kind '{self.name}': unknown hooks {unknown}; known: {', '.join(HOOKS)}"
            )


TARGET_KINDS: Registry[TargetKind] = Registry("target kind")


def register_target_kind(kind: TargetKind, override: bool = False) -> TargetKind:
    """Register a target kind; duplicates raise unless ``override``."""
    return TARGET_KINDS.register(kind.name, kind, override=override)


def get_target_kind(name: str) -> TargetKind:
    """Look up a target kind by name, importing the back end an entry point names for it."""
    if name not in TARGET_KINDS:
        _load_entry_points(name)
    try:
        return TARGET_KINDS.get(name)
    except RegistryError as err:
        raise RegistryError(
            f"{err} (back ends announce kinds through '{ENTRY_POINT_GROUP}' entry points; "
            "if 'c' is missing, ember is not installed: run `pip install -e .` in its checkout)"
        ) from None


def list_target_kinds() -> list[str]:
    """Names of all registered target kinds, every announced back end loaded."""
    _load_entry_points(None)
    return TARGET_KINDS.names()


def _load_entry_points(name: str | None) -> None:
    """Import the module of every ``ember.target_kinds`` entry point (or only ``name``'s)."""
    for ep in _announced():
        if (name is None or ep.name == name) and ep.name not in TARGET_KINDS:
            try:
                importlib.import_module(ep.value.partition(":")[0])
            except ImportError as err:
                raise RegistryError(
                    f"target kind '{ep.name}': its back end module {ep.value!r} failed to "
                    f"import ({err}); reinstall the package that provides it"
                ) from err


def _announced() -> tuple[EntryPoint, ...]:
    return tuple(sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name))
