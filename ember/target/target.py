"""Target: a target kind plus option values, parsed from a string like ``"c -mcpu=skylake"``."""

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

    @staticmethod
    def create(spec: str | Target, host: str | Target | None = None) -> Target:
        """Parse ``spec`` (``"<kind> -opt=value ..."``) into a Target with all defaults filled."""
        if isinstance(spec, Target):
            return spec if host is None else Target(spec.kind, spec.attrs, Target.create(host))
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
        return Target(self.kind, dict(sorted(values.items())), self.host)

    @property
    def cpu(self) -> CpuInfo:
        """Vector resources of the CPU this target compiles for (``-mcpu``, else the host)."""
        mcpu = self.attrs.get("mcpu", "native")
        return cpu_info(mcpu if isinstance(mcpu, str) else "native")

    @property
    def keys(self) -> tuple[str, ...]:
        """Keys schedules are registered under, most specific first: the kind's own, then
        the CPU's (e.g. ``x86-avx512``, ``x86``, ``cpu``)."""
        return tuple(dict.fromkeys((*self.kind.keys, *self.cpu.keys)))

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
        parts = [self.kind.name]
        for name, value in sorted(self.attrs.items()):
            default = self.kind.options[name].default if name in self.kind.options else None
            if value != default:
                text = str(value).lower() if isinstance(value, bool) else str(value)
                parts.append(f"-{name}={text}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Target({str(self)!r})"


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
