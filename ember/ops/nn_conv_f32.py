"""Where packed float32 convolutions call the C micro-kernels, and their tiles.

schedule_packed_conv computes a tile of a packed convolution's accumulators (a few output
positions x one block of 16 output channels, or two: ember.ops.nn_conv_pair) per iteration
of the reduction, with the positions unrolled and the channels vectorised; the epilogue
reads the tile after. On AVX2 targets (``use_tile_kernel``) and AVX-512 ones
(``use_block_kernel``: blocks of 16 output channels, not the layers avx512_loop_tiles_win
keeps), for the layers whose reduction is long enough for it to pay (``tile_kernel_pays``:
the compute then lays the input out channels last and marks its reduction stage with
TILE_KERNEL, which the schedule follows), ember.ops.nn_conv_rewrite replaces the tiles'
reduction nests by calls of the kernel (ember/codegen/c/f32_kernels.py). This module holds
the predicates (block_kernel: the one the layout choice and the schedules share) and the
kernel tiles' sizes (kernel_tile).
"""

from __future__ import annotations

from ember.ops.nn_conv_narrow import narrow_avx512
from ember.target import Target

#: output channels per position of a tile (the packed weight's block the kernel takes).
BLOCK = 16

#: the most positions of one register tile (6 x 16 accumulators: 12 of AVX2's 16 registers).
MAX_COLS = 6

#: at most this many reduction loops (2-D convolutions: input channels, kernel rows, columns).
MAX_REDUCE_LOOPS = 3


#: the most positions of one register tile on AVX-512 CPUs: one zmm accumulator per
#: position (EMBER_F32_MAX_TILE, ember.codegen.c.f32_kernels.AVX512_MAX_TILE). Measured
#: with the kernel alone on ResNet-50's layers (Zen 5, one thread, CPU time, GFLOP/s of a
#: 277 limit; at most 8 / 9 / 10 / 11 / 12 / 14 / 16 positions): 3x3 256->256 at 14x14
#: 223 / 229 / 231 / 231 / 229 / 207 / 195, 128->128 at 28x28 221 / 227 / 232 / 231 / 225 /
#: 203 / 195, 1x1 1024->256 at 14x14 231 / 232 / 226 / 210 / 200 / 202 / 193, 2048->512 at
#: 7x7 216 / 222 / 218 / 216 / 215 / 217 / 210: from 14 positions on, too few general
#: registers are left for their input pointers (gcc spills them).
AVX512_MAX_COLS = 10

#: whether AVX-512 CPUs call ember_f32_conv_tile at all (use_block_kernel; False: their
#: loop-IR tiles of 14 columns, as before the AVX-512 register tiles).
AVX512_KERNEL = True


def use_tile_kernel(target: Target, dtype: str) -> bool:
    """Whether packed ``dtype`` convolutions on ``target`` call the AVX2 micro-kernels (the
    narrow and position-lane ones too): float32 on an AVX2 + FMA x86 CPU (``x86-avx2``; the
    llvm kinds call the runtime library's copy, ember.codegen.llvm.tiles). AVX-512 CPUs call
    only ember_f32_conv_tile (use_block_kernel)."""
    keys = set(target.keys)
    return dtype == "float32" and "x86-avx2" in keys and "x86-avx512" not in keys


def use_block_kernel(target: Target, dtype: str) -> bool:
    """Whether packed ``dtype`` convolutions of blocks of BLOCK output channels on ``target``
    call ember_f32_conv_tile: use_tile_kernel's targets, and the c kind on AVX-512 CPUs
    (``x86-avx512``), whose code compiles the kernel's AVX-512 register tiles (one zmm per
    position, up to AVX512_MAX_COLS); the llvm kinds there call the runtime library's
    AVX-512 copy (ember.codegen.llvm.tiles.tile_symbol)."""
    keys = set(target.keys)
    avx512 = AVX512_KERNEL and "x86-avx512" in keys
    return use_tile_kernel(target, dtype) or (dtype == "float32" and avx512)


def block_kernel(target: Target | None, dtype: str, block: int) -> bool:
    """Whether a packed ``dtype`` convolution of ``block`` output channels per tile calls a
    micro-kernel on ``target``: ember_f32_conv_tile for blocks of BLOCK (use_block_kernel),
    the narrow kernels for the others (use_tile_kernel's targets, and AVX-512 CPUs for
    blocks of 8 and 24: ember.ops.nn_conv_narrow.narrow_avx512). The one predicate the
    layout choice and the schedules share."""
    if target is None:
        return False
    if block == BLOCK:
        return use_block_kernel(target, dtype)
    return use_tile_kernel(target, dtype) or narrow_avx512(target, dtype, block)


