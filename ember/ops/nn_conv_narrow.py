"""Tiles of packed float32 convolutions in blocks of 8 or 24 output channels for the C
kernels ``ember_f32_conv_tile8`` / ``ember_f32_conv_tile24`` (ember/codegen/c/f32_narrow.py).

nn.conv_packed packs a weight in blocks of 8 output channels when blocks of 16 would pad it
by more than 1/8 (8, 24, 40 channels: ember.ir.ops.nn_conv_weights.pack_block). On AVX2 C targets
those layers take the micro-kernel's channels-last layout like the 16-channel ones
(ember.ops.nn_conv_f32.tile_kernel_pays), three blocks of 8 regrouped into one of 24 where
the channels allow (ember.ops.nn_conv_narrow_layout), and ``tile_kernel_rewrite`` calls
these kernels for reduction nests whose vectorised lane loop has 8 or 24 lanes. Measured on
the kernels alone (3x3 96->24 at 80x80, one thread, thread CPU time, load 3-4, GFLOP/s of
the 24 real channels): 24 x 4 positions 75-89, 24 x 8 (two register tiles over chunks) 65,
8 x 8 47, 8 x 12 (input pointers spilled) 41-52, the 16 x 6 kernel on 32 padded channels 46;
the loop-IR tiles before them 27 in the whole layer (with its copy and epilogue).

On AVX-512 CPUs, which the main micro-kernel's predicate excludes, ``narrow_avx512`` opens
the same path for these blocks: c compiles the kernel of 24 channels with zmm register
tiles of up to 12 positions (AVX512_MAX_COLS), the llvm kinds call the runtime's AVX2 copy.
"""

from __future__ import annotations

import math
from functools import partial

from ember.target import Target
from ember.tir import te

#: the lanes (output channels per position) of the narrow kernels, with their extern names
#: and the most positions of one call's tile (one register tile: 8 x 8 or 24 x 4 floats).
NARROW_KERNELS: dict[int, str] = {8: "ember_f32_conv_tile8", 24: "ember_f32_conv_tile24"}
NARROW_MAX_COLS: dict[int, int] = {8: 8, 24: 4}

#: the packed weight's block the legalizer gives such layers
#: (ember.ir.ops.nn_conv_weights.PACK_BLOCKS).
NARROW_BLOCK = 8

#: blocks of 8 regrouped into one for the kernel (ember.ops.nn_conv_narrow_layout).
WIDE_BLOCK = 24


#: with AVX-512 the kernel of 24 channels holds up to this many positions in one register
#: tile (1.5 zmm accumulators each: 18 of the 32 registers at 12).
AVX512_MAX_COLS: dict[int, int] = {24: 12}


def narrow_avx512(target: Target | None, dtype: str, block: int) -> bool:
    """Whether a packed ``dtype`` convolution of ``block`` output channels per tile (before
    or after the regrouping by 24) calls the narrow kernels on ``target`` although the main
    micro-kernel's predicate (ember.ops.nn_conv_f32.use_tile_kernel) excludes it: float32
    blocks of 8 or 24 on an AVX-512 CPU, whose loop-IR tiles of 8 lanes fill half a vector.
    c compiles the kernel's AVX-512 code, the llvm kinds call the runtime's AVX-512 copy
    (ember/runtime/src/f32_tiles.h). Measured on dbnet's 3x3 96->24 at 80x80 (one thread,
    thread CPU time, interleaved, load 8.4; with NCHW transposes): c 1.57 ms (loop-IR
    tiles 2.98), llvm 2.63 with the kernel's AVX2 copy, 4.45 with its loop-IR tiles; 40x40 and 20x20
    alike (llvm 0.659 vs 1.085, 0.160 vs 0.267 ms)."""
    if target is None or dtype != "float32" or block not in (NARROW_BLOCK, WIDE_BLOCK):
        return False
    return "x86-avx512" in target.keys


def _avx512(target: Target | None) -> bool:
    """Whether ``target`` runs the kernels' AVX-512 code (an AVX-512 CPU: c compiles it, the
    llvm kinds call the runtime's AVX-512 copy)."""
    return target is not None and "x86-avx512" in target.keys


