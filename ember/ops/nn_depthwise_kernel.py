"""3x3 float32 channels-last depthwise tiles as calls of ``ember_f32_dw3x3``
(ember/codegen/c/f32_depthwise.py) on AVX-512 C targets.

The channels-last depthwise compute (ember.ops.nn_conv_nhwc.depthwise_nhwc) tests the
padding inside its innermost vector loop; the schedule (schedule_channels_last through
ember.ops.nn_depthwise.schedule_depthwise) lowers a tile of it to::

    for rk0 in range(3):              # kernel rows
      for rk1 in range(3):            # kernel columns
        for j in unrolled(ncols):     # the tile's positions along one output row
          for lane in vectorized(16):
            acc[j, lane] = acc[j, lane] + select(inside, x[..], 0) * w[.., lane]

``depthwise_kernel_rewrite`` replaces that nest by one kernel call; the kernel keeps the 9
weights in registers and splits interior positions (no test) from border ones, with every
accumulator's fused multiply-adds in the loop's order (bitwise equal). The row's offsets
and bounds are read off the index expressions and the ``inside`` conjuncts (affine in the
loop variables, checked; anything else keeps the loop nest). ``dw_tile_cols`` widens the
tile to a whole output row (DW_MAX_COLS at most), so that a call covers a row of a block.
The llvm kinds keep the loop IR (they have no copy of the kernel). A tile of at most 8
positions whose epilogue is a bias with ReLU or ReLU6 (or none) becomes one call of the
kernel with its epilogue (ember.ops.nn_depthwise_epilogue), bitwise equal too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ember.ops.nn_conv_f32 import BLOCK
from ember.ops.nn_conv_nhwc import channels_last_stage
from ember.ops.nn_conv_rewrite import (
    affine_accesses,
    affine_form,
    conjuncts,
    const_extents,
    flat_index,
    loop_chain,
)
from ember.ops.nn_depthwise_epilogue import fold_epilogue
from ember.ops.nn_schedule import _extent
from ember.ops.registry import ScheduleContext
from ember.target import Target
from ember.tir import IRMutator, PrimFunc, simplify, te
from ember.tir.expr import (
    GE,
    LT,
    Add,
    BufferLoad,
    Call,
    FloatImm,
    IntImm,
    Mul,
    PrimExpr,
    Select,
)
from ember.tir.expr import const as tir_const
from ember.tir.functor import free_vars
from ember.tir.op import call_extern, cast
from ember.tir.stmt import BufferStore, Evaluate, For, ForKind, SeqStmt, Stmt, seq

#: the kernel's call_extern name (ember.codegen.c.f32_depthwise.DEPTHWISE_KERNEL_NAME).
DEPTHWISE_KERNEL = "ember_f32_dw3x3"

#: the PassContext config key: False keeps the loop-IR tiles on every target (the same
#: bits; for A/B timing); unset or True: AVX-512 C targets call DEPTHWISE_KERNEL for 3x3
#: channels-last depthwise tiles.
DEPTHWISE_KERNEL_CONFIG = "nn.depthwise_kernel"

#: the build's DEPTHWISE_KERNEL_CONFIG value while its kernels are lowered (ember.driver
#: .pipeline sets it; the default outside a build: on).
_KERNEL_ON: ContextVar[bool] = ContextVar("ember_depthwise_kernel", default=True)


@contextmanager
def depthwise_kernel_scope(config: Mapping[str, Any]) -> Iterator[None]:
    """Lower kernels with the build's ``config`` (its DEPTHWISE_KERNEL_CONFIG value)."""
    token = _KERNEL_ON.set(bool(config.get(DEPTHWISE_KERNEL_CONFIG, True)))
    try:
        yield
    finally:
        _KERNEL_ON.reset(token)


#: the widest tile (positions of one output row) of a kernel call: its accumulators
#: (DW_MAX_COLS x 64 bytes, 16 KiB) stay in L1 between the call and the epilogue.
DW_MAX_COLS = 256

# The schedule keeps channels-last depthwise tiles ``rows, blocks`` (a row's blocks in
# turn: every input cache line used whole while it is there) with the kernel too. A
# block's rows in turn (its three input rows kept in L1 for the next output row) measured
# 0.58-0.88x on layers alone with inputs up to 1.8 MB (warm caches) but lost in the model,
# whose inputs come fresh from the previous 1x1: mobilenet_v2, one thread, thread CPU
# time, A/B in one process, load 9, new/old whole model 0.943 with a row's blocks in turn,
# 0.964 with a block's rows in turn up to 2 MiB inputs; per layer in the model 0.77-0.98
# against 0.74-1.09.

#: a bound no index reaches: the side of the input without padding (no conjunct).
_NO_BOUND = 1 << 30


