"""Loop-IR tiles of flattened NHWC 1x1 convolutions on AVX-512 CPUs
(ember.ops.nn_conv_nhwc.flat_channels_last when the micro-kernel does not compute them):
how many blocks of output channels one tile covers (flat_tile_blocks) and which strided
1x1s flatten their positions too (flat_strided)."""

from __future__ import annotations

from typing import Any

from ember.ops.nn_conv_f32 import BLOCK

#: float32 lanes of accumulators of one loop-IR tile of a flattened 1x1 convolution on
#: AVX-512 CPUs (flat_tile_blocks): 28 of the 32 zmm registers (7 positions x 4
#: blocks). 384 (6 x 4) and 512 (8 x 4) measured level: ResNet-50 1.006x and 1.008x,
#: MobileNetV2 0.981x at 512 (one thread, thread CPU time, per-kernel profiles interleaved
#: in one process, load 5-7).
FLAT_TILE_LANES = 448

#: whether flattened 1x1 convolutions on loop-IR tiles (not the kernel's) on AVX-512 C
#: targets tile several blocks of output channels at once (flat_tile_blocks): one weight
#: vector and one broadcast serve 4 and 7 FMAs instead of 7 and 1, and 28 accumulators
#: instead of 7 (the tile of one block: 8 positions at most, RegisterTiles.matmul) hide the
#: FMA latency. Measured as FLAT_TILE_LANES, one block -> several: ResNet-50 0.924x (1x1
#: 256->1024 at 14x14 0.78, 1024->256 0.76, 128->512 at 28x28 0.85, 64->256 at 56x56 0.87,
#: 64->64 0.73), MobileNetV2 0.880x; bitwise the same outputs.
FLAT_MULTI_BLOCK = True
#: the blocks per tile flat_tile_blocks picks from, the first dividing. (2,) ran ResNet-50
#: at 1.032x and MobileNetV2 at 1.063x of (4, 3, 2); (6, 5, 4, 3, 2) MobileNetV2 0.997x
#: (16->96 at 112x112 0.81 but 576, 384 and 192 outputs 1.07-1.14). 5 and 7 come last: only
#: block counts that 2, 3 and 4 do not divide take them (one block per tile before;
#: ShuffleNet's split groups of 68 channels, 5 blocks, in tiles of 5 positions x 5 blocks):
#: one thread / two threads, A/B in one process, shufflenet 0.92 / 0.89, dbnet 0.987 /
#: 0.963, yolo level (its 80-channel layers); the others' code is unchanged.
FLAT_BLOCKS = (4, 3, 2, 5, 7)


#: whether strided unpadded 1x1 convolutions (ResNet-50's downsamples) take
#: flat_channels_last with flat_tile_blocks' loop-IR tiles on AVX-512 CPUs
#: (flat_strided) instead of the micro-kernel's row tiles. Measured as FLAT_TILE_LANES,
#: kernel -> flat loop-IR tiles: ResNet-50's 256->512 at 28x28 0.74, 512->1024 at 14x14
#: 0.78, 1024->2048 at 7x7 0.79, the model 0.972x; bitwise the same outputs.
FLAT_STRIDED = True


def flat_strided(
    target: Any,
    dtype: str,
    wshape: tuple[int, ...],
    strides: tuple[int, ...],
    pads: tuple[int, ...],
    groups: int,
) -> bool:
    """Whether an NHWC strided 1x1 convolution (packed weight ``wshape``) takes
    flat_channels_last on loop-IR tiles (FLAT_STRIDED): float32 blocks of 16 of which
    flat_tile_blocks puts several in one tile on ``target``."""
    if not FLAT_STRIDED or dtype != "float32" or groups != 1 or any(pads):
        return False
    kernel = tuple(int(k) for k in wshape[2:-1])
    if len(kernel) != 2 or any(k != 1 for k in kernel) or int(wshape[-1]) != BLOCK:
        return False
    return len(strides) == 2 and flat_tile_blocks(target, int(wshape[0])) > 1


#: the fewest blocks of a flattened 1x1 convolution that get a zero block more when no
#: multiple of FLAT_BLOCKS is their count and one is the count plus one (flat_extra_block).
FLAT_EXTRA_MIN = 8


def flat_extra_block(target: Any, blocks: int) -> bool:
    """Whether a flattened 1x1 convolution of ``blocks`` blocks of 16 output channels
    packs one zero block more on ``target``: its count has no tile of FLAT_BLOCKS (a
    prime: 11, 13, 23 ...), so its tiles would take one block each, while one block more
    has one (at most 1/FLAT_EXTRA_MIN more work; the output stage then runs in tiles of
    the padded blocks, the last one's stores guarded: nn_conv_nhwc._schedule_flat)."""
    if blocks < FLAT_EXTRA_MIN or flat_tile_blocks(target, blocks) > 1:
        return False
    return flat_tile_blocks(target, blocks + 1) > 1


def flat_tile_blocks(target: Any, blocks: int) -> int:
    """How many blocks of output channels (of ``blocks``) one loop-IR tile of a flattened
    1x1 convolution covers on ``target``: on AVX-512 CPUs the first of FLAT_BLOCKS dividing
    ``blocks`` (FLAT_MULTI_BLOCK), else 1. The llvm kinds too (their AVX-512 row of
    register tiles fits 32 registers): llvm time / c time, one thread, thread CPU time,
    interleaved in one process, load 1-2, one block -> several (strided 1x1s included):
    ResNet-50 1.09-1.11 -> 1.02-1.03, MobileNetV2 1.14-1.17 -> 1.04-1.09, PP-LCNet 1.01 ->
    0.93, YOLO 0.98 -> 0.98; bitwise the same outputs."""
    keys = set(target.keys) if target is not None else set()
    if not FLAT_MULTI_BLOCK or "x86-avx512" not in keys:
        return 1
    return next((b for b in FLAT_BLOCKS if blocks % b == 0), 1)
