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
* packed-weight convolutions (``nn.conv_packed``) and matrix products with enough rows are
  register-tiled by ember.ops.nn_schedule_tiles (schedule_packed_conv, schedule_matmul);
* a non-reduction stage created with ``attrs={"materialize": True}`` (a convolution's
  padded input, softmax's exponentials, per-row statistics) gets its own buffer, computed
  once at root, instead of being inlined (``lower_group`` inlines every non-reduction
  stage; recomputing these per use costs branches in the innermost loop or repeated
  ``exp``/``sqrt``/division).

Example::

    register_schedule("nn.max_pool")(schedule_anchor)
"""

from __future__ import annotations

from typing import Any

from ember.ops.common import static_shape
from ember.ops.nn_conv_narrow import (
    CHANNELS_LAST_COPY,
    schedule_channels_last_copy,
)
from ember.ops.registry import ScheduleContext
from ember.tir import te

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
    vectorize_blocks(stage, axes[-1])


#: lanes of one vector block of a reduction's vectorised last axis (AVX-512's floats)
REDUCE_BLOCK = 16
#: a reduction whose vectorised last axis (reduce loops outside it) is 2 to this many blocks
#: of REDUCE_BLOCK runs the blocks unrolled, each a vector, so that GCC keeps their sums in
#: registers; as one vectorised loop every step stored the sums and loaded them back, a chain
#: through memory. ds_cnn_kws's 25x5 average pool of 64 channels, a C harness: 604 -> 185 ns;
#: the same additions in the same order (the same bits).
REDUCE_UNROLL_BLOCKS = 8


def vectorize_blocks(stage: te.Stage, last: te.IterVar) -> None:
    """Vectorise ``last``, the innermost loop of a reduction stage: in REDUCE_BLOCK lanes
    under an unrolled loop of blocks where it is 2..REDUCE_UNROLL_BLOCKS of them."""
    n = _extent(last)
    if n % REDUCE_BLOCK == 0 and 2 <= n // REDUCE_BLOCK <= REDUCE_UNROLL_BLOCKS:
        blocks, lanes = stage.split(last, factor=REDUCE_BLOCK)
        stage.unroll(blocks)
        stage.vectorize(lanes)
    elif n >= MIN_VECTOR_EXTENT:
        stage.vectorize(last)


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
        vectorize_blocks(stage, axes[-1])
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
    # a reduction read by another kept stage (a norm's mean stage, kept in its own
    # buffer) stays at root, even when its shape is the output's (a 1x1 group norm)
    kept = [
        st
        for op, st in sch.stages.items()
        if isinstance(op, te.ComputeOp) and not st.inlined and all(op is not o.op for o in outputs)
    ]
    readers = _reduction_readers(sch, kept)
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
    """For each op: whether one of ``stages`` (the kept ones: reductions, buffered
    statistics) reads it, looking through inlined stages."""
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