#: on AVX-512 CPUs (the c kind) the loop-IR tiles of 14 columns keep the layers with fewer
#: input channels than this (ResNet-50's 7x7 stem, 3 channels: the kernel's innermost loop
#: then has 3 steps; 1.27x the loop-IR tiles' time)
AVX512_MIN_CHANNELS = 16
#: and the stride-1 1x1 convolutions of more output positions than this: gcc's loop-IR
#: tiles of 14 positions keep their accumulators in registers through the epilogue, and
#: the kernel's flattened tiles and row bands ran slower. One thread, thread CPU time,
#: interleaved in one process, load 5, kernel / loop-IR tiles: ResNet-50's 1x1 at 7x7
#: 0.90-1.00, at 14x14 1.01-1.16, 28x28 1.16-1.29, 56x56 1.10-1.45; PP-LCNet's at 7x7
#: 0.86, 14x14 1.01-1.05, 28x28 1.12-1.16; MobileNetV2's at 7x7 0.81-0.93, 14x14 0.95-1.14.
#: (3x3 convolutions: 0.70-0.98 at 7x7 to 56x56, YOLO's 0.83-0.99 at 10x10 to 80x80.)
#: Raised to 196 with the final kernel (tiles of 10, weights prefetched in the tiles' loop),
#: 14x14 was level: ResNet-50's 1024->256 0.95-0.99, 256->1024 1.01-1.03, MobileNetV2's
#: 576->96 and 384->64 0.84-0.95, 96->576 and 64->384 0.94-1.11; models 0.929x vs 0.930x.
#: Lowered to 0 (every stride-1 1x1) once the flattened loop-IR tiles cover up to 4 blocks
#: of output channels (ember.ops.nn_conv_flat.flat_tile_blocks): at 7x7 they beat the
#: kernel (one thread, thread CPU time, per-kernel profiles interleaved in one process,
#: load 5-6, loop-IR/kernel: ResNet-50's 512->2048 0.84, 2048->512 0.91; MobileNetV2's
#: 960->320, 320->1280, 960->160 0.87-0.91; PP-LCNet's 7x7 0.89-0.91; models: ResNet-50
#: 0.983x, MobileNetV2 0.978x, PP-LCNet 0.977x, YOLO and DBNet level).
AVX512_POINTWISE_POSITIONS = 0


def avx512_loop_tiles_win(
    target: Target, in_channels: int, taps: int, positions: int, strided: bool
) -> bool:
    """Whether a packed convolution of blocks of BLOCK on ``target`` keeps its loop-IR tiles
    although use_block_kernel: on AVX-512 CPUs, layers of fewer than AVX512_MIN_CHANNELS
    input channels (per group) and stride-1 1x1s (``taps`` 1, not ``strided``) of more than
    AVX512_POINTWISE_POSITIONS output positions (see there)."""
    if use_tile_kernel(target, "float32") or "x86-avx512" not in target.keys:
        return False
    if in_channels < AVX512_MIN_CHANNELS:
        return True
    return taps == 1 and not strided and positions > AVX512_POINTWISE_POSITIONS


def kernel_max_cols(target: Target) -> int:
    """The most positions of one register tile of ember_f32_conv_tile on ``target``."""
    return AVX512_MAX_COLS if "x86-avx512" in target.keys else MAX_COLS


#: attribute of a packed convolution's reduction stage: 1 when its compute chose the
#: kernel's layout (nn_conv_pack.kernel_layout), so that its schedule calls the kernel.
TILE_KERNEL = "tile_kernel"

