"""CPU schedules of the nn anchors (convolutions, matrix products, pools, norms, softmax).

One rule set covers them all, because every nn anchor is a few reduction stages feeding
an elementwise output:

* the group's output runs its outer data loops fused and parallel (when there is enough
  work) and its innermost loop vectorised;
* a reduction stage with the output's shape (conv, pool windows, LRN) is computed inside
  the output's fused outer loop, one row at a time, with its reduce loops *outside* its
  row loop so the innermost loop is a vectorisable ``acc[w] += ...``;
* any other reduction stage (statistics of softmax and the norms, which have keepdims
  shapes) is computed at root before the output, parallel over its leading data axes;
  a stage created with ``attrs={"reduce_after": k}`` runs its reduce loops right after
  its first ``k`` data loops (the axes after the reduced ones stay innermost, contiguous);
* ungrouped convolutions with very short output rows (< SHORT_ROW) compute 8 channels
  per parallel iteration, the channel loop unrolled inside the reduce loops so each input
  row loaded serves 8 channels (schedule_channel_blocked);
* packed-weight convolutions (``nn.conv_packed``, reduction stage channels-last with a
  ``block`` attribute) are register-tiled: per parallel iteration one tile of ``block``
  output channels times up to ``register_tiles(target).conv_cols`` output columns (a
  row of TILES per target key), its accumulators a local tile the C compiler keeps in
  vector registers (schedule_packed_conv); a 1x1 convolution flattened over positions is
  tiled as a matrix product, ``register_tiles(target).matmul[0]`` positions x ``block``;
* matrix products with at least MATMUL_MIN_ROWS rows are register-tiled the same way:
  ``register_tiles(target).matmul`` rows x columns per tile, the rhs row segment loaded
  once per reduction step serving every row of the tile (schedule_matmul);
* a non-reduction stage created with ``attrs={"materialize": True}`` (a convolution's
  padded input, softmax's exponentials, per-row statistics) gets its own buffer, computed
  once at root, instead of being inlined (``lower_group`` inlines every non-reduction
  stage; recomputing these per use costs branches in the innermost loop or repeated
  ``exp``/``sqrt``/division).

Example::

    register_schedule("nn.max_pool")(schedule_anchor)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ember.ops.common import static_shape
from ember.ops.nn_conv_f32 import (
    BLOCK,
    TILE_KERNEL,
    kernel_tile,
    loop_tiles_win,
    positions_outer,
    tile_kernel_rewrite,
    use_tile_kernel,
)
from ember.ops.nn_conv_narrow import (
    CHANNELS_LAST_COPY,
    NARROW_KERNELS,
    narrow_kernel_tile,
    schedule_channels_last_copy,
)
from ember.ops.registry import ScheduleContext
from ember.target import Target
from ember.tir import te
from ember.tir.expr import Call
from ember.tir.functor import post_order_visit

#: below this much work (output elements times reduction length) a nest runs on one thread.
MIN_PARALLEL_WORK = 4096
#: the innermost loop is vectorised when its extent is at least this.
MIN_VECTOR_EXTENT = 4
#: compute attribute asking the anchor schedule to keep a non-reduction stage in a buffer.
MATERIALIZE = "materialize"


def _extent(iv: te.IterVar) -> int:
    return int(getattr(iv.extent, "value", 1))


def _size(ivs: Any) -> int:
    n = 1
    for iv in ivs:
        n *= _extent(iv)
    return n


def reduction_stages(sch: te.Schedule, outputs: list[te.Tensor]) -> list[te.Stage]:
    """The materialised reduction stages of ``sch`` that are not outputs, producers first."""
    out_ops = {id(t.op) for t in outputs}
    found = []
    for op in sch.ops:
        if id(op) in out_ops or not isinstance(op, te.ComputeOp):
            continue
        stage = sch[op]
        if isinstance(op.body, te.Reduce) and not stage.inlined:
            found.append(stage)
    return found


def materialize_tagged(sch: te.Schedule, outputs: list[te.Tensor]) -> None:
    """Schedule every stage tagged ``materialize`` (lower_group keeps its own root buffer):
    parallel over its outer loops, vectorised inside."""
    out_ops = {id(t.op) for t in outputs}
    for op in sch.ops:
        if id(op) in out_ops or not isinstance(op, te.ComputeOp):
            continue
        if not op.attrs.get(MATERIALIZE) or isinstance(op.body, te.Reduce):
            continue
        stage = sch[op]
        if stage.attach is None and not stage.inlined:
            copy = op.attrs.get(CHANNELS_LAST_COPY)  # nn_conv_narrow: channels outside columns
            if copy and schedule_channels_last_copy(stage, MIN_PARALLEL_WORK):
                continue
            along = op.attrs.get(TRANSPOSED_COPY)
            if along is None:
                schedule_output(stage)
            else:
                schedule_transposed_copy(stage, int(along))


#: attribute of a materialized copy that lays an NCHW input out channels last: the index of
#: its axis that is contiguous in the source (positions; the channels are the last axis).
TRANSPOSED_COPY = "transposed_copy"

#: positions x channels of one tile of a transposed copy (at most; divisors of the extents).
TRANSPOSE_TILE = 16


def _divisor_at_most(extent: int, limit: int) -> int:
    return max(d for d in range(1, min(extent, limit) + 1) if extent % d == 0)


def schedule_transposed_copy(stage: te.Stage, along: int) -> None:
    """A channels-last copy of an NCHW tensor (TRANSPOSED_COPY) in tiles of up to 16
    positions x 16 channels, channels vectorised: a tile's source is 16 channel rows of a
    cache line or two each, read from L1, where a whole row of channels per position (the
    schedule_output order) reads one cache line per channel, from L2 once the channels
    outgrow L1 (1x1 1024 channels at 14x14, one thread: 0.17 ms of a 1.45 ms layer)."""
    op = _compute_op(stage)
    assert op is not None
    axes = list(op.axis)
    pos, chan = axes[along], axes[-1]
    po, pi = stage.split(pos, factor=_divisor_at_most(_extent(pos), TRANSPOSE_TILE))
    co, ci = stage.split(chan, factor=_divisor_at_most(_extent(chan), TRANSPOSE_TILE))
    stage.reorder(*axes[:along], po, *axes[along + 1 : -1], co, pi, ci)
    outer = stage.fuse(*axes[:along], po)
    if _size(axes) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        stage.parallel(outer)
    if _extent(ci) >= MIN_VECTOR_EXTENT:
        stage.vectorize(ci)


def _compute_op(stage: te.Stage) -> te.ComputeOp | None:
    """The stage's compute operation (None for other kinds of stage, left unscheduled)."""
    op = stage.op
    return op if isinstance(op, te.ComputeOp) else None


