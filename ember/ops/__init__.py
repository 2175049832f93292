"""Operator implementations: compute definitions, CPU schedules and legalizers per op."""

# the built-in implementations register through the calls above; any import of ember.ops.*
# runs this package first, so a lookup always sees them
from ember.ops import builtin  # noqa: E402, F401, I001
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
