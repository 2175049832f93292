"""Tiles of small-M matrix products on AVX-512 targets (helpers of
ember.ops.nn_schedule_tiles.schedule_matmul): column tiles of whole zmm registers
(column_lanes) and, for packed weights of BLOCK columns that a run reads from beyond L2,
one call of ember_f32_conv_tile over every row per block (block_rows)."""

from __future__ import annotations

from ember.ops.common import static_shape
from ember.ops.nn_conv_f32 import (
    BLOCK,
    MIN_KERNEL_REDUCTION,
    WHOLE_IMAGE_POSITIONS,
    loop_tiles_win,
    use_block_kernel,
    use_tile_kernel,
)
from ember.target import Target
from ember.tir import te

#: whether matmul tiles on AVX-512 targets take a multiple of 16 columns (whole zmm
#: registers) when one divides the width, instead of a multiple of 8 (column_lanes): 56 of
#: 112 columns are 3.5 registers a row, 8 rows x 4 accumulators spill. One thread, thread
#: CPU time, A/B interleaved in one process, 400 rounds, load 3-4, the product alone, c
#: (llvm): 24 x 256 @ 256 x 112 (crnn's classifier) 0.0190 -> 0.0071 ms, 27% -> 71% of the
#: FMA limit (0.0150 -> 0.0073), 64 x 256 @ 256 x 80 0.0403 -> 0.0126 (0.0232 -> 0.0125),
#: 128 x 128 @ 128 x 112 0.0490 -> 0.0172 (0.0371 -> 0.0184), the same bits; crnn 2.261 ->
#: 2.199 ms (llvm level, 2.207 / 2.208); the other zoo models and BERT: the same C.
ZMM_COLUMNS = True


def column_lanes(target: Target | None, width: int) -> int:
    """The lanes a matmul tile's columns are a multiple of (_lane_tile): 16 on AVX-512
    targets when 16 divides ``width`` (ZMM_COLUMNS), else 8."""
    avx512 = target is not None and "x86-avx512" in target.keys
    return 16 if ZMM_COLUMNS and avx512 and width % 16 == 0 else 8


#: whether AVX-512 C targets call ember_f32_conv_tile for matmul tiles of 16 columns
#: (block_rows), as AVX2 ones do (matmul_tiles_call_kernel). Their loop-IR tiles of 8 rows
#: x 16 columns waited on the weights: crnn's bidirectional LSTM projection, 24 x 256 @ the
#: packed (128, 256, 16) weight (nn_rnn.blocked_matmul), 2 MiB read once per run; the
#: kernel fetches the next block's weights ahead while it computes one. One thread, thread
#: CPU time, A/B interleaved in one process, 300-500 rounds, load 3-6: crnn 2.368 -> 2.195
#: ms median (0.927x; two more runs 0.916x, 0.910x), the projections 0.432 -> 0.313 ms (2
#: calls, 42% -> 59% of the FMA limit), the streamed linear layers (16 x 24 x 16) 0.107 ->
#: 0.081 ms; with the loop-IR tile over all 24 rows instead (90% of the FMA limit with hot
#: weights, the kernel's 76%) crnn ran at 1.11x the kernel's time: the weights are cold in
#: a model.
MATMUL_BLOCK_KERNEL = True

#: the most rows of a matmul whose tiles of 16 columns are one kernel call over every row
#: (the kernel splits them into register tiles as even as possible, each block's weights
#: then read from L1 for all but the first): as the kernel's whole images.
MATMUL_KERNEL_ROWS = WHOLE_IMAGE_POSITIONS

#: the shortest reduction for which an AVX-512 matmul tile calls the kernel: as a
#: convolution's (MIN_KERNEL_REDUCTION). BERT's scores @ V (64 x 64 @ 64 x 16 per head)
#: ran at 1.015x the model's time through the kernel (one thread, thread CPU time, A/B
#: interleaved, load 5): its call and its accumulators' round trip are not covered.
MATMUL_KERNEL_REDUCTION = MIN_KERNEL_REDUCTION

#: the smallest larger operand (bytes, every batch: the weight) for which an AVX-512
#: matmul tile calls the kernel: with the weights hot in L1/L2 the loop-IR tiles win (one
#: thread, thread CPU time, A/B interleaved in one process, 400 rounds, load 4-5, the
#: product alone run again and again, kernel / loop-IR tiles: 24 x 256 @ (128, 256, 16)
#: 1.09, 24 x 512 @ (16, 512, 16) 1.09, 48 x 256 @ (32, 256, 16) 1.09, 64 x 512 @ (8, 512,
#: 16) 1.05), and in a model a weight of half of Zen 5's 1 MiB L2 or more comes from L3
#: (crnn's 512 KiB linear layers and 2 MiB projections gain, see MATMUL_BLOCK_KERNEL;
#: BERT's 256 KiB FFN down projection 64 x 512 @ (8, 512, 16) ran the model at 1.012x
#: through the kernel).
MATMUL_KERNEL_MIN_BYTES = 512 << 10


def block_rows(
    target: Target | None, rows: int, width: int, depth: int, operand_bytes: int
) -> bool:
    """Whether a matmul of ``rows`` x ``depth`` @ ``depth`` x ``width`` (per batch; its larger
    operand ``operand_bytes``) on ``target`` computes tiles of every row x BLOCK columns through
    ember_f32_conv_tile: on AVX-512 C targets (use_block_kernel, MATMUL_BLOCK_KERNEL) for
    BLOCK columns (packed weights: nn_rnn.blocked_matmul), at most MATMUL_KERNEL_ROWS rows,
    a reduction of at least MATMUL_KERNEL_REDUCTION and an operand of MATMUL_KERNEL_MIN_BYTES.
    AVX2 targets keep their 6 x 16 tiles."""
    if target is None or not MATMUL_BLOCK_KERNEL or loop_tiles_win(target):
        return False
    if use_tile_kernel(target, "float32") or not use_block_kernel(target, "float32"):
        return False
    big = depth >= MATMUL_KERNEL_REDUCTION and operand_bytes >= MATMUL_KERNEL_MIN_BYTES
    return width == BLOCK and rows <= MATMUL_KERNEL_ROWS and big


def operand_bytes(acc_op: te.ComputeOp) -> int:
    """The bytes of a matmul reduction's larger float32 operand (the weight: 0 if none)."""
    sizes = [0]
    for t in acc_op.input_tensors():
        if t.dtype == "float32":
            n = 4
            for d in static_shape(t):
                n *= d
            sizes.append(n)
    return max(sizes)
