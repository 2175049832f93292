"""Loop hints of the LLVM back end: full unrolling, and loops LLVM must not vectorize.

A serial loop nest of at most ``FULL_UNROLL_TRIPS`` constant iterations in all (a 3x3
kernel window) carries ``llvm.loop.unroll.full`` (LLVM's own unroller is off,
``worker.run_pipeline``), unless it gathers or scatters lane by lane over more than
``GATHER_UNROLL_TRIPS`` iterations (written out, such a nest costs LLVM's loop-load
elimination time quadratic in its scalar accesses). So does a vectorized loop of 32 to
128 constant iterations (``VECTOR_UNROLL_LANES``) whose body is one reduction update
(``acc[j] += x[k] * w[k, j]`` over 128 columns): LLVM vectorizes it, then unrolls the
vector loop, so the accumulators have constant offsets and stay in registers across the
enclosing reduction, as gcc keeps them (dense_autoencoder's 640 -> 128 layer: 1.4x c's
time before, 0.8-1.05 after). Other vectorized loops stay rolled (unrolling ds_cnn_kws's
guarded and strided ones doubled its depthwise kernel's time; unrolling the shorter rows
at ResNet-50's conv tile edges cost 1.6 CPU s of LLVM time).

A loop whose body takes an integer remainder by a power of two of a value that depends on
the loop's own variable (``p0[4*k + i % 4]``, ONNX Tile; ``unsafe_to_vectorize``) carries
``llvm.loop.vectorize.enable false``: LLVM 22's loop vectorizer reads ``base | (i & 3)``
as ``base + i`` and loads contiguous vectors (tests/codegen/llvm/data/
lv_disjoint_or_mask.ll, docs/llvm.md "Known LLVM bug").
"""

from __future__ import annotations

from typing import Any

from ember.codegen.llvm.contract import reduction_update
from ember.codegen.llvm.ir_text import ModuleContext
from ember.tir import dtype as dt
from ember.tir.expr import Broadcast, BufferLoad, FloorMod, IntImm, Let, Mod, PrimExpr, Ramp, Var
from ember.tir.functor import IRVisitor, free_vars, post_order_visit
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

_FORCE = '!{!"llvm.loop.vectorize.enable", i1 true}'
#: the most iterations (all loops of the nest together) a fully unrolled nest may have
FULL_UNROLL_TRIPS = 16
#: the most iterations of a fully unrolled nest that gathers or scatters (accesses lane by
#: lane: not one contiguous vector): ResNet-50's channel-blocking copies and the scatters
#: after its tile kernels (14-16 iterations of 16-lane accesses, 224-448 scalar loads or
#: stores in one block once unrolled) took LLVM's loop-load elimination up to 1.6 CPU s
#: per kernel, 6 of the 8.4 s of optimisation; mobilenet_v2's (4-7 iterations) stay
#: unrolled (kept rolled they cost it 8% of its time)
GATHER_UNROLL_TRIPS = 9
_SERIAL = (ForKind.SERIAL, ForKind.UNROLLED)
#: the iterations of a vectorized reduction row LLVM is asked to unroll after vectorizing
#: it: rows of 4 to 16 AVX2 vectors (shorter rows, the edges of conv tiles, cost ResNet-50
#: 1.6 CPU s of LLVM time for nothing)
VECTOR_UNROLL_LANES = (32, 128)


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
    if s.kind is ForKind.VECTORIZED:
        return (
            isinstance(s.extent, IntImm)
            and VECTOR_UNROLL_LANES[0] <= s.extent.value <= VECTOR_UNROLL_LANES[1]
            and isinstance(s.body, BufferStore)
            and reduction_update(s.body) is not None
        )
    if s.kind not in _SERIAL:
        return False
    trips = nest_trips(s)
    return trips is not None and (trips <= GATHER_UNROLL_TRIPS or not unrolled_gather_lanes(s))


def _gather_lanes(e: BufferLoad | BufferStore) -> int:
    """The lanes of a vector load or store that is not one contiguous vector, else 0."""
    lanes = dt.lanes_of(e.value.dtype if isinstance(e, BufferStore) else e.dtype)
    index = e.indices[-1] if e.indices else None
    contiguous = isinstance(index, Ramp) and index.stride == IntImm(index.stride.dtype, 1)
    return 0 if lanes == 1 or contiguous or isinstance(index, Broadcast) else lanes


