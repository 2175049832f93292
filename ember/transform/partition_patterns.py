"""Pattern tables: which ops (and chains of ops) an external target kind takes over.

A back end registers one table per kind; the partitioner (:mod:`ember.transform.partition`)
matches them against the graph. A pattern is a chain of op names, producer first: each op
after the first takes the previous one's result as one of its arguments, and every op but
the last has no other user. ``check`` sees the matched calls (in chain order) and may
refuse a match (a dtype, an attribute, a shape)::

    register_pattern_table("mylib", [
        Pattern("mylib.conv_bias_relu", ("nn.conv", "add", "nn.relu"), dtype_is("float32")),
        Pattern("mylib.matmul", ("nn.matmul",), dtype_is("float32")),
    ])

Longer patterns are tried first, so a conv+bias+relu wins over a lone conv.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember.errors import EmberValueError
from ember.ir.expr import Call
from ember.ir.types import TensorType
from ember.support.registry import Registry

#: a predicate over the calls one pattern matched, in chain order.
Check = Callable[[Sequence[Call]], bool]


@dataclass(frozen=True)
class Pattern:
    """A named chain of ops (producer first) with an optional predicate on the match."""

    name: str
    ops: tuple[str, ...]
    check: Check | None = None

    def __post_init__(self) -> None:
        if not self.ops:
            raise EmberValueError(f"pattern '{self.name}' needs at least one op name")
        object.__setattr__(self, "ops", tuple(self.ops))

    def accepts(self, calls: Sequence[Call]) -> bool:
        """Whether ``check`` (if any) accepts the matched calls."""
        return self.check is None or bool(self.check(calls))


@dataclass(frozen=True)
class PatternTable:
    """A kind's patterns (longest first) and whether neighbouring matches merge into one
    region (False when the kind's hooks take exactly one matched pattern per region)."""

    patterns: tuple[Pattern, ...]
    merge: bool = True


PATTERN_TABLES: Registry[PatternTable] = Registry("pattern table")


def register_pattern_table(
    kind: str, patterns: Sequence[Pattern], override: bool = False, merge: bool = True
) -> PatternTable:
    """Register the pattern table of target kind ``kind`` (longest patterns tried first);
    ``merge=False`` keeps every match a region of its own."""
    table = PatternTable(tuple(sorted(patterns, key=lambda p: -len(p.ops))), merge)
    return PATTERN_TABLES.register(kind, table, override=override)


def get_pattern_table(kind: str) -> PatternTable:
    """The pattern table of ``kind``; an empty one when it registered none."""
    return PATTERN_TABLES.get(kind) if kind in PATTERN_TABLES else PatternTable(())


def dtype_is(*dtypes: str) -> Check:
    """A check: every matched call's inputs and result have one of ``dtypes``."""

    def check(calls: Sequence[Call]) -> bool:
        types = [a.type for c in calls for a in c.args] + [c.type for c in calls]
        return all(isinstance(t, TensorType) and t.dtype in dtypes for t in types)

    return check


def all_of(*checks: Check) -> Check:
    """A check that holds when every one of ``checks`` holds."""
    return lambda calls: all(c(calls) for c in checks)
