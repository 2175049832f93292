"""Which serial loops the LLVM back end asks LLVM to unroll completely.

A serial loop nest of at most ``FULL_UNROLL_TRIPS`` constant iterations in all (a 3x3
kernel window) carries ``llvm.loop.unroll.full``. Turning LLVM's own unroller off and
relying on these hints alone saved 40% of ResNet-50's optimisation time, but it exposed a
wrong result (ONNX Tile on llvm), so the unroller is on again (``worker.run_pipeline``).
"""

from __future__ import annotations

from ember.tir.expr import IntImm
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

#: the most iterations (all loops of the nest together) a fully unrolled nest may have
FULL_UNROLL_TRIPS = 16
_SERIAL = (ForKind.SERIAL, ForKind.UNROLLED)


def nest_trips(s: Stmt) -> int | None:
    """Iterations of the loop nest in ``s`` (1 without loops), None when a loop in it is
    not serial, has a non-constant extent, or the count passes ``FULL_UNROLL_TRIPS``."""
    if isinstance(s, For):
        if s.kind not in _SERIAL or not isinstance(s.extent, IntImm):
            return None
        inner = nest_trips(s.body)
        if inner is None or s.extent.value * inner > FULL_UNROLL_TRIPS:
            return None
        return s.extent.value * inner
    if isinstance(s, SeqStmt):
        most = 1
        for x in s.seq:
            got = nest_trips(x)
            if got is None:
                return None
            most = max(most, got)
        return most
    if isinstance(s, IfThenElse):
        parts = [s.then_case] + ([s.else_case] if s.else_case is not None else [])
        found = [nest_trips(x) for x in parts]
        return None if None in found else max(x for x in found if x is not None)
    if isinstance(s, LetStmt | Allocate | AssertStmt):
        return nest_trips(s.body)
    return 1


def unroll_fully(s: For) -> bool:
    """True when loop ``s`` should carry ``llvm.loop.unroll.full``."""
    return s.kind in _SERIAL and nest_trips(s) is not None