def unrolled_gather_lanes(s: Stmt) -> int:
    """The gather lanes (``_gather_lanes``) of ``s`` with its constant loops written out."""
    if isinstance(s, For):
        trips = s.extent.value if isinstance(s.extent, IntImm) else 1
        return trips * unrolled_gather_lanes(s.body)
    if isinstance(s, SeqStmt):
        return sum(unrolled_gather_lanes(x) for x in s.seq)
    if isinstance(s, IfThenElse):
        parts = [s.then_case] + ([s.else_case] if s.else_case is not None else [])
        return sum(unrolled_gather_lanes(x) for x in parts)
    if isinstance(s, LetStmt | Allocate | AssertStmt):
        return unrolled_gather_lanes(s.body)
    count: list[int] = []

    def fn(n: Any) -> None:
        if isinstance(n, BufferLoad | BufferStore):
            count.append(_gather_lanes(n))

    post_order_visit(s, fn)
    return sum(count)


def _power_of_two_divisor(e: Mod | FloorMod) -> bool:
    """True for an integer remainder by a constant power of two (LLVM turns it into a mask)."""
    b = e.b
    return (
        (dt.is_int(e.dtype) or dt.is_uint(e.dtype))
        and isinstance(b, IntImm)
        and b.value > 1
        and b.value & (b.value - 1) == 0
    )


class _MaskOfLoopVar(IRVisitor):
    """Finds a power-of-two remainder of a value depending on one loop's variable."""

    def __init__(self, var: Var) -> None:
        self.dependent: set[Var] = {var}
        self.found = False

    def depends(self, *exprs: PrimExpr) -> bool:
        """True when any of ``exprs`` uses a variable that depends on the loop variable."""
        return any(not self.dependent.isdisjoint(free_vars(e)) for e in exprs)

    def bind(self, var: Var, *exprs: PrimExpr) -> None:
        """Record ``var`` (a let or an inner loop variable) as dependent if its value is."""
        if self.depends(*exprs):
            self.dependent.add(var)

    def visit_LetStmt(self, s: LetStmt) -> None:
        self.bind(s.var, s.value)
        self.generic_visit(s)

    def visit_Let(self, e: Let) -> None:
        self.bind(e.var, e.value)
        self.generic_visit(e)

    def visit_For(self, s: For) -> None:
        self.bind(s.loop_var, s.min, s.extent)
        self.generic_visit(s)

    def remainder(self, e: Mod | FloorMod) -> None:
        """Check one remainder, then its operands."""
        if not self.found and _power_of_two_divisor(e) and self.depends(e.a):
            self.found = True
        self.generic_visit(e)

    def visit(self, node: Any) -> None:
        if self.found:
            return
        if isinstance(node, Mod | FloorMod):
            self.remainder(node)
        else:
            super().visit(node)


def unsafe_to_vectorize(s: For) -> bool:
    """True when LLVM's loop vectorizer must stay off loop ``s``: its body takes a
    power-of-two remainder of a value that depends on ``s``'s variable."""
    finder = _MaskOfLoopVar(s.loop_var)
    finder.visit(s.body)
    return finder.found


def has_remainder(node: Stmt) -> bool:
    """True when ``node`` takes any integer remainder by a power of two (one walk; a
    function without one needs no per-loop check)."""
    found: list[bool] = []

    def fn(n: Any) -> None:
        if isinstance(n, Mod | FloorMod) and _power_of_two_divisor(n):
            found.append(True)

    post_order_visit(node, fn)
    return bool(found)


def vectorize_hints(ctx: ModuleContext, s: For, remainders: bool = True) -> list[str]:
    """``llvm.loop.vectorize.enable`` of loop ``s``: false (whatever its kind) when LLVM
    would miscompile it (``unsafe_to_vectorize``; only checked when the function has
    ``remainders``), true for a vectorized loop."""
    if remainders and unsafe_to_vectorize(s):
        return [ctx.node('!{!"llvm.loop.vectorize.enable", i1 false}')]
    if s.kind is ForKind.VECTORIZED:
        return [ctx.node(_FORCE)]
    return []


def without_force_if_exits(ctx: ModuleContext, hints: list[str], body: list[str]) -> list[str]:
    """``hints`` without the one forcing the vectorizer when the loop's ``body`` (lines of
    IR) returns early (a failing check): LLVM cannot vectorize such a loop and would print
    a warning."""
    if not any(line.startswith("  ret ") for line in body):
        return hints
    return [h for h in hints if not ctx.metadata[int(h[1:])].endswith(_FORCE)]


def loop_metadata(ctx: ModuleContext, s: For, remainders: bool) -> tuple[list[str], str]:
    """The loop hints of a serial, unrolled or vectorized loop ``s`` and the access group
    its accesses are tagged with (a vectorized loop's, else empty)."""
    hints: list[str] = []
    group = ""
    if s.kind is ForKind.VECTORIZED:
        group = ctx.node("!{}", distinct=True)
        hints.append(ctx.node(f'!{{!"llvm.loop.parallel_accesses", {group}}}'))
    if unroll_fully(s):
        hints.append(ctx.node('!{!"llvm.loop.unroll.full"}'))
    return hints + vectorize_hints(ctx, s, remainders), group