def depthwise_kernel_target(target: Target | None) -> bool:
    """Whether ``target`` calls the depthwise kernel: the c kind on AVX-512 CPUs."""
    if target is None or not _KERNEL_ON.get():
        return False
    keys = set(target.keys)
    return "x86-avx512" in keys and "llvm" not in keys


def dw_tile_cols(target: Target | None, width: int, taps: tuple[int, ...], block: int) -> int:
    """Columns of a channels-last depthwise tile on ``target`` when the kernel takes it:
    the whole output row (``width``) for 3x3 taps, blocks of 16 and rows of at most
    DW_MAX_COLS (wider rows: their widest divisor up to it, if at least half of it), else 0
    (the schedule's own choice)."""
    if not depthwise_kernel_target(target) or tuple(taps) != (3, 3) or block != BLOCK:
        return 0
    if width < 1:
        return 0
    top = min(width, DW_MAX_COLS)
    best = max(d for d in range(1, top + 1) if width % d == 0)
    return best if 2 * best >= top else 0


def depthwise_kernel_cols(ctx: ScheduleContext) -> int:
    """The tile columns of the group's channels-last depthwise convolution when it calls
    the kernel (dw_tile_cols), else 0."""
    acc = channels_last_stage(ctx)
    op = acc.op if acc is not None else None
    if not isinstance(op, te.ComputeOp) or len(op.axis) != 4:
        return 0
    taps = tuple(_extent(r) for r in op.reduce_axis)
    return dw_tile_cols(ctx.target, _extent(op.axis[2]), taps, int(op.attrs.get("block", 0)))


def _bound(
    conds: list[PrimExpr], loops: list[For], coefs: list[int]
) -> tuple[PrimExpr, PrimExpr] | None:
    """(start, limit) of the index whose coefficients over ``loops`` are ``coefs`` in the
    conjuncts ``conds`` (``a >= lo`` and ``a < hi``, lo and hi free of the loops): the
    index at the loops' zero minus lo, and hi minus lo (_NO_BOUND without an upper
    conjunct); None when both conjuncts are missing."""
    lower: PrimExpr | None = None
    upper: tuple[PrimExpr, PrimExpr] | None = None
    for c in conds:
        if not isinstance(c, GE | LT):
            continue
        form = affine_form(c.a, loops)
        if form is None or form[1] != coefs:
            continue
        if isinstance(c, GE):
            lower = simplify(form[0] - c.b)
        else:
            upper = (form[0], c.b)
    if lower is None and upper is None:
        return None
    if lower is None:
        assert upper is not None
        return upper
    if upper is None:
        return lower, tir_const(_NO_BOUND, "int32")
    return lower, simplify(upper[1] - upper[0] + lower)