def _stage_shape(stage: te.Stage) -> tuple[int, ...]:
    """The data extents of a compute stage (empty for other stages)."""
    op = _compute_op(stage)
    return tuple(_extent(iv) for iv in op.axis) if op is not None else ()


def _reduce_work(stages: list[te.Stage]) -> int:
    sizes = [_size(op.reduce_axis) for op in map(_compute_op, stages) if op is not None]
    return max([*sizes, 1])


def schedule_output(
    stage: te.Stage, work_per_element: int = 1, reduce_inner: bool = False
) -> te.IterVar | None:
    """Fuse all but the last data loop into one (parallel if worth it), vectorise the last;
    a reduction's reduce loops go between them (or innermost with ``reduce_inner``, a dot
    product). Return the fused outer loop, if any."""
    op = _compute_op(stage)
    if op is None or not op.axis:
        return None
    axes = list(op.axis)
    red = list(op.reduce_axis)
    work = _size(axes) * max(work_per_element, _size(red))
    inner = axes[-1]
    outer = None
    if len(axes) >= 2:
        outer = stage.fuse(*axes[:-1])
        if work >= MIN_PARALLEL_WORK and _extent(outer) > 1:
            stage.parallel(outer)
    elif work >= MIN_PARALLEL_WORK and _extent(inner) >= 2 * MIN_VECTOR_EXTENT and not red:
        outer, inner = stage.split(inner, factor=_extent(inner) // 2 if _extent(inner) < 64 else 64)
        stage.parallel(outer)
        outer = None
    if red and reduce_inner:
        return outer
    if red:
        stage.reorder(*red, inner)
    if _extent(inner) >= MIN_VECTOR_EXTENT:
        stage.vectorize(inner)
    return outer


def schedule_row_reduction(stage: te.Stage, reduce_inner: bool = False) -> None:
    """An attached reduction stage: reduce loops outside its last data loop (vectorised),
    or left innermost with ``reduce_inner``."""
    op = _compute_op(stage)
    if op is None or not op.axis or reduce_inner:
        return
    axes = list(op.axis)
    red = list(op.reduce_axis)
    stage.reorder(*red, axes[-1])
    if _extent(axes[-1]) >= MIN_VECTOR_EXTENT:
        stage.vectorize(axes[-1])


def schedule_root_reduction(stage: te.Stage) -> None:
    """A reduction computed at root: parallel over its leading data loops, reduce loops
    after ``reduce_after`` data loops (all of them by default)."""
    op = _compute_op(stage)
    if op is None:
        return
    axes = list(op.axis)
    red = list(op.reduce_axis)
    k = int(op.attrs.get("reduce_after", len(axes)))
    k = max(0, min(k, len(axes)))
    if k < len(axes):
        stage.reorder(*red, *axes[k:])
        if _extent(axes[-1]) >= MIN_VECTOR_EXTENT:
            stage.vectorize(axes[-1])
    if k >= 1:
        outer = stage.fuse(*axes[:k])
        if _size(axes) * _size(red) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
            stage.parallel(outer)


def schedule_anchor(ctx: ScheduleContext, reduce_inner: bool = False) -> None:
    """The nn anchor schedule described in the module docstring (``reduce_inner`` keeps the
    anchor's reduce loops innermost: dot products, for matrices stored (N, K))."""
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    materialize_tagged(sch, outputs)
    reds = reduction_stages(sch, outputs)
    main = sch[outputs[0]]
    outer = schedule_output(main, _reduce_work(reds), reduce_inner)
    for extra in outputs[1:]:
        schedule_output(sch[extra])
    readers = _reduction_readers(sch, reds)
    for stage in reds:
        attachable = (
            outer is not None
            and len(outputs) == 1
            and _stage_shape(stage) == static_shape(outputs[0])
            and not readers.get(id(stage.op))
        )
        if attachable:
            assert outer is not None
            stage.compute_at(main, outer)
            schedule_row_reduction(stage, reduce_inner)
        else:
            schedule_root_reduction(stage)


def schedule_channel_blocked(ctx: ScheduleContext, factor: int = 8) -> bool:
    """Convolution-like anchors (output (N, O, *spatial), one output): each parallel
    iteration computes ``factor`` output channels of one output row, the reduction's loops
    ordered ``reduce..., channel (unrolled), row (vectorised)`` so that every input row
    loaded is used for ``factor`` channels. Return False (doing nothing) when the group
    does not have that shape."""
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    if len(outputs) != 1:
        return False
    main = sch[outputs[0]]
    op = _compute_op(main)
    if op is None or len(op.axis) < 3 or _extent(op.axis[1]) < factor:
        return False
    shape = static_shape(outputs[0])
    reds = reduction_stages(sch, outputs)
    rows = [r for r in reds if _stage_shape(r) == shape]
    anchor_is_output = bool(op.reduce_axis) and not rows
    if not anchor_is_output and not (len(rows) == 1 and not op.reduce_axis):
        return False
    materialize_tagged(sch, outputs)
    axes = list(op.axis)
    red = list(op.reduce_axis)
    co, ci = main.split(axes[1], factor=factor)
    middle = axes[2:-1]
    main.reorder(axes[0], co, *middle, *red, ci, axes[-1])
    outer = main.fuse(axes[0], co, *middle)
    work = _size(axes) * max(_reduce_work(reds), _size(red))
    if work >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    main.vectorize(axes[-1])
    if red:
        main.unroll(ci)
    for stage in reds:
        if stage in rows:
            row_op = stage.op
            assert isinstance(row_op, te.ComputeOp)
            stage.compute_at(main, outer)
            r_axes = list(row_op.axis)
            stage.reorder(*r_axes[:1], *r_axes[2:-1], *row_op.reduce_axis, r_axes[1], r_axes[-1])
            stage.unroll(r_axes[1])
            stage.vectorize(r_axes[-1])
        else:
            schedule_root_reduction(stage)
    return True


#: output rows shorter than this use channel-blocked convolution rows. Measured single
#: thread (min of 15 interleaved runs, noisy shared machine): 3x3 512->512 at 7x7 ~10%
#: faster; 14x14 and wider rows ~10% slower, so only 7-wide (ResNet's last stage) rows.
SHORT_ROW = 8


def schedule_conv_anchor(ctx: ScheduleContext) -> None:
    """Channel-blocked rows (schedule_channel_blocked) for ungrouped convolutions with short
    output rows, else the row schedule of schedule_anchor."""
    short = bool(ctx.group_outputs) and static_shape(ctx.group_outputs[0])[-1] < SHORT_ROW
    blocked = short and int(ctx.attrs.get("groups", 1)) == 1
    if not blocked or not schedule_channel_blocked(ctx):
        schedule_anchor(ctx)


def schedule_dot_anchor(ctx: ScheduleContext) -> None:
    """schedule_anchor with the reduction innermost (nn.dense: rows of x times rows of w)."""
    schedule_anchor(ctx, reduce_inner=True)


def _reduction_readers(sch: te.Schedule, stages: list[te.Stage]) -> dict[int, bool]:
    """For each op: whether a reduction stage reads it (looking through inlined stages)."""
    read: dict[int, bool] = {}
    for stage in stages:
        todo = list(stage.op.input_tensors())
        seen: set[int] = set()
        while todo:
            t = todo.pop()
            if id(t.op) in seen:
                continue
            seen.add(id(t.op))
            read[id(t.op)] = True
            if isinstance(t.op, te.ComputeOp) and sch[t.op].inlined:
                todo.extend(t.op.input_tensors())
    return read


@dataclass(frozen=True)
class RegisterTiles:
    """Register tile sizes of one kind of CPU: the output columns a packed convolution
    computes per tile (its accumulators are columns x block floats, which must fit the
    vector registers) and a matrix product's rows x columns."""

    conv_cols: int
    matmul: tuple[int, int]


#: register tiles by target key (``Target.keys``: the most specific key present wins).
#: ``x86-avx512`` (32 registers of 16 floats), measured single thread, CPU time: packed
#: 3x3 conv chains 14 columns 2.26 ms vs 8 columns 2.78 ms at 64ch 56x56, 2.38 vs 2.77 at
#: 256ch 14x14 (14 x 16 floats are 14 of the 32 registers); matmul 64x1024 @ 1024x1000
#: 8 rows 2.05 ms, 4 rows 2.35, 16 rows 4.5; BERT's 128x256 @ 256x1024 and 128x1024 @
#: 1024x256: 8x64 0.76/0.75 ms, 8x48 0.97/0.90, 6x64 0.83/0.78, 8x128 1.27/1.21.
#: ``cpu`` keeps those sizes for CPUs without a row of their own. An AVX2 row was measured
#: and not added: on a Zen 3 (16 registers of 8 floats), single thread, CPU time, these
#: sizes beat every smaller tile tried (conv 6 cols / matmul 4x16, 6x16; conv 8 / 4x32):
#: 3x3 64ch 56x56 4.0 ms vs 4.3-6.0, 3x3 256ch 14x14 3.6 vs 4.8-5.9, 1x1 1024->256 2.1 vs
#: 2.1-2.6, matmul 64x1024x1000 3.1 vs 3.6-5.2, BERT 128x256x1024 1.5 vs 1.6-1.7 (results
#: bitwise equal: tiles do not change the order of any reduction); see the x86-avx2 row.
#: ``llvm`` (the llvm kinds' key, before the CPU's): with FMA contraction (-ffp-contract=fast)
#: tiles that fit AVX2's 16 registers won for gcc too (Zen 3, one thread, CPU time): 3x3 conv
#: 64ch 56x56 4 columns 3.9 ms vs 14 columns 4.9; matmul 128x256 @ 256x1024 6x16 1.14 ms
#: vs 8x64 1.61; contraction everywhere broke int8 agreement with onnxruntime, so C now
#: contracts only reduction updates (codegen/c/contract.py) and ``x86-avx2`` takes the small
#: tiles too (Zen 4, one thread, CPU time, ember/onnxruntime, 14 columns -> 4, both with
#: contraction): 3x3 conv 64ch 56x56 2.07 -> 1.35, 128ch 28x28 -> 1.22, 1x1 1024->256 at
#: 14x14 1.67 -> 1.45, matmul 128x256 @ 256x1024 (8x64 -> 6x16) 2.17 -> 1.21. The LLVM back end
#: writes unrolled tiles out (tir.transform.unroll_loops) so SROA keeps them in registers,
#: which needs tiles that fit: 14 columns 8.1 ms, 5 3.3, 4 3.1, 3 4.2 (c 4.4 at the time);
#: matmul 6x16 0.97 ms, 4x16 1.28, 8x64 2.90.
TILES: dict[str, RegisterTiles] = {
    "x86-avx512": RegisterTiles(14, (8, 64)),
    "llvm": RegisterTiles(4, (6, 16)),
    "x86-avx2": RegisterTiles(4, (6, 16)),
    "cpu": RegisterTiles(14, (8, 64)),
}


#: kernel tiles of at least this many positions (whole images, bands of rows) whose
#: epilogue adds a residual (residual_epilogue) write it channel by channel, the positions
#: innermost and vectorised: the NCHW output and the residual are then read and written
#: contiguously, and only the tile's
#: accumulators, in L1, are read 16 floats apart (channels innermost, every output and
#: residual element is a scalar access H*W floats from the last: 1x1 256->1024 at 14x14
#: with a residual, one thread, the epilogue took a third of the kernel's time).
POSITIONS_INNER_EPILOGUE = 16


def positions_inner(positions: int) -> bool:
    """Whether a kernel tile of ``positions`` output positions writes its epilogue with the
    positions innermost (see POSITIONS_INNER_EPILOGUE)."""
    return positions >= POSITIONS_INNER_EPILOGUE


def residual_epilogue(output: te.Tensor, acc: te.Stage) -> bool:
    """Whether the stages from ``output`` back to the reduction stage ``acc`` read another
    tensor of the output's shape (a residual) and call no function (SiLU's sigmoid...):
    only then does the epilogue write positions innermost (POSITIONS_INNER_EPILOGUE). The
    residual is then read contiguously; without one, or with a call, channels innermost
    measured faster (YOLO's 10x10 tiles with SiLU: the whole model 1.5x slower positions
    innermost, PP-LCNet's HardSwish at 7x7 3%)."""
    shape = static_shape(output)
    calls: list[bool] = []
    residual = False
    seen: set[int] = set()
    todo = [output.op]
    while todo:
        op = todo.pop()
        if id(op) in seen or op is acc.op:
            continue
        seen.add(id(op))
        if not isinstance(op, te.ComputeOp):
            continue
        post_order_visit(op.body, lambda n: calls.append(True) if isinstance(n, Call) else None)
        for t in op.input_tensors():
            computed = isinstance(t.op, te.ComputeOp)
            residual = residual or (not computed and static_shape(t) == shape)
            todo.append(t.op)
    return residual and not calls


def register_tiles(target: Target) -> RegisterTiles:
    """The register tiles for ``target`` (its most specific key with a row in TILES)."""
    for key in target.keys:
        if key in TILES:
            return TILES[key]
    return TILES["cpu"]


def _tile_cols(width: int, limit: int) -> int:
    """The largest divisor of ``width`` not above ``limit`` when it is within 1/8 of the
    limit (no tail), else ``limit`` with a guarded tail tile: a full-width tile fills the
    registers, and the tail's guard sits outside the reduction (3x3 convs at 55 and 27
    columns, single thread: 14 columns with a tail 0.58 / 0.52 ms, 11 and 9 columns without
    0.69 / 0.64 ms)."""
    top = min(width, limit)
    best = max(d for d in range(1, top + 1) if width % d == 0)
    return best if 8 * best >= 7 * top else top


def _block(stage: te.Stage) -> int:
    """The ``block`` attribute of a packed convolution's reduction stage (0 if none)."""
    op = _compute_op(stage)
    return int(op.attrs.get("block", 0)) if op is not None else 0


def _channels_last(acc: tuple[int, ...], out: tuple[int, ...], block: int) -> bool:
    """Whether ``acc`` is ``out`` (N, C, *sp) channels-last with C padded to a block."""
    if len(acc) != len(out) or len(out) < 2:
        return False
    same = acc[:1] == out[:1] and acc[1:-1] == out[2:]
    return same and -(-out[1] // block) * block == acc[-1]


def schedule_dense_packed_conv(ctx: ScheduleContext, max_cols: int = 0) -> None:
    """schedule_packed_conv for nn.conv_packed: float32 tiles on AVX2 through the C
    micro-kernel (ember.ops.nn_conv_f32), its tile widths, for the layers whose compute
    chose the kernel's layout (attribute TILE_KERNEL of the reduction stage, set by
    nn_conv._kernel_layout: the layout and the schedule switch together)."""
    ops = [_compute_op(s) for s in reduction_stages(ctx.sch, list(ctx.group_outputs))]
    chosen = any(op is not None and op.attrs.get(TILE_KERNEL) for op in ops)
    kernel = chosen and use_tile_kernel(ctx.target, ctx.group_outputs[0].dtype)
    schedule_packed_conv(ctx, kernel, max_cols)


def schedule_packed_conv(ctx: ScheduleContext, kernel: bool = False, max_cols: int = 0) -> None:
    """nn.conv_packed (reduction stage ``conv`` with attribute ``block``, output channels
    innermost in its weight): the group's output is tiled as
    ``n, o/b, spatial..., w/t | w%t, o%b`` with the outer loops fused and parallel; the
    reduction is computed at each tile into a t x b accumulator whose loops run
    ``reduce..., w (unrolled), o (vectorised)``; rows narrower than half the tile are
    tiled by several rows as well (7x7: 2 rows x 7 columns, the last row tile guarded;
    3x3 512ch at 7x7 2.95 -> 2.38 ms, 1x1 1024ch 1.36 -> 1.25 ms in chains, one thread,
    CPU time). The tile is written through the epilogue with
    the channel loop innermost and vectorised: it reads the accumulators contiguously
    (column-innermost writes gather them, which gcc leaves scalar and, under a Clip
    epilogue, branchy: 8x slower on MobileNetV2's 1x1 16->96 at 112x112)."""
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    reds = reduction_stages(sch, outputs)
    main = sch[outputs[0]]
    op = _compute_op(main)
    shape = static_shape(outputs[0])
    rows = [r for r in reds if _block(r) and _channels_last(_stage_shape(r), shape, _block(r))]
    flat = [r for r in reds if _block(r) and _flat_channels_last(_stage_shape(r), shape, _block(r))]
    if kernel:
        ctx.post_lower.append(tile_kernel_rewrite)
    if len(outputs) == 1 and op is not None and not op.reduce_axis and len(flat) == 1 and not rows:
        _schedule_flat_conv(ctx, main, flat[0], reds, kernel)
        return
    ok = len(outputs) == 1 and op is not None and not op.reduce_axis and len(rows) == 1
    if not ok or op is None or len(op.axis) < 3:
        schedule_anchor(ctx)
        return
    acc = rows[0]
    acc_op = _compute_op(acc)
    assert acc_op is not None
    block = _block(acc)
    materialize_tagged(sch, outputs)
    axes = list(op.axis)
    oo, oi = main.split(axes[1], factor=block)
    max_cols = max_cols or register_tiles(ctx.target).conv_cols
    cols = _tile_cols(_extent(axes[-1]), max_cols)
    middle = axes[2:-1]
    # narrow rows (ResNet's 7x7 stage): a tile spans several rows to fill the registers
    nrows = _tile_cols(_extent(middle[-1]), max_cols // cols) if middle else 1
    if kernel:
        spatial = [_extent(a) for a in axes[2:]]
        tile = narrow_kernel_tile(spatial, block) if block in NARROW_KERNELS else None
        nrows, cols = tile or kernel_tile(spatial)
    wo, wi = main.split(axes[-1], factor=cols)
    by_rows = kernel and positions_inner(nrows * cols) and residual_epilogue(outputs[0], acc)
    if nrows > 1:
        ho, hi = main.split(middle[-1], factor=nrows)
        middle = [*middle[:-1], ho]
        main.reorder(axes[0], oo, *middle, wo, *((oi, hi, wi) if by_rows else (hi, wi, oi)))
    else:
        main.reorder(axes[0], oo, *middle, wo, *((oi, wi) if by_rows else (wi, oi)))
    outer = main.fuse(axes[0], oo, *middle, wo)
    work = _size(axes) * _size(acc_op.reduce_axis)
    if work >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    main.vectorize(wi if by_rows else oi)
    acc.compute_at(main, outer)
    a_axes = list(acc_op.axis)
    acc.reorder(*a_axes[:-3], *acc_op.reduce_axis, *a_axes[-3:])
    if not kernel:  # the kernel's tiles are calls, their loops need no unrolling
        if nrows > 1:
            acc.unroll(a_axes[-3])
        acc.unroll(a_axes[-2])
    acc.vectorize(a_axes[-1])
    for stage in reds:
        if stage is not acc:
            schedule_root_reduction(stage)


def _flat_channels_last(acc: tuple[int, ...], out: tuple[int, ...], block: int) -> bool:
    """Whether ``acc`` is ``out`` (N, C, *sp) as (N, positions, C padded to a block): a 1x1
    convolution flattened over positions (nn_conv_layouts.flat_pointwise)."""
    if len(acc) != 3 or len(out) < 4 or acc[0] != out[0]:
        return False
    positions = 1
    for d in out[2:]:
        positions *= d
    return acc[1] == positions and -(-out[1] // block) * block == acc[2]


def _schedule_flat_conv(
    ctx: ScheduleContext, main: te.Stage, acc: te.Stage, reds: list[te.Stage], kernel: bool
) -> None:
    """schedule_packed_conv for a 1x1 convolution over flattened positions, a matrix product
    (positions x channels) tiled as one: the output's spatial loops fused into one positions
    loop, tiled ``n, o/b, p/t | p%t, o%b`` with t the matmul tile's rows. Measured on AVX2
    (one thread, CPU time, against onnxruntime): 1x1 960->320 at 7x7 1.64x -> 1.27x, 2048->512
    at 7x7 2.19x -> 1.59x with t = 6 instead of 4 (6 x 16 accumulators, two weight vectors
    and a broadcast: 15 of 16 registers), while 3x3 rows keep 4 columns (1.35x vs 2.00x)."""
    op = _compute_op(main)
    acc_op = _compute_op(acc)
    assert op is not None and acc_op is not None
    block = _block(acc)
    materialize_tagged(ctx.sch, list(ctx.group_outputs))
    axes = list(op.axis)
    positions = main.fuse(*axes[2:])
    oo, oi = main.split(axes[1], factor=block)
    cols = _tile_cols(_extent(positions), register_tiles(ctx.target).matmul[0])
    if kernel:
        spatial = [_extent(positions)]
        tile = narrow_kernel_tile(spatial, block) if block in NARROW_KERNELS else None
        cols = (tile or kernel_tile(spatial))[1]
    po, pi = main.split(positions, factor=cols)
    wide = kernel and positions_inner(cols) and residual_epilogue(ctx.group_outputs[0], acc)
    inner = (oi, pi) if wide else (pi, oi)
    if kernel and positions_outer(_size(acc_op.reduce_axis), _extent(axes[1])):
        main.reorder(axes[0], po, oo, *inner)
        outer = main.fuse(axes[0], po, oo)
    else:
        main.reorder(axes[0], oo, po, *inner)
        outer = main.fuse(axes[0], oo, po)
    if _size(axes) * _size(acc_op.reduce_axis) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    main.vectorize(inner[-1])
    acc.compute_at(main, outer)
    n, p, o = acc_op.axis
    acc.reorder(n, *acc_op.reduce_axis, p, o)
    if not kernel:
        acc.unroll(p)
    acc.vectorize(o)
    for stage in reds:
        if stage is not acc:
            schedule_root_reduction(stage)


#: fewer output rows than this keep the row schedule: a row-vector times a matrix is
#: memory-bound, and reading the rhs row by row streams it (tiles would stride through it).
MATMUL_MIN_ROWS = 4


def _lane_tile(width: int, limit: int, lanes: int = 8) -> int:
    """The largest multiple of ``lanes`` not above ``limit`` that divides ``width`` (a tile
    with no tail: a guard inside the vector loop costs more than narrower tiles), else the
    largest divisor of ``width`` not above ``limit``."""
    fits = [d for d in range(lanes, min(width, limit) + 1, lanes) if width % d == 0]
    if fits:
        return max(fits)
    return max(d for d in range(1, min(width, limit) + 1) if width % d == 0)


def schedule_matmul(ctx: ScheduleContext) -> None:
    """nn.matmul with 2-D (or batched) operands: the group's output is tiled as
    ``batch..., j/nb, i/mb | i%mb, j%nb`` (outer loops fused and parallel), the reduction
    computed at each tile into an mb x nb accumulator whose loops run ``k, i (unrolled),
    j (vectorised)``: each row of the rhs loaded serves mb rows. Anything else (vector
    operands, several outputs) takes schedule_anchor."""
    sch = ctx.sch
    outputs = list(ctx.group_outputs)
    reds = reduction_stages(sch, outputs)
    main = sch[outputs[0]]
    op = _compute_op(main)
    shape = static_shape(outputs[0])
    rows = [r for r in reds if _stage_shape(r) == shape]
    acc_op = _compute_op(rows[0]) if len(rows) == 1 else None
    ok = len(outputs) == 1 and op is not None and not op.reduce_axis and acc_op is not None
    if not ok or op is None or acc_op is None or len(op.axis) < 2:
        schedule_anchor(ctx)
        return
    vector_operand = any(len(static_shape(t)) < 2 for t in acc_op.input_tensors())
    if vector_operand or _extent(op.axis[-2]) < MATMUL_MIN_ROWS:
        schedule_anchor(ctx)
        return
    acc = rows[0]
    materialize_tagged(sch, outputs)
    axes = list(op.axis)
    tile = register_tiles(ctx.target).matmul
    mb = _tile_cols(_extent(axes[-2]), tile[0])
    nb = _lane_tile(_extent(axes[-1]), tile[1])
    io, ii = main.split(axes[-2], factor=mb)
    jo, ji = main.split(axes[-1], factor=nb)
    main.reorder(*axes[:-2], jo, io, ii, ji)
    outer = main.fuse(*axes[:-2], jo, io)
    if _size(axes) * _size(acc_op.reduce_axis) >= MIN_PARALLEL_WORK and _extent(outer) > 1:
        main.parallel(outer)
    if nb >= MIN_VECTOR_EXTENT:
        main.vectorize(ji)
    acc.compute_at(main, outer)
    a_axes = list(acc_op.axis)
    acc.reorder(*a_axes[:-2], *acc_op.reduce_axis, a_axes[-2], a_axes[-1])
    acc.unroll(a_axes[-2])
    if nb >= MIN_VECTOR_EXTENT:
        acc.vectorize(a_axes[-1])
    for stage in reds:
        if stage is not acc:
            schedule_root_reduction(stage)
    matmul_tiles_call_kernel(ctx, nb)


def matmul_tiles_call_kernel(ctx: ScheduleContext, nb: int) -> None:
    """On the micro-kernel's targets, matmul tiles of 16 columns call ember_f32_conv_tile
    (gcc folds the rhs loads into every FMA; crnn's 64 x (24x256 @ 256x32))."""
    kernel = nb == BLOCK and use_tile_kernel(ctx.target, ctx.group_outputs[0].dtype)
    if kernel and not loop_tiles_win(ctx.target):  # llvm keeps the rhs in registers itself
        ctx.post_lower.append(tile_kernel_rewrite)
