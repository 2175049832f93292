"""Target kinds: what a target string's first word names, with its options and hooks.

A kind carries the four hook attributes of design document 003; each names a function in
the global function registry, so an external code generator plugs in at one stage::

    register_target_kind(TargetKind(
        "woofles", device_type=1,
        hooks={"relay_to_tir": "target.woofles.lower"},
    ))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ember.errors import EmberValueError
from ember.support.registry import Registry

#: hook attribute names a target kind may carry (design document 003).
HOOKS: tuple[str, ...] = ("relay_to_tir", "tir_to_runtime", "relay_to_runtime", "constant_updater")

#: DLPack device type codes of the devices targets run on.
DEVICE_CPU = 1


@dataclass(frozen=True)
class TargetOption:
    """One option of a target kind: its Python type, default and help text."""

    kind: type
    default: Any
    help: str = ""

    def parse(self, text: str, where: str) -> Any:
        """Convert the option's text from a target string to its typed value."""
        try:
            if self.kind is bool:
                low = text.lower()
                if low not in ("1", "0", "true", "false", "on", "off", "yes", "no"):
                    raise ValueError(text)
                return low in ("1", "true", "on", "yes")
            return self.kind(text)
        except ValueError:
            raise EmberValueError(
                f"{where}: cannot read {text!r} as {self.kind.__name__}"
            ) from None


@dataclass(frozen=True)
class TargetKind:
    """A registered kind of target (``c``, ``llvm``, an external codegen ...)."""

    name: str
    device_type: int = DEVICE_CPU
    options: Mapping[str, TargetOption] = field(default_factory=dict)
    hooks: Mapping[str, str] = field(default_factory=dict)
    doc: str = ""

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
    """Look up a target kind by name (the error names the known kinds)."""
    _ensure_builtin_kinds()
    return TARGET_KINDS.get(name)


def list_target_kinds() -> list[str]:
    """Names of all registered target kinds."""
    _ensure_builtin_kinds()
    return TARGET_KINDS.names()


def _ensure_builtin_kinds() -> None:
    """Register the built-in kinds once, through the same public call users make."""
    from ember.target import builtin  # noqa: F401  (registers on first import)