def _match(loop: For) -> Stmt | None:
    """The kernel call replacing the depthwise tile nest at ``loop`` (None if it does not
    fit)."""
    loops, body = loop_chain(loop)
    if len(loops) not in (3, 4) or not isinstance(body, BufferStore):
        return None
    if not const_extents(loops):
        return None
    rows, cols, *pos, lane = loops  # no position loop: a tile of one position
    extents = [int(f.extent.value) for f in loops]  # type: ignore[attr-defined]
    if extents[0] != 3 or extents[1] != 3 or extents[-1] != BLOCK:
        return None
    if rows.kind != ForKind.SERIAL or cols.kind != ForKind.SERIAL:
        return None
    if any(f.kind not in (ForKind.UNROLLED, ForKind.SERIAL) for f in pos):
        return None
    if lane.kind != ForKind.VECTORIZED:
        return None
    value = body.value
    if body.buffer.dtype != "float32" or not isinstance(value, Add):
        return None
    acc, prod = (value.a, value.b) if isinstance(value.b, Mul) else (value.b, value.a)
    if not isinstance(acc, BufferLoad) or acc.buffer is not body.buffer:
        return None
    if tuple(acc.indices) != tuple(body.indices) or not isinstance(prod, Mul):
        return None
    xv, wl = prod.a, prod.b
    conds: list[PrimExpr] = []
    if isinstance(xv, Select):
        zero = xv.false_value
        if not isinstance(zero, FloatImm) or zero.value != 0.0:
            return None
        conds = conjuncts(xv.condition)
        xv = xv.true_value
    if not isinstance(xv, BufferLoad) or not isinstance(wl, BufferLoad):
        return None
    if xv.buffer.dtype != "float32" or wl.buffer.dtype != "float32":
        return None
    forms = affine_accesses((body, xv, wl), loops)
    if forms is None:
        return None
    (abase, acoef), (xbase, xcoef), (wbase, wcoef) = forms
    ncols = extents[2] if pos else 1
    if not pos:  # coefficients of the missing position loop: 0
        acoef, xcoef, wcoef = ([*c[:2], 0, c[2]] for c in (acoef, xcoef, wcoef))
        acoef[2] = BLOCK
    if not isinstance(abase, IntImm) or abase.value != 0 or acoef != [0, 0, BLOCK, 1]:
        return None
    if xcoef[3] != 1 or wcoef[2:] != [0, 1] or xcoef[2] < 0:
        return None
    loop_vars = {f.loop_var for f in loops}
    cs = xcoef[2] // max(xcoef[1], 1)
    row_coefs = [1, 0, 0, 0] if pos else [1, 0, 0]
    col_coefs = [0, 1, cs, 0] if pos else [0, 1, 0]
    for c in conds:  # every conjunct bounds the tile's row or its column
        if not isinstance(c, GE | LT):
            return None
        form = affine_form(c.a, loops)
        if form is None or free_vars(c.b) & loop_vars:
            return None
        if form[1] not in (row_coefs, col_coefs):
            return None
    zero = tir_const(0, "int32")
    far = tir_const(_NO_BOUND, "int32")
    r0, rn = _bound(conds, loops, row_coefs) or (zero, far)
    c0, cn = _bound(conds, loops, col_coefs) or (zero, far)
    ints = [xcoef[0], xcoef[1], xcoef[2], wcoef[0], wcoef[1]]
    if any(abs(v) >= 2**31 for v in ints) or xcoef[2] % max(xcoef[1], 1):
        return None
    bounds = [cast("int32", e) for e in (r0, rn, c0)]
    args: list[Any] = [body.buffer.data, xv.buffer.data, wl.buffer.data]
    args += [cast("int64", simplify(xbase)), cast("int64", simplify(wbase))]
    args += [tir_const(ncols, "int32"), *(tir_const(v, "int32") for v in ints)]
    args += [*bounds, tir_const(cs, "int32"), cast("int32", cn), tir_const(0, "int32")]
    return Evaluate(call_extern("int32", DEPTHWISE_KERNEL, *args))


def _zeroes(s: Stmt, acc: Any, ncols: int) -> bool:
    """Whether ``s`` sets the ``ncols`` x 16 floats of buffer ``acc`` to +0 (the loop IR's
    zeroing of a tile: position loop, if any, around a vectorized loop of 16 lanes)."""
    if not isinstance(s, For):
        return False
    loops, body = loop_chain(s)
    if not isinstance(body, BufferStore) or body.buffer.data is not acc:
        return False
    value = body.value
    if not isinstance(value, FloatImm) or value.value != 0.0 or math.copysign(1, value.value) < 0:
        return False
    if not const_extents(loops) or len(loops) != (2 if ncols > 1 else 1):
        return False
    flat = flat_index(body)
    form = affine_form(flat, loops) if flat is not None else None
    want = [BLOCK, 1] if ncols > 1 else [1]
    extents = [int(f.extent.value) for f in loops]  # type: ignore[attr-defined]
    if form is None or form[1] != want or extents != [ncols, BLOCK][-len(loops) :]:
        return False
    return isinstance(form[0], IntImm) and form[0].value == 0


def _kernel_call(s: Stmt) -> Any:
    """The call of ``s`` when it is an Evaluate of DEPTHWISE_KERNEL, else None."""
    if isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.op == DEPTHWISE_KERNEL:
        return s.value
    return None


class _Rewrite(IRMutator):
    def visit_For(self, s: For) -> Stmt:  # noqa: N802 - visitor naming
        if s.kind == ForKind.SERIAL:
            new = _match(s)
            if new is not None:
                return new
        return self.generic_stmt(s)

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:  # noqa: N802 - visitor naming
        """The calls with their tile's zeroing just before them folded in (``zero`` set)."""
        out: list[Stmt] = []
        for stmt in (self.visit_stmt(t) for t in s.seq):
            call = _kernel_call(stmt)
            if call is not None and out:
                ncols = int(call.args[5].value)
                if _zeroes(out[-1], call.args[0], ncols):
                    zeroed = dataclasses.replace(
                        call, args=(*call.args[:-1], tir_const(1, "int32"))
                    )
                    out[-1] = Evaluate(zeroed)
                    continue
            out.append(stmt)
        if len(out) >= 2:  # a small tile's epilogue, last in its block: into the call
            call = _kernel_call(out[-2])
            folded = fold_epilogue(call, out[-1]) if call is not None else None
            if folded is not None:
                out[-2:] = [folded]
        return seq(*out)


def depthwise_kernel_rewrite(func: PrimFunc) -> PrimFunc:
    """``func`` with every matching 3x3 depthwise tile nest a call of ember_f32_dw3x3."""
    return _Rewrite().visit_func(func)
