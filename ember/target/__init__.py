"""Targets: Target, the TargetKind registry and its hook attributes."""

from ember.target.kind import (
    HOOKS,
    TargetKind,
    TargetOption,
    get_target_kind,
    list_target_kinds,
    register_target_kind,
)
from ember.target.target import Target

__all__ = [
    "HOOKS",
    "Target",
    "TargetKind",
    "TargetOption",
    "get_target_kind",
    "list_target_kinds",
    "register_target_kind",
]
