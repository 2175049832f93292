"""Micro-kernel tiles of two blocks of 16 output channels (``ember_f32_conv_tile2``,
ember/codegen/c/f32_pair.py) for the packed float32 convolutions with kernel taps on AVX-512
C targets: each broadcast input serves two FMAs (one weight vector per block) instead of
one, and a register tile of 7 positions keeps 14 accumulators. The packed weight keeps its
blocks of 16 (the tile reads the second block ``wb`` floats after the first); the schedule
(ember.ops.nn_conv_nhwc.schedule_channels_last) splits the tile's channels into
``PAIR_BLOCKS x 16`` and ember.ops.nn_conv_rewrite calls the kernel for that nest."""

from __future__ import annotations

import math

from ember.target import Target

#: the kernel's call_extern name (ember.codegen.c.f32_pair.PAIR_KERNEL_NAME).
PAIR_KERNEL = "ember_f32_conv_tile2"

#: blocks of 16 output channels per tile of ember_f32_conv_tile2.
PAIR_BLOCKS = 2

#: whether the kernel tiles of convolutions with several taps on AVX-512 C targets cover
#: PAIR_BLOCKS blocks (pair_blocks). One thread, thread CPU time, A/B in one process, load
#: 18-23, pair / one block: ResNet-50's 3x3 layers 56x56x64 0.886, 28x28x128 0.880,
#: 14x14x256 0.898, 7x7x512 0.961, stride 2 to 28x28 0.848, 14x14 0.828, 7x7 0.965 (76/74/77/
#: 71% of the FMA limit -> 86/84/85/74%); models resnet50 0.934, yolo 0.963, resnet8 0.954,
#: dbnet 1.002-1.015. 1x1s keep one block: their flattened kernel tiles of two blocks ran
#: 1x1 64->256 at 56x56 (with a residual) at 1.094x, 128->512 at 28x28 0.991x.
PAIR_TILES = True

#: the most positions of one register tile of ember_f32_conv_tile2
#: (ember.codegen.c.f32_pair.PAIR_MAX_TILE, EMBER_F32P_MAX_TILE).
PAIR_MAX_COLS = 7


def pair_blocks(target: Target | None, blocks: int, taps: int, group_blocks: int = 0) -> int:
    """The blocks of 16 channels one micro-kernel tile of a convolution with ``blocks``
    blocks and ``taps`` kernel taps covers on ``target``: PAIR_BLOCKS on the c kind on
    AVX-512 CPUs for kernels of several taps (PAIR_TILES) when they divide ``blocks`` and
    the ``group_blocks`` blocks of a group (grouped convolutions: the pair's blocks read
    the same input channels), else 1."""
    if target is None or not PAIR_TILES or taps == 1 or blocks % PAIR_BLOCKS:
        return 1
    if group_blocks % PAIR_BLOCKS:
        return 1
    keys = set(target.keys)
    return PAIR_BLOCKS if "x86-avx512" in keys and "llvm" not in keys else 1


#: the kernel reading the unpadded input (ember.codegen.c.f32_pair.PAIR_PAD_KERNEL_NAME).
PAIR_PAD_KERNEL = "ember_f32_conv_tile2_pad"

#: the most conjuncts of a padding the kernel tests (EMBER_F32P_CONDS): a 2-D convolution's.
PAD_CONDS = 4

#: the most input channels of a convolution reading its unpadded input: a tap in the padding
#: reads a static row of this many zeros (the kernel's chunk of the reduction, PAIR_CHUNK).
PAD_MAX_CHANNELS = 1024

#: whether padded convolutions of pair tiles read their input in place (pad_free), the
#: padding tested per tap by ember_f32_conv_tile2_pad, instead of a padded copy.
PAD_FREE = True

#: the most blocks of 16 output channels of a convolution reading its input in place. The
#: copy's share of a layer falls with its output channels (the copy is H x W x C, the
#: convolution H x W x C x O x taps / strides), while the kernel's register tiles of edge
#: positions cost ~10% more than the others. One thread thread CPU time, two threads wall,
#: A/B in one process, in place / padded copy: resnet8 (stride-2 3x3 to 32 and 64
#: channels) 0.995 / 0.975; ResNet-50 (to 128-512) 1.009 / 1.007; yolo, dbnet, crnn,
#: mobilenet_v2 within 1%.
PAD_FREE_MAX_BLOCKS = 4


def pad_free(target: Target | None, blocks: int, taps: tuple[int, ...], channels: int) -> bool:
    """Whether a padded channels-last convolution (``blocks`` blocks of 16 output channels,
    kernel ``taps``, ``channels`` input channels per group) reads its input in place: pair
    tiles (pair_blocks) of at most PAD_FREE_MAX_BLOCKS blocks, at most PAD_CONDS conjuncts
    (2-D or 1-D), kernel rows of at most 64 taps and PAD_MAX_CHANNELS channels, with
    PAD_FREE on."""
    if not PAD_FREE or 2 * len(taps) > PAD_CONDS or channels > PAD_MAX_CHANNELS:
        return False
    if blocks > PAD_FREE_MAX_BLOCKS or any(t > 64 for t in taps):  # 64: the kernel's tap masks
        return False
    return pair_blocks(target, blocks, math.prod(taps)) > 1