def narrow_kernel_cols(width: int, lanes: int, target: Target | None = None) -> int:
    """The positions per tile along a row of ``width`` for the kernel of ``lanes``: up to
    NARROW_MAX_COLS, the least modelled time (a tile of n positions runs n * lanes / 8 FMA
    chains, AVX2 needs 8 in flight, plus half a position per call). 80 -> 8 and 4. On an
    AVX-512 ``target`` see _avx512_cols."""
    if _avx512(target) and lanes in AVX512_MAX_COLS:
        return _avx512_cols(width, lanes)
    most = NARROW_MAX_COLS[lanes]
    fill = -(-8 * 8 // lanes)  # positions that keep 8 chains in flight
    best, best_cost = 1, float("inf")
    for t in range(min(width, most), 0, -1):
        full, tail = divmod(width, t)
        cost = full * max(t, fill) + (max(tail, fill) if tail else 0) + 0.5 * (full + bool(tail))
        if cost < best_cost:
            best, best_cost = t, cost
    return best


def _avx512_cols(width: int, lanes: int) -> int:
    """narrow_kernel_cols with zmm accumulators: up to AVX512_MAX_COLS positions, a tile
    costing its zmm vectors (an odd count of positions rounded up to a whole vector), at
    least 8 (the chains in flight), plus half a position's per call. 80 -> 12, 40 -> 10."""

    def chains(n: int) -> float:
        return max(-(-n * lanes // 16), 8) if n else 0

    best, best_cost = 1, float("inf")
    for t in range(min(width, AVX512_MAX_COLS[lanes]), 0, -1):
        full, tail = divmod(width, t)
        cost = full * chains(t) + chains(tail) + lanes / 32 * (full + bool(tail))
        if cost < best_cost:
            best, best_cost = t, cost
    return best


def narrow_kernel_tile(
    spatial: list[int], lanes: int, target: Target | None = None
) -> tuple[int, int]:
    """(rows, columns) of a narrow kernel's tile over the output's ``spatial`` extents: part
    of one row (one register tile per call: splitting wider tiles over chunks of the
    reduction measured slower, 65 vs 75 GFLOP/s at 24 channels)."""
    return 1, narrow_kernel_cols(spatial[-1], lanes, target)


def tile_reference(
    lanes: int, acc: list[float], x: list[float], w: list[float], *args: int, acc_stride: int = 0,
    acc_offset: int = 0,
) -> int:  # fmt: skip
    """A float32 conv tile kernel of ``lanes`` output channels per position (ember_f32_conv_tile,
    ember_f32_conv_tile8 / 24) in Python, for the TIR interpreter (sums in float64); position
    j's sums at ``acc[acc_offset + acc_stride * j + lane]`` (``acc_stride`` 0: ``lanes``)."""
    xoff, woff, ncols, tcols, cx, cr, e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2 = args
    stride = acc_stride or lanes
    for j in range(max(ncols, 0)):
        base = xoff + (j // tcols) * cr + (j % tcols) * cx
        for i0 in range(e0):
            for i1 in range(e1):
                for i2 in range(e2):
                    b = x[base + i0 * xs0 + i1 * xs1 + i2 * xs2]
                    wk = woff + i0 * ws0 + i1 * ws1 + i2 * ws2
                    for lane in range(lanes):
                        acc[acc_offset + stride * j + lane] += b * w[wk + lane]
    return 0


#: the Python implementations of the narrow kernels, for the TIR interpreter.
NARROW_INTERPRET_EXTERNS = {
    name: partial(tile_reference, lanes) for lanes, name in NARROW_KERNELS.items()
}


#: attribute of a materialised stage that copies an NCHW input into a padded channels-last
#: buffer (ember.ops.nn_conv_layouts.pad_channels_last): the input's plane size in floats.
CHANNELS_LAST_COPY = "channels_last_copy"


#: channels per position of the copy's inner loop (one vector store of 8 floats).
COPY_CHANNELS = 8

#: L1 data cache geometry the copy's order is chosen for (Zen and recent Intel cores: 32 KiB,
#: 8 ways of 64 sets x 64-byte lines).
L1_WAY_BYTES = 4096
L1_WAYS = 8


def plane_conflicts(channels: int, plane_floats: int) -> bool:
    """Whether reading one float32 from each of ``channels`` planes of ``plane_floats``
    floats per position overfills L1 sets: plane starts ``4 * plane_floats`` bytes apart
    fall into L1_WAY_BYTES / gcd(that, L1_WAY_BYTES) distinct sets. 96 channels at 80x80:
    4 sets, 24 lines each (conflicts); 32 at 80x80: 8 each; 96 at 40x40: 16 sets, 6 each.
    Measured (3x3 convs, one thread, busy machine, median copy-order A/B): rows won at 96ch
    80x80 (5.1 -> 4.6 ms), lost 3-7% at 32ch 80x80, 96ch 40x40 and 64ch 56x56."""
    spread = math.gcd(4 * plane_floats, L1_WAY_BYTES)
    return channels * spread > L1_WAYS * L1_WAY_BYTES


def schedule_channels_last_copy(stage: te.Stage, min_parallel_work: int) -> bool:
    """Schedule the padded channels-last copy ``(N, *padded, C)`` of an NCHW input (its
    attribute CHANNELS_LAST_COPY: the input's plane size in floats) whose planes conflict
    in L1 (plane_conflicts) row by row with the channels outside the columns: each
    channel's row is read contiguously (the columns vectorised, stores strided by C). The
    default order (channels innermost) reads one float from each of C planes per position;
    planes 25,600 bytes apart (80x80) fall into 4 of L1's 64 sets and evict each other: the
    copy took 25% of a 3x3 96->24 convolution at 80x80 (perf, one thread), 16% in rows.
    False (default schedule) otherwise."""
    op = stage.op
    if not isinstance(op, te.ComputeOp) or len(op.axis) < 3 or op.reduce_axis:
        return False
    *outer_axes, col, chan = op.axis
    extents = [int(getattr(iv.extent, "value", 1)) for iv in op.axis]
    if not plane_conflicts(extents[-1], int(op.attrs.get(CHANNELS_LAST_COPY, 0))):
        return False
    outer = stage.fuse(*outer_axes)
    if extents[-1] % COPY_CHANNELS:
        stage.reorder(outer, chan, col)
        inner = col
    else:
        co, inner = stage.split(chan, factor=COPY_CHANNELS)
        stage.reorder(outer, co, col, inner)
    work = 1
    for e in extents:
        work *= e
    if work >= min_parallel_work and int(getattr(outer.extent, "value", 1)) > 1:
        stage.parallel(outer)
    stage.vectorize(inner)
    return True
