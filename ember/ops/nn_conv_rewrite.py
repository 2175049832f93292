"""The rewrite of packed float32 convolution tiles into calls of the C micro-kernels
(``ember_f32_conv_tile``, its pair ``ember_f32_conv_tile2`` and the narrow kernels of 8 and
24 channels; the predicates and tile sizes are ember.ops.nn_conv_f32's).

``tile_kernel_rewrite`` replaces each guard-free reduction nest of this shape in the
lowered PrimFunc (ember.ops.nn_conv_lanes calls it with the operands' roles exchanged)::

    for rc, rk0, rk1:             # serial reduction loops (1 to 3)
      for r, t in unrolled:       # the tile's positions (1 or 2 loops)
        for b in range(2):        # only in tiles of two blocks of 16 channels
          for lane in vectorized(16):
            acc[.., r, t, b, lane] = acc[.., r, t, b, lane] + x[..] * w[.., b, lane]

by one call of the kernel (ember/codegen/c/f32_kernels.py, f32_pair.py for two blocks)
with the flat offsets and strides of ``x`` and ``w``, read off the index expressions
(affine in the loop variables: checked, else the nest stays). The zeroing of the
accumulators before and the fused epilogue after stay loop IR; tiles with guards (a row's
tail) keep the loop nest too.

A pair tile whose input load is ``select(inside, x[..], 0)`` (a padded convolution reading
its input in place: ember.ops.nn_conv_pair.pad_free) calls ``ember_f32_conv_tile2_pad``
with the conjuncts of ``inside`` as padding arguments (_pad_bounds).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.ir.ops.nn_conv_weights import LANE_GROUP_WIDTHS
from ember.ops.nn_conv_f32 import BLOCK, MAX_REDUCE_LOOPS
from ember.ops.nn_conv_narrow import NARROW_INTERPRET_EXTERNS, NARROW_KERNELS, tile_reference
from ember.ops.nn_conv_pair import (
    PAD_CONDS,
    PAD_MAX_CHANNELS,
    PAIR_BLOCKS,
    PAIR_KERNEL,
    PAIR_PAD_KERNEL,
)
from ember.tir import IRMutator, PrimFunc, simplify, substitute
from ember.tir.expr import (
    GE,
    LT,
    Add,
    BufferLoad,
    FloatImm,
    IntImm,
    Mul,
    PrimExpr,
    Select,
    const,
)
from ember.tir.functor import free_vars
from ember.tir.op import call_extern, cast
from ember.tir.op import min as tir_min
from ember.tir.simplify import conjuncts
from ember.tir.stmt import BufferStore, Evaluate, For, ForKind, IfThenElse, Stmt


def flat_index(load: BufferLoad | BufferStore) -> PrimExpr | None:
    """The row-major element offset of an access (None for strided or dynamic buffers)."""
    buf = load.buffer
    shape = buf.const_shape()
    if (
        shape is None
        or buf.strides
        or not (isinstance(buf.elem_offset, IntImm) and buf.elem_offset.value == 0)
    ):
        return None
    dtypes = {idx.dtype for idx in load.indices}
    if len(dtypes) != 1:
        return None
    flat: PrimExpr = const(0, dtypes.pop())
    for idx, dim in zip(load.indices, shape, strict=True):
        flat = flat * dim + idx
    return simplify(flat)


def affine_form(e: PrimExpr, loops: list[For]) -> tuple[PrimExpr, list[int]] | None:
    """``e`` as ``base + sum(coef * var)`` over the loop vars (None if not affine, checked at
    every loop's last value and at all of them at once)."""
    zero = {f.loop_var: const(0, f.loop_var.dtype) for f in loops}
    base = simplify(substitute(e, zero))
    coefs: list[int] = []
    for f in loops:
        one = simplify(substitute(e, {**zero, f.loop_var: const(1, f.loop_var.dtype)}) - base)
        if not isinstance(one, IntImm):
            return None
        coefs.append(one.value)
    last = [int(f.extent.value) - 1 for f in loops]  # type: ignore[attr-defined]
    points = [[v if k == i else 0 for k, v in enumerate(last)] for i in range(len(loops))]
    for point in [*points, last]:
        at = {f.loop_var: const(v, f.loop_var.dtype) for f, v in zip(loops, point, strict=True)}
        want = sum(c * v for c, v in zip(coefs, point, strict=True))
        got = simplify(substitute(e, at) - base)
        if not isinstance(got, IntImm) or got.value != want:
            return None
    return base, coefs


def affine_accesses(
    accesses: Sequence[BufferLoad | BufferStore], loops: list[For]
) -> list[tuple[PrimExpr, list[int]]] | None:
    """Each access's flat offset as ``base + sum(coef * var)`` over the loop vars
    (flat_index, then affine_form), or None when one of them has no such form."""
    forms = []
    for access in accesses:
        flat = flat_index(access)
        form = affine_form(flat, loops) if flat is not None else None
        if form is None:
            return None
        forms.append(form)
    return forms


def loop_chain(loop: For) -> tuple[list[For], Stmt]:
    """The perfectly nested loops from ``loop`` down and the statement inside them."""
    loops: list[For] = []
    node: Stmt = loop
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    return loops, node


def const_extents(loops: list[For]) -> bool:
    """Whether every loop runs from 0 over a constant extent."""
    return all(
        isinstance(f.extent, IntImm) and isinstance(f.min, IntImm) and f.min.value == 0
        for f in loops
    )


#: the lane-group kernel's call_extern name (ember.codegen.c.f32_lane_groups
#: .LANE_GROUP_KERNEL_NAME; ember.ops.nn_conv_lane_groups makes its convolutions).
LANE_GROUP_KERNEL = "ember_f32_conv_tile_lg"


def lane_group(load: BufferLoad, loops: list[For]) -> int:
    """The channels per group g when ``load``'s lane ``l`` (the innermost of ``loops``)
    reads ``(l / g) * g`` elements after lane 0's, at the first and at the last iteration
    of the other loops (ember.ops.nn_conv_lane_groups' input), one of LANE_GROUP_WIDTHS;
    else 0."""
    flat = flat_index(load)
    *outer, lane = loops
    if flat is None or lane.loop_var not in free_vars(flat):  # uniform over the lanes
        return 0
    if not const_extents(loops) or int(lane.extent.value) != BLOCK:  # type: ignore[attr-defined]
        return 0
    ends = [
        {f.loop_var: const(int(f.extent.value) - 1 if last else 0, f.loop_var.dtype) for f in outer}  # type: ignore[attr-defined]
        for last in (False, True)
    ]
    steps: list[int] = []
    for at in ends:
        base = simplify(substitute(flat, {**at, lane.loop_var: const(0, lane.loop_var.dtype)}))
        for v in range(BLOCK):
            got = simplify(
                substitute(flat, {**at, lane.loop_var: const(v, lane.loop_var.dtype)}) - base
            )
            if not isinstance(got, IntImm):
                return 0
            steps.append(got.value)
    group = next((v for v in range(1, BLOCK) if steps[v]), 0)
    if group not in LANE_GROUP_WIDTHS:
        return 0
    want = [v // group * group for v in range(BLOCK)]
    return group if steps == want * 2 else 0


def _guard_limit(guard: PrimExpr, loops: list[For]) -> PrimExpr | None:
    """How many of a tail tile's positions ``guard`` keeps (``a + col < b`` conjuncts, the
    tile's only position loop the second to last of ``loops``), as an int32 expression."""
    limit: PrimExpr | None = None
    for c in conjuncts(guard):
        if not isinstance(c, LT) or c.a.dtype != "int32" or c.b.dtype != "int32":
            return None
        form = affine_form(c.a, loops)
        if form is None or form[1] != [0] * (len(loops) - 2) + [1, 0]:
            return None
        if any(f.loop_var in free_vars(c.b) for f in loops):
            return None
        room = simplify(c.b - form[0])
        limit = room if limit is None else tir_min(limit, room)
    return limit


def _match(loop: For) -> Stmt | None:
    """The kernel call replacing the reduction nest at ``loop`` (None if it does not fit):
    a tile of two blocks (its second to last loop of 2 iterations stepping the weight, not
    the input) calls ember_f32_conv_tile2, else one of blocks of its lanes."""
    loops, body = loop_chain(loop)
    pair = len(loops) >= 4 and _is_pair_loop(loops[-2])
    return (_match_loops(loops, body, True) if pair else None) or _match_loops(loops, body, False)


def _is_pair_loop(f: For) -> bool:
    """Whether ``f`` may be the loop over a tile's two blocks of channels (2 iterations)."""
    return isinstance(f.extent, IntImm) and f.extent.value == PAIR_BLOCKS


def _match_loops(loops: list[For], body: Stmt, pair: bool) -> Stmt | None:
    """_match for the nest ``loops`` around ``body``, a tile of two blocks if ``pair``."""
    guard = None
    if isinstance(body, IfThenElse) and body.else_case is None:
        guard, body = body.condition, body.then_case
    if not isinstance(body, BufferStore) or not const_extents(loops):
        return None
    # reduction loops: the leading ones the accumulator does not depend on; then positions
    used: set[Any] = set()
    for idx in body.indices:
        used |= free_vars(idx)
    nred = 0
    while nred < len(loops) - 1 and loops[nred].loop_var not in used:
        nred += 1
    red, cols, lane = loops[:nred], loops[nred : len(loops) - 1 - pair], loops[-1]
    if not 1 <= nred <= MAX_REDUCE_LOOPS or not 1 <= len(cols) <= 2:
        return None
    if pair and (lane.extent.value != BLOCK or loops[-2].kind != ForKind.SERIAL):  # type: ignore[attr-defined]
        return None
    lanes = int(lane.extent.value)  # type: ignore[attr-defined]
    if lane.kind != ForKind.VECTORIZED or (lanes != BLOCK and lanes not in NARROW_KERNELS):
        return None
    if any(f.kind != ForKind.SERIAL for f in red):
        return None
    if any(f.kind not in (ForKind.UNROLLED, ForKind.SERIAL) for f in cols):
        return None
    value = body.value
    if body.buffer.dtype != "float32" or not isinstance(value, Add):
        return None
    acc, prod = value.a, value.b
    if not isinstance(acc, BufferLoad) or acc.buffer is not body.buffer:
        return None
    if tuple(acc.indices) != tuple(body.indices) and not all(
        a is b for a, b in zip(acc.indices, body.indices, strict=True)
    ):
        return None
    if not isinstance(prod, Mul):
        return None
    xl, wl = prod.a, prod.b
    conds: list[PrimExpr] = []
    if isinstance(xl, Select):  # the unpadded input, its padding tested (pad_free)
        zero = xl.false_value
        if not pair or not isinstance(zero, FloatImm) or zero.value != 0.0:
            return None
        conds, xl = conjuncts(xl.condition), xl.true_value
    if not isinstance(xl, BufferLoad) or not isinstance(wl, BufferLoad):
        return None
    if xl.buffer.dtype != "float32" or wl.buffer.dtype != "float32":
        return None
    group = 0 if pair or conds or lanes != BLOCK else lane_group(xl, loops)
    if group:  # the block's first channel: lane 0's
        first = {lane.loop_var: const(0, lane.loop_var.dtype)}
        xl = BufferLoad(xl.buffer, tuple(simplify(substitute(i, first)) for i in xl.indices))
    forms = affine_accesses((body, xl, wl), loops)
    if forms is None:
        return None
    (abase, acoef), (xbase, xcoef), (wbase, wcoef) = forms
    if not isinstance(abase, IntImm) or abase.value != 0:
        return None
    ncols = 1
    for f in cols:
        ncols *= int(f.extent.value)  # type: ignore[attr-defined]
    tcols = int(cols[-1].extent.value)  # type: ignore[attr-defined]
    # accumulators: position-major, lanes contiguous; x: uniform over lanes; w: lanes contiguous
    width = lanes * (1 + pair)  # accumulators per position
    want_acc = [0] * nred + ([tcols * width] if len(cols) == 2 else []) + [width]
    want_acc += [lanes, 1] if pair else [1]
    if acoef != want_acc or xcoef[-1] != 0 or wcoef[-1] != 1:
        return None
    wb = wcoef[-2] if pair else 0  # the second block's weights after the first's
    if pair and (xcoef[-2] != 0 or wb < lanes):
        return None
    if any(wcoef[nred + k] != 0 for k in range(len(cols))):
        return None
    cx = xcoef[nred + len(cols) - 1]
    cr = xcoef[nred] if len(cols) == 2 else 0
    count: PrimExpr = const(ncols, "int32")
    if guard is not None:
        if len(cols) != 1:
            return None
        limit = _guard_limit(guard, [*red, *cols, lane])  # the blocks' loop: no guard on it
        if limit is None:
            return None
        count = tir_min(count, limit)
    args: list[PrimExpr] = [body.buffer.data, xl.buffer.data, wl.buffer.data]
    args += [cast("int64", xbase), cast("int64", wbase), count]
    if group:  # the taps' loops, then the group's channels, contiguous in the input
        if int(red[-1].extent.value) != group or xcoef[nred - 1] != 1:  # type: ignore[attr-defined]
            return None
        taps = [1, 0, 0] * (MAX_REDUCE_LOOPS - nred)
        for k, f in enumerate(red[:-1]):
            taps += [int(f.extent.value), xcoef[k], wcoef[k]]  # type: ignore[attr-defined]
        ints = [tcols, cx, cr, *taps, wcoef[nred - 1], group]
        if any(abs(v) >= 2**31 for v in ints):
            return None
        args += [const(v, "int32") for v in ints]
        return Evaluate(call_extern("int32", LANE_GROUP_KERNEL, *args))
    red_args: list[int] = []
    red_args += [1, 0, 0] * (MAX_REDUCE_LOOPS - nred)  # leading loops of one iteration
    for k, f in enumerate(red):
        red_args += [int(f.extent.value), xcoef[k], wcoef[k]]  # type: ignore[attr-defined]
    ints = [tcols, cx, cr, *red_args, *([wb] if pair else [])]
    if any(abs(v) >= 2**31 for v in ints):
        return None
    args += [const(v, "int32") for v in ints]
    name = "ember_f32_conv_tile" if lanes == BLOCK else NARROW_KERNELS[lanes]
    name = PAIR_KERNEL if pair else name
    if conds:
        bounds = _pad_bounds(conds, loops, nred, len(cols))
        if bounds is None or red[-1].extent.value * xcoef[nred - 1] > PAD_MAX_CHANNELS:  # type: ignore[attr-defined]
            return None
        if nred > 1 and red[-2].extent.value > 64:  # type: ignore[attr-defined] # tap masks
            return None
        args += bounds
        name = PAIR_PAD_KERNEL
    return Evaluate(call_extern("int32", name, *args))


def _pad_bounds(
    conds: list[PrimExpr], loops: list[For], nred: int, ncols: int
) -> list[PrimExpr] | None:
    """The padding arguments of ember_f32_conv_tile2_pad for the conjuncts ``conds`` of a
    tile's nest ``loops`` (``nred`` reduction loops, then ``ncols`` position loops, the
    blocks' and the lanes'): their count, then ``base, pr, pc, k0, k1`` per conjunct (``v =
    base + pr * row + pc * column + k0 * i0 + k1 * i1 >= 0``, i0 and i1 the kernel's first
    two reduction loops), PAD_CONDS of them; None when a conjunct is not ``a >= lo`` or
    ``a < hi`` with ``a`` affine and free of the innermost reduction loop, the blocks' and
    the lanes' loops."""
    if len(conds) > PAD_CONDS:
        return None
    loop_vars = {f.loop_var for f in loops}
    lead = MAX_REDUCE_LOOPS - nred  # the kernel's leading loops of one iteration
    rows: list[PrimExpr] = [const(len(conds), "int32")]
    for c in conds:
        if not isinstance(c, GE | LT) or free_vars(c.b) & loop_vars:
            return None
        form = affine_form(c.a, loops)
        if form is None:
            return None
        base, coefs = form
        sign = 1 if isinstance(c, GE) else -1
        start = simplify(base - c.b) if isinstance(c, GE) else simplify(c.b - 1 - base)
        coefs = [sign * k for k in coefs]
        if coefs[nred - 1] != 0 or any(coefs[nred + ncols :]):
            return None
        taps = [0] * lead + coefs[: nred - 1] + [0]  # over the kernel's e0, e1, e2
        pos = coefs[nred : nred + ncols]
        pr, pc = (pos[0], pos[1]) if ncols == 2 else (0, pos[0])
        if any(abs(k) >= 2**15 for k in (pr, pc, *taps)):
            return None
        rows += [cast("int32", start), *(const(k, "int32") for k in (pr, pc, *taps[:2]))]
    zero = const(0, "int32")
    rows += [zero] * (5 * (PAD_CONDS - len(conds)))
    return rows


class _Rewrite(IRMutator):
    def __init__(self) -> None:
        self.count = 0

    def visit_For(self, s: For) -> Stmt:  # noqa: N802 - visitor naming
        if s.kind == ForKind.SERIAL:
            new = _match(s)
            if new is not None:
                self.count += 1
                return new
        return self.generic_stmt(s)


def tile_kernel_rewrite(func: PrimFunc) -> PrimFunc:
    """``func`` with every matching float32 tile reduction a call of ember_f32_conv_tile."""
    return _Rewrite().visit_func(func)


def conv_tile_reference(
    acc: list[float],
    x: list[float],
    w: list[float],
    xoff: int,
    woff: int,
    ncols: int,
    tcols: int,
    cx: int,
    cr: int,
    *loops: int,
) -> int:
    """ember_f32_conv_tile in Python, for ``tir.interpret(..., externs=INTERPRET_EXTERNS)``
    (sums in float64: the interpreter's float32 buffers are Python floats)."""
    return tile_reference(BLOCK, acc, x, w, xoff, woff, ncols, tcols, cx, cr, *loops)


def pair_tile_reference(
    acc: list[float], x: list[float], w: list[float], xoff: int, woff: int, *args: int
) -> int:
    """ember_f32_conv_tile2 in Python (two blocks of 16: ``acc[j * 32 + b * 16 + lane]``,
    block b's weights ``b * wb`` floats after the first's), for the TIR interpreter."""
    *loops, wb = args
    for blk in range(2):  # block b: one 16-channel tile, its weights b * wb floats on
        tile_reference(BLOCK, acc, x, w, xoff, woff + blk * wb, *loops, acc_stride=2 * BLOCK,
                       acc_offset=blk * BLOCK)  # fmt: skip
    return 0


def pair_pad_tile_reference(
    acc: list[float], x: list[float], w: list[float], xoff: int, woff: int, *args: int
) -> int:
    """ember_f32_conv_tile2_pad in Python: pair_tile_reference with the reads of taps in
    the padding (a conjunct ``base + pr * row + pc * col + k0 * i0 + k1 * i1 >= 0`` fails)
    +0, for the TIR interpreter."""
    head, (count, *flat) = args[:14], args[14:]
    ncols, tcols, cx, cr, e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2, wb = head
    conds = [flat[5 * q : 5 * q + 5] for q in range(count)]
    for j in range(max(ncols, 0)):
        row, col = divmod(j, tcols)
        base = xoff + row * cr + col * cx
        for i0 in range(e0):
            for i1 in range(e1):
                inside = all(b + pr * row + pc * col + k0 * i0 + k1 * i1 >= 0
                             for b, pr, pc, k0, k1 in conds)  # fmt: skip
                for i2 in range(e2):
                    v = x[base + i0 * xs0 + i1 * xs1 + i2 * xs2] if inside else 0.0
                    wk = woff + i0 * ws0 + i1 * ws1 + i2 * ws2
                    for blk in range(2):
                        for lane in range(BLOCK):
                            acc[32 * j + 16 * blk + lane] += v * w[wk + blk * wb + lane]
    return 0


def lane_group_tile_reference(
    acc: list[float], x: list[float], w: list[float], xoff: int, woff: int, *args: int
) -> int:
    """ember_f32_conv_tile_lg in Python (lane ``l`` of position ``j`` adds, over the taps
    and the group's channels ``c < g``, ``x`` at the block's first channel plus ``(l / g) *
    g + c`` times ``w[c * ws2 + l]``), for the TIR interpreter."""
    ncols, tcols, cx, cr, e0, xs0, ws0, e1, xs1, ws1, ws2, g = args
    for i0 in range(e0):
        for i1 in range(e1):
            for c in range(g):
                wk = woff + i0 * ws0 + i1 * ws1 + c * ws2
                for j in range(max(ncols, 0)):
                    base = xoff + j // tcols * cr + j % tcols * cx + i0 * xs0 + i1 * xs1 + c
                    for lane in range(BLOCK):
                        acc[BLOCK * j + lane] += x[base + lane // g * g] * w[wk + lane]
    return 0


#: the Python implementations of the kernels this module emits, for the TIR interpreter.
INTERPRET_EXTERNS = {
    "ember_f32_conv_tile": conv_tile_reference,
    LANE_GROUP_KERNEL: lane_group_tile_reference,
    PAIR_KERNEL: pair_tile_reference,
    PAIR_PAD_KERNEL: pair_pad_tile_reference,
    **NARROW_INTERPRET_EXTERNS,
}