#: the shortest reduction (input channels per group x kernel taps) for which the kernel's
#: channels-last layout and tiles pay; from LARGE_IMAGE_POSITIONS output positions on, half
#: of it. Measured per layer (one thread, thread CPU time, builds interleaved, load 7-8;
#: kernel/loop-IR time): 3x3 16->16 at 32x32 1.32, 3x3 32->32 at 16x16 0.95, 3x3 64->64 at
#: 8x8 0.93, 28x28 0.77; 1x1 64->64 at 25x5 1.09, 128->128 at 14x14 1.08, 192->32 at 28x28
#: 1.04, 144->24 at 56x56 0.81, 256->64 at 56x56 0.74; 10x4 1->64 (ds_cnn_kws) 1.32.
#: Lowered from 256 to 144 (3x3 over 16 channels) with the AVX-512 register tiles and the
#: pair tiles (ember_f32_conv_tile2): resnet8's stride-2 3x3 16->32 at 16x16 went from
#: loop-IR tiles (52% of the FMA limit) to the pair kernel; resnet8 one thread, thread CPU
#: time, A/B in one process, 300-400 rounds, load 4.5-5.3: 0.92-0.95x the time (93.4 ->
#: 88.5 us, 89.2 -> 82.1 us), with Winograd off (its 16->16 layers too) 127.5 -> 117.7 us;
#: MobileNetV2 (one 1x1 layer changes) 3.73 -> 3.70 ms, the other zoo models the same C;
#: on AVX2 (``c -mcpu=haswell``, run on the same Zen 5) resnet8 225.6 -> 214.5 us, the same
#: bits (the kernel adds in the loop IR's order), ds_cnn_kws level.
MIN_KERNEL_REDUCTION = 144
LARGE_IMAGE_POSITIONS = 2048
#: output elements of the largest layer on which the llvm kinds keep their own loop-IR
#: tiles (resnet8's biggest, 16 channels at 32x32), see loop_tiles_win
SMALL_LAYER_OUTPUTS = 16384
#: the shortest reduction (input channels x taps) with which even the small layers of
#: SMALL_LAYER_OUTPUTS take the kernel on the llvm kinds: LLVM's loop-IR tiles ran yolo's
#: 10x10 layers (3x3 128->128, 256->80, 256->64: reductions 1152-2304) at 1.2-1.4x c's
#: kernel, while resnet8's layers (reductions 144-576) keep winning on them (see
#: loop_tiles_win). One thread, thread CPU time, per kernel, quiet machine: 3x3 128->128
#: at 10x10 2.85 (loop-IR tiles) against c's 2.35 ms for its three calls.
LLVM_KERNEL_REDUCTION = 1024
#: on AVX-512 CPUs the llvm kinds call ember_f32_conv_tile (the runtime's AVX-512 copy) for
#: blocks of BLOCK only on images of at most this many output positions: LLVM's loop-IR
#: tiles of 14 columns (32 zmm registers) beat it from 10x10 up. One thread, thread CPU
#: time, per kernel, rotated A/B in one process, load 6, kernel / loop-IR tiles: ResNet-50's
#: 7x7 layers 0.66-0.89, 14x14 0.87-1.09, 28x28 1.00-1.13, 56x56 0.93-1.13; YOLO's 10x10
#: 1.00-1.14, 20x20 to 80x80 1.01-1.17 (whole models: yolo 1.07x, resnet50 0.975x).
LLVM_AVX512_KERNEL_POSITIONS = 64


def tile_kernel_pays(in_channels: int, taps: int, positions: int, block: int) -> bool:
    """Whether a packed convolution layer with ``in_channels`` input channels per group,
    ``taps`` kernel taps and ``positions`` output positions (output channels in blocks of
    ``block``) runs faster through the micro-kernel (its channels-last layout and its
    tiles) than through the loop-IR tiles: short reductions leave the kernel's call, its
    accumulators' round trip through memory and the input's transposed copy uncovered."""
    reduction = in_channels * taps
    if positions >= LARGE_IMAGE_POSITIONS:
        return 2 * reduction >= MIN_KERNEL_REDUCTION
    return reduction >= MIN_KERNEL_REDUCTION


def loop_tiles_win(
    target: Target, block: int = BLOCK, positions: int = 0, outputs: int = 0, reduction: int = 0
) -> bool:
    """Whether ``target``'s own loop-IR tiles beat the micro-kernel on a layer of ``block``
    output channels per tile and ``positions`` output positions (0: any size): on the llvm
    kinds for blocks of 16 below LARGE_IMAGE_POSITIONS. LLVM keeps the loop-IR tiles'
    weights in registers (gcc folds them into every FMA: why c calls the kernel even on
    short reductions); with the kernel resnet8 ran 1.10-1.13x its llvm time (rotated A/B,
    thread CPU time, load 8-9; 3x3 64ch at 8x8 0.080 vs 0.070 ms, 32ch at 16x16 0.077 vs
    0.066, its stride-2 convolutions 0.044 vs 0.035), while the kernels for blocks of 8 and
    24 win everywhere (dbnet's 3x3 96->24 at 80x80: 4.5 vs 11.4 ms). ``outputs`` (the
    layer's output elements, 0: unknown) above SMALL_LAYER_OUTPUTS take the kernel: ResNet-50's
    layers at 28x28 and below (25,088 outputs and more) ran 1.3-1.8x c's time on loop-IR
    tiles (1x1 stride-2 downsamples, residual 1x1s at 7x7; whole model llvm/c 1.08), and so
    does a ``reduction`` (input channels x taps, 0: unknown) of LLVM_KERNEL_REDUCTION or more.
    On AVX-512 CPUs blocks of BLOCK keep them on more than LLVM_AVX512_KERNEL_POSITIONS
    positions (0: unknown, the loop-IR tiles)."""
    if "llvm" not in target.keys:
        return False
    if "x86-avx512" in target.keys:
        return block == BLOCK and not 0 < positions <= LLVM_AVX512_KERNEL_POSITIONS
    if outputs > SMALL_LAYER_OUTPUTS or reduction >= LLVM_KERNEL_REDUCTION:
        return False
    return block == BLOCK and positions < LARGE_IMAGE_POSITIONS


