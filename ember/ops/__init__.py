"""Operator implementations: compute definitions, CPU schedules and legalizers per op."""

from ember.ops.registry import (
    ScheduleContext,
    find_legalizer,
    find_schedule,
    get_compute,
    has_compute,
    register_compute,
    register_legalize,
    register_schedule,
)

__all__ = [
    "ScheduleContext",
    "find_legalizer",
    "find_schedule",
    "get_compute",
    "has_compute",
    "register_compute",
    "register_legalize",
    "register_schedule",
]
