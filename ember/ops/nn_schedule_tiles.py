"""Register tiling of the packed nn anchors (helpers of ember.ops.nn_schedule): packed
float32 convolutions (``nn.conv_packed``, channels-last reduction with a ``block``
attribute) computed per parallel iteration as one tile of ``block`` output channels times
up to ``register_tiles(target).conv_cols`` output columns, their accumulators a local tile
the C compiler keeps in vector registers (schedule_packed_conv; a 1x1 convolution
flattened over positions is tiled as a matrix product), and matrix products with at least
MATMUL_MIN_ROWS rows tiled ``register_tiles(target).matmul`` rows x columns, the rhs row
segment loaded once per reduction step serving every row of the tile (schedule_matmul)."""

from __future__ import annotations

from dataclasses import dataclass

from ember.ops.common import static_shape
from ember.ops.nn_conv_f32 import (
    BLOCK,
    TILE_KERNEL,
    block_kernel,
    kernel_max_cols,
    kernel_tile,
    loop_tiles_win,
    positions_outer,
    use_tile_kernel,
)
from ember.ops.nn_conv_narrow import (
    NARROW_KERNELS,
    narrow_kernel_tile,
)
from ember.ops.nn_conv_rewrite import tile_kernel_rewrite
from ember.ops.nn_matmul_tiles import block_rows, column_lanes, operand_bytes
from ember.ops.nn_schedule import (
    MIN_PARALLEL_WORK,
    MIN_VECTOR_EXTENT,
    _compute_op,
    _extent,
    _size,
    _stage_shape,
    materialize_tagged,
    reduction_stages,
    schedule_anchor,
    schedule_root_reduction,
)
from ember.ops.registry import ScheduleContext
from ember.target import Target
from ember.tir import te
from ember.tir.expr import Call
from ember.tir.functor import post_order_visit
from ember.tir.transform.guard_bounds import guard_bounds


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
#: ``llvm x86-avx512`` (the llvm kinds on an AVX-512 CPU, see register_tiles): the AVX2 row's
#: 4 columns are 4 accumulators of 16 floats, half of the 8 that two FMA units of 4 cycles'
#: latency need (resnet8's 3x3 tiles ran at 50% of the FMA limit). Zen 5, one thread, thread
#: CPU time, builds interleaved in one process, load 4-11, llvm/c per model for tiles of
#: 4 / 8 / 10 / 14 columns (matmul 6x16 / 6x16 / 8x32 / 8x64): resnet8 1.30 / 0.82 / 0.86 /
#: 0.90, crnn 1.34 / 1.47 / 0.97 / 0.96, yolo 1.37 / 0.99 / 0.88 / 0.97, dbnet 1.37 / 0.99 /
#: 0.95 / 0.94, resnet50 1.32 / 1.00 / 0.97 / 0.97; 14 x (8, 32) matched 14 x (8, 64)
#: everywhere (0.94-0.99). 12 columns: crnn 1.68 (25 columns = 12 + 12 + a guarded tile
#: with 1 column in range). With the full and tail tiles' buffers split
#: (codegen.llvm.branch_allocs) 14 columns ran yolo at 0.89. C's own tiles, then.
TILES: dict[str, RegisterTiles] = {
    "x86-avx512": RegisterTiles(14, (8, 64)),
    "llvm x86-avx512": RegisterTiles(14, (8, 64)),
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
    """The register tiles for ``target``: its most specific key with a row in TILES, a row
    named ``"<key> <CPU record key>"`` (``"llvm x86-avx512"``) before the key's own."""
    for key in target.keys:
        for name in (f"{key} {target.cpu.key}", key):
            if name in TILES:
                return TILES[name]
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
    """schedule_packed_conv for nn.conv_packed: float32 tiles on AVX2 and AVX-512 through the C
    micro-kernel (ember.ops.nn_conv_f32), its tile widths, for the layers whose compute
    chose the kernel's layout (attribute TILE_KERNEL of the reduction stage, set by
    nn_conv_pack.kernel_layout: the layout and the schedule switch together)."""
    ops = [_compute_op(s) for s in reduction_stages(ctx.sch, list(ctx.group_outputs))]
    chosen = any(op is not None and op.attrs.get(TILE_KERNEL) for op in ops)
    blocks = [int(op.attrs.get("block", BLOCK)) for op in ops if op is not None]
    block = blocks[0] if blocks else BLOCK
    kernel = chosen and block_kernel(ctx.target, ctx.group_outputs[0].dtype, block)
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
        tile = narrow_kernel_tile(spatial, block, ctx.target) if block in NARROW_KERNELS else None
        nrows, cols = tile or kernel_tile(spatial, kernel_max_cols(ctx.target))
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
    tile_accumulator(main, outer, acc, reds, kernel, nrows)


def tile_accumulator(
    main: te.Stage,
    outer: te.IterVar,
    acc: te.Stage,
    reds: list[te.Stage],
    kernel: bool,
    nrows: int,
    blocks: int = 1,
) -> None:
    """The register tile of a packed convolution's channels-last accumulator ``acc`` (rows,
    columns, block) computed at ``outer`` of the output stage ``main``: reduce loops outside
    the tile, the tile unrolled (unless ``kernel``: its loops become a micro-kernel call) and
    its block vectorised; the other reduction stages at root. A kernel tile of ``blocks``
    blocks of BLOCK channels (nn_conv_pair) loops over them inside the positions."""
    acc_op = _compute_op(acc)
    assert acc_op is not None
    acc.compute_at(main, outer)
    a_axes = list(acc_op.axis)
    if kernel and blocks > 1:
        ob, oi = acc.split(a_axes[-1], factor=BLOCK)
        acc.reorder(*a_axes[:-3], *acc_op.reduce_axis, *a_axes[-3:-1], ob, oi)
        acc.vectorize(oi)
        for stage in reds:
            if stage is not acc:
                schedule_root_reduction(stage)
        return
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
        tile = narrow_kernel_tile(spatial, block, ctx.target) if block in NARROW_KERNELS else None
        cols = (tile or kernel_tile(spatial, kernel_max_cols(ctx.target)))[1]
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


#: fewer output rows than this take column blocks of GEMV_COLS (a row-vector times a
#: matrix is memory-bound: each block reads GEMV_COLS contiguous floats of every rhs row, and
#: the blocks are the parallel loop, so 2 threads stream the rhs at twice the rate).
MATMUL_MIN_ROWS = 4

#: the widest column block of a matrix product with fewer than MATMUL_MIN_ROWS rows: at most
#: this many columns, a multiple of 16 dividing the width where one exists. Before, such
#: products ran as one row loop on one thread at any thread count (mobilenet_v2's 1 x 1280
#: @ 1280 x 1008 classifier, 5 MB of weights).
GEMV_COLS = 256


#: a product with fewer than MATMUL_MIN_ROWS rows takes column blocks from this many
#: multiply-adds per row (512 KB of float32 weights) and GEMV_MIN_COLS columns. GPT-2's
#: decoding step (one token; 6 layers of 384, 55 MB of weights a token) ran its 1 x 1536 @
#: 1536 x 384 and 1 x 384 @ 384 x 384 products on one thread: A/B in one process, thread
#: CPU time / wall, 1.91 -> 1.51 ms at one thread, 1.78 -> 1.12 at two. From 1 << 16,
#: dense_autoencoder's 640 -> 128 layer (weights in the L2) ran 10% slower at one thread.
GEMV_MIN_WORK = 1 << 17
GEMV_MIN_COLS = 64


def gemv_blocks(op: te.ComputeOp, acc_op: te.ComputeOp) -> bool:
    """Whether the few-row product ``acc_op`` (output stage ``op``) runs in column blocks:
    from 2 x GEMV_COLS columns, or GEMV_MIN_COLS and GEMV_MIN_WORK multiply-adds a row."""
    width = _extent(op.axis[-1])
    if width >= 2 * GEMV_COLS:
        return True
    return width >= GEMV_MIN_COLS and width * _size(acc_op.reduce_axis) >= GEMV_MIN_WORK


def _lane_tile(width: int, limit: int, lanes: int = 8, tail: bool = False) -> int:
    """The largest multiple of ``lanes`` not above ``limit`` that divides ``width`` (a tile
    with no tail), else with ``tail``, when ``width`` is wider than ``limit`` (ViT's 197
    tokens), the widest multiple of ``lanes`` up to ``limit`` and a tail tile (its guards
    as loop bounds: guard_bounds); else the largest divisor of ``width`` not above
    ``limit``. 197's divisor is 1 (one column at a time), 196's 49 (3 vectors and a lane):
    ViT-Tiny's scores, 3 x 197 x 64 @ 64 x 197, took 1.06 ms; in tiles of 64 and a tail
    0.18 (one thread, thread CPU time; 0.06 for 192 columns)."""
    fits = [d for d in range(lanes, min(width, limit) + 1, lanes) if width % d == 0]
    if fits:
        return max(fits)
    if tail and TAIL_TILES and width > limit and limit >= lanes:
        return limit - limit % lanes
    return max(d for d in range(1, min(width, limit) + 1) if width % d == 0)


#: whether matmul columns that no multiple of the lanes divides take tiles of lanes with a
#: tail tile (_lane_tile) rather than a divisor of the width.
TAIL_TILES = True


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
    few_rows = _extent(op.axis[-2]) < MATMUL_MIN_ROWS
    if vector_operand or (few_rows and not gemv_blocks(op, acc_op)):
        schedule_anchor(ctx)
        return
    acc = rows[0]
    materialize_tagged(sch, outputs)
    axes = list(op.axis)
    tile = register_tiles(ctx.target).matmul
    height, width, depth = _extent(axes[-2]), _extent(axes[-1]), _size(acc_op.reduce_axis)
    block = False
    if few_rows:  # column blocks of every row (GEMV_COLS), at least two
        mb = height
        nb = _lane_tile(width, min(GEMV_COLS, width // 2), lanes=16)
    elif block := block_rows(ctx.target, height, width, depth, operand_bytes(acc_op)):
        mb, nb = height, BLOCK  # every row: the kernel splits them in register tiles
    else:
        mb = _tile_cols(height, tile[0])
        nb = _lane_tile(width, tile[1], lanes=column_lanes(ctx.target, width), tail=True)
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
    matmul_tiles_call_kernel(ctx, nb, block)
    ctx.post_lower.append(guard_bounds)  # tail tiles: guards as loop bounds


def matmul_tiles_call_kernel(ctx: ScheduleContext, nb: int, block: bool = False) -> None:
    """On the micro-kernel's targets, matmul tiles of 16 columns call ember_f32_conv_tile
    (gcc folds the rhs loads into every FMA; crnn's 64 x (24x256 @ 256x32)): AVX2 C
    targets, and AVX-512 ones for the tiles block_rows chose (``block``)."""
    if nb != BLOCK or ctx.group_outputs[0].dtype != "float32":
        return
    kernel = use_tile_kernel(ctx.target, "float32") or block
    if kernel and not loop_tiles_win(ctx.target):  # llvm keeps the rhs in registers itself
        ctx.post_lower.append(tile_kernel_rewrite)