#: images of at most this many output positions are one tile per block of channels: the
#: kernel splits it in register tiles itself and runs them over chunks of the input channels
#: (see f32_kernels.py), so that the weights are read once per chunk, not once per tile.
WHOLE_IMAGE_POSITIONS = 196


#: a 1x1 convolution with at least this many input channels and at most
#: POSITIONS_OUTER_FLOATS weights runs its tiles positions outer, channel blocks inner: the
#: weights stay in L2 and each tile's input (one cache line per channel, read in NCHW) is
#: fetched once, not once per block (1x1 256->64 at 56x56, one thread, busy machine: 1.46x
#: -> 1.04x onnxruntime; with 64 input channels the other order won: 1.12x vs 1.58x).
POSITIONS_OUTER_CHANNELS = 256
POSITIONS_OUTER_FLOATS = 32 * 1024


def positions_outer(in_channels: int, out_channels: int) -> bool:
    """Whether a flattened 1x1 convolution tiles positions outermost (see above)."""
    return (
        in_channels >= POSITIONS_OUTER_CHANNELS
        and in_channels * out_channels <= POSITIONS_OUTER_FLOATS
    )


#: larger images whose rows are narrow enough take tiles of whole rows, as many as divide
#: the height within WHOLE_IMAGE_POSITIONS (56x56: 2 rows, 28x28: 7), which the kernel
#: splits like a whole image: a chunk's weights are read from L1 by ~20 register tiles
#: instead of the whole reduction's (taps x channels x 64 bytes: 36 KiB at 64 channels,
#: more than L1) from L2 by each tile of 6. Measured per layer (one thread, CPU time,
#: interleaved, load 8-10; row pieces -> bands, best of 20-25, ms): 3x3 64->64 at 56x56
#: 3.31 -> 3.14 and 3.07 -> 3.00, 128->128 at 28x28 3.53 -> 3.39 and 3.03 -> 3.07 (level),
#: 64->64 at 32x32 1.23 -> 1.16: a few percent at most, within the noise of a busy host.
ROW_BANDS = True


def kernel_tile(spatial: list[int], most: int = MAX_COLS) -> tuple[int, int]:
    """(rows, columns) of a tile over the output's ``spatial`` extents (the last two; one for
    flattened positions) when the micro-kernel computes it: the whole image when it is
    small, else a band of whole rows (ROW_BANDS), else ``kernel_cols`` of one row (register
    tiles of at most ``most`` positions, kernel_max_cols)."""
    width = spatial[-1]
    height = spatial[-2] if len(spatial) == 2 else 1
    if len(spatial) <= 2 and height * width <= WHOLE_IMAGE_POSITIONS:
        return height, width
    if len(spatial) == 2 and ROW_BANDS and 2 * width <= WHOLE_IMAGE_POSITIONS:
        fits = [r for r in range(1, height + 1) if r * width <= WHOLE_IMAGE_POSITIONS]
        rows = max(r for r in fits if height % r == 0)
        if rows > 1:
            return rows, width
    return 1, kernel_cols(width, most)


def kernel_cols(width: int, most: int = MAX_COLS) -> int:
    """The positions per tile along a row of ``width`` when the micro-kernel computes the
    tiles: up to ``most``, the one with the least modelled time. A tile of n positions runs
    2n independent FMA chains on AVX2 (n on AVX-512: ``most`` above MAX_COLS); both need 8
    in flight (2 pipes x 4 cycles latency), so a tile costs like max(n, 4) positions (AVX2;
    max(n, 8) on AVX-512), plus half a position per call (zeroing, epilogue). AVX2: rows of
    56 take 6 (9 tiles and a tail of 2), 14 take 5 (5, 5, 4), 7 take 4 (4, 3)."""
    least = 8 if most > MAX_COLS else 4
    best, best_cost = 1, float("inf")
    for t in range(min(width, most), 0, -1):
        full, tail = divmod(width, t)
        cost = full * max(t, least) + (max(tail, least) if tail else 0) + 0.5 * (full + bool(tail))
        if cost < best_cost:
            best, best_cost = t, cost
    return best
