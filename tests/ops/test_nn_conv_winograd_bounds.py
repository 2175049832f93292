"""``ember_f32_winograd`` built standalone, its input and its scratch placed against
inaccessible pages: the kernel must stay inside the scratch that ``scratch_bytes`` plans (V
and M, a cache line after each transform point's V or M when its size is a multiple of
4 KiB: ``point_stride``) and read nothing outside the input but what its zero masks skip.
A read or write outside crashes the test.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from c_source_lib import host_libraries

from ember.codegen.c.f32_winograd import WINOGRAD_C
from ember.ir.ops.nn_conv_winograd_form import (
    channel_blocks,
    padded_channels,
    phase_padding,
    space_to_depth,
    stride2_weight,
    transform_weight,
    unpack_transformed,
    winograd_reference,
)
from ember.ops.nn_conv_winograd import PANEL_GAP, panel_rows, point_stride, scratch_bytes

pytestmark = pytest.mark.cc

#: the runtime the kernel calls (its parallel loops in chunks, the last first) and an entry
#: point that copies the input to the start or the end of a mapping between two
#: inaccessible pages and puts the scratch at the end of another
_HARNESS_HEAD = r"""#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static int wb_threads = 1;
int32_t EmberBackendGetNumThreads(void) { return wb_threads; }
typedef int32_t (*wb_range)(int64_t begin, int64_t end, void* cdata);
int32_t EmberBackendParallelFor(wb_range f, void* cdata, int64_t extent, int64_t grain,
                                int32_t nt) {
  (void)nt;
  if (grain < 1) grain = 1;
  for (int64_t b = (extent - 1) / grain * grain; b >= 0; b -= grain)
    if (f(b, b + grain < extent ? b + grain : extent, cdata) != 0) return -1;
  return 0;
}
"""

_HARNESS_TAIL = r"""
static char* wb_guarded(size_t n, int at_end, char** base, size_t* total) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
  *total = body + 2 * page;
  *base = (char*)mmap(NULL, *total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (*base == MAP_FAILED) return NULL;
  if (mprotect(*base + page, body, PROT_READ | PROT_WRITE) != 0) return NULL;
  return at_end ? *base + page + body - n : *base + page;
}

int32_t wb_run(const float* x, int64_t x_bytes, const float* u, float* y, int64_t s_bytes,
               const float* bias, const float* res, const int32_t* g, int32_t threads,
               int32_t at_end) {
  char *bx, *bs;
  size_t tx, ts;
  float* gx = (float*)wb_guarded((size_t)x_bytes, at_end, &bx, &tx);
  char* gs = wb_guarded((size_t)s_bytes, 1, &bs, &ts);
  if (gx == NULL || gs == NULL) return -2;
  memcpy(gx, x, (size_t)x_bytes);
  memset(gs, 0xAA, (size_t)s_bytes);
  wb_threads = threads;
  int32_t rc = ember_f32_winograd(gx, u, y, gs, g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7],
                                  g[8], g[9], g[10], g[11], g[12], bias, res, g[13]);
  munmap(bx, tx);
  munmap(bs, ts);
  return rc;
}
"""

_AVX512 = {"avx512f", "avx512bw", "avx512vl"}
#: -march per path, and the host features it needs to run
BUILDS = {"x86-64-v2": set(), "skylake-avx512": _AVX512}

#: bias, residual add, ReLU (EMBER_WINO_BIAS | EMBER_WINO_RES << 4 | EMBER_WINO_RELU << 8)
EPI = 1 | 2 << 4 | 3 << 8


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    """The kernel with the harness, one library per build the host can run."""
    libs = host_libraries(tmp_path_factory, _HARNESS_HEAD + WINOGRAD_C + _HARNESS_TAIL, BUILDS)
    vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    for lib in libs.values():
        lib.wb_run.argtypes = [vp, i64, vp, vp, i64, vp, vp, vp, i32, i32]
    return libs


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize(
    "h,w,c,o,m",
    [
        (32, 32, 16, 16, 4),  # resnet8's layers: 64 x 16 floats, a line after each point
        (16, 16, 32, 32, 4),
        (8, 8, 64, 64, 4),  # four blocks of output channels, panels of 4 tiles
        (20, 20, 16, 64, 4),  # 25 tiles: panels of 5 x 64 channels
        (14, 14, 16, 128, 4),  # two weight blocks of 64 channels
        (9, 11, 32, 64, 2),  # F(2,3), 30 tiles of four blocks, cut edge tiles
        (7, 9, 16, 24, 4),  # odd sizes: cut edge tiles, a last block of 8 channels
        (5, 6, 32, 16, 2),
    ],
)
def test_reads_only_its_input_and_scratch(libs, h: int, w: int, c: int, o: int, m: int) -> None:
    """Every build, 1 and 2 threads, the input against the page before it or after it: the
    float64 transforms' result within rounding, the same bits in every run."""
    rng = np.random.default_rng(3)
    x = np.maximum(rng.standard_normal((1, h, w, c)), 0).astype(np.float32)
    wt = (rng.standard_normal((o, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, h, w, o)).astype(np.float32)
    u = transform_weight(wt, m)
    tiles = -(-h // m) * -(-w // m)
    nb = channel_blocks(padded_channels(o))
    g = np.array([1, h, w, c, o, h, w, 1, 1, m, 3, nb, panel_rows(tiles, nb), EPI], np.int32)
    nbytes = scratch_bytes(1, c, o, h, w, m)
    conv = winograd_reference(x, u, m, (1, 1, 1, 1), (h, w))[..., :o].astype(np.float64)
    want = np.maximum(conv + bias + res, 0)
    seen = []
    for march, lib in libs.items():
        for threads in (1, 2):
            for at_end in (0, 1):
                y = np.full((1, h, w, o), np.nan, np.float32)
                args = [_ptr(x), x.nbytes, _ptr(u), _ptr(y), nbytes, _ptr(bias), _ptr(res)]
                rc = lib.wb_run(*args, _ptr(g), threads, at_end)
                assert rc == 0, (march, threads, at_end)
                np.testing.assert_allclose(y, want, rtol=0, atol=1e-4 * np.abs(want).max())
                seen.append(y)
    for y in seen[1:]:
        np.testing.assert_array_equal(y, seen[0])


@pytest.mark.parametrize("pad", [3, 6])
def test_patches_partly_or_wholly_in_wide_padding(libs, pad: int) -> None:
    """Pads wider than the kernel: edge patches with several rows and columns outside, and
    (pad 6) patches wholly in the padding, which read as zeros."""
    rng = np.random.default_rng(4)
    h = w = 5
    c, o, m = 16, 32, 4
    oh = ow = h + 2 * pad - 2
    x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    wt = (rng.standard_normal((o, c, 3, 3)) * 0.2).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, oh, ow, o)).astype(np.float32)
    u = transform_weight(wt, m)
    tiles = -(-oh // m) * -(-ow // m)
    nb = channel_blocks(padded_channels(o))
    g = np.array([1, h, w, c, o, oh, ow, pad, pad, m, 3, nb, panel_rows(tiles, nb), EPI], np.int32)
    nbytes = scratch_bytes(1, c, o, oh, ow, m)
    conv = winograd_reference(x, u, m, (pad,) * 4, (oh, ow)).astype(np.float64)
    want = np.maximum(conv + bias + res, 0)
    for lib in libs.values():
        for threads in (1, 2):
            y = np.full((1, oh, ow, o), np.nan, np.float32)
            args = [_ptr(x), x.nbytes, _ptr(u), _ptr(y), nbytes, _ptr(bias), _ptr(res)]
            assert lib.wb_run(*args, _ptr(g), threads, 1) == 0
            np.testing.assert_allclose(y, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize(
    "h,w,c,o,pads",
    [
        (32, 32, 16, 32, (1, 1, 1, 1)),  # resnet8's stride-2 layers
        (16, 16, 32, 64, (1, 1, 1, 1)),
        (10, 14, 16, 24, (0, 0, 1, 1)),  # edge tiles, a last block of 8 channels
        (6, 4, 16, 16, (2, 2, 2, 2)),  # patches partly in wide padding
    ],
)
def test_stride2_reads_only_its_input(libs, h: int, w: int, c: int, o: int, pads) -> None:
    """F(4,2) of a stride-2 convolution's phases, read where they lie in x (r = 2): every
    build, 1 and 2 threads, x against the page before it or after it."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    wt = (rng.standard_normal((o, c, 3, 3)) * 0.2).astype(np.float32)
    oh, ow = (h + pads[0] + pads[2] - 3) // 2 + 1, (w + pads[1] + pads[3] - 3) // 2 + 1
    bias = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, oh, ow, o)).astype(np.float32)
    u = transform_weight(stride2_weight(wt, pads[0], pads[1]), 4)
    top, left, _, _ = pads2 = phase_padding(pads, (h, w), (oh, ow))
    tiles = -(-oh // 4) * -(-ow // 4)
    nb = channel_blocks(padded_channels(o))
    dims = [1, h // 2, w // 2, 4 * c, o, oh, ow, top, left, 4, 2, nb]
    g = np.array([*dims, panel_rows(tiles, nb), EPI], np.int32)
    nbytes = scratch_bytes(1, 4 * c, o, oh, ow, 4, 2)
    conv = winograd_reference(space_to_depth(x), u, 4, pads2, (oh, ow), r=2)[..., :o]
    want = np.maximum(conv.astype(np.float64) + bias + res, 0)
    seen = []
    for lib in libs.values():
        for threads in (1, 2):
            for at_end in (0, 1):
                y = np.full((1, oh, ow, o), np.nan, np.float32)
                args = [_ptr(x), x.nbytes, _ptr(u), _ptr(y), nbytes, _ptr(bias), _ptr(res)]
                assert lib.wb_run(*args, _ptr(g), threads, at_end) == 0
                np.testing.assert_allclose(y, want, rtol=0, atol=1e-4 * np.abs(want).max())
                seen.append(y)
    for y in seen[1:]:
        np.testing.assert_array_equal(y, seen[0])


def _repacked(u: np.ndarray, nb: int) -> np.ndarray:
    """A packed transformed weight packed again with ``nb`` blocks of 16 output channels."""
    full = unpack_transformed(u)  # (P, C, Op), exact: float32 values
    p, c, op = full.shape
    bw = 16 * nb
    return np.ascontiguousarray(
        full.reshape(p, c, op // bw, bw).transpose(0, 2, 1, 3).astype(np.float32)
    )


@pytest.mark.parametrize("h,w,c,o", [(8, 8, 64, 64), (20, 20, 16, 128)])
def test_one_two_or_four_blocks_compute_the_same_bits(libs, h: int, w: int, c: int, o: int) -> None:
    """The products sum each output's C terms in the same order whatever the register tile:
    a weight packed in 4, 2 or 1 blocks of 16 output channels (with their panel rows) gives
    the same bits, at 1 and 2 threads."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, h, w, c)).astype(np.float32)
    wt = (rng.standard_normal((o, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    res = rng.standard_normal((1, h, w, o)).astype(np.float32)
    u = transform_weight(wt, 4)
    assert u.shape[3] == 64  # channel_blocks: four
    tiles = -(-h // 4) * -(-w // 4)
    nbytes = max(scratch_bytes(1, c, o, h, w, 4), 4 * 36 * 2 * tiles * (c + o) + 4096)
    seen = []
    for lib in libs.values():
        for nb in (4, 2, 1):
            dims = [1, h, w, c, o, h, w, 1, 1, 4, 3, nb]
            g = np.array([*dims, panel_rows(tiles, nb), EPI], np.int32)
            un = _repacked(u, nb)
            for threads in (1, 2):
                y = np.full((1, h, w, o), np.nan, np.float32)
                args = [_ptr(x), x.nbytes, _ptr(un), _ptr(y), nbytes, _ptr(bias), _ptr(res)]
                assert lib.wb_run(*args, _ptr(g), threads, 0) == 0
                seen.append(y)
    for y in seen[1:]:
        np.testing.assert_array_equal(y, seen[0])


def test_output_channel_blocks_and_their_panel_rows() -> None:
    """64 output channels and their multiples pack in four blocks, with panels of 4..7 tiles
    that pad least (the fewest rows on ties); 32 and 96 in two, others in one."""
    assert [channel_blocks(o) for o in (64, 128, 512, 32, 96, 48, 16)] == [4, 4, 4, 2, 2, 1, 1]
    assert [panel_rows(t, 4) for t in (3, 4, 16, 25, 49, 196)] == [3, 4, 4, 5, 7, 4]


def test_a_line_after_points_a_multiple_of_1_kib_apart() -> None:
    """A panel's points R x C floats apart get a cache line more at multiples of 1 KiB (256
    floats: at most four of the L1's sets; resnet8's panels of 16 x 16, 8 x 32 and 4 x 64
    floats) and keep their stride at an odd number of lines or 512 bytes."""
    assert point_stride(8 * 64) == 8 * 64 + 16
    assert point_stride(16 * 16) == 16 * 16 + 16
    assert point_stride(4 * 64) == 4 * 64 + 16
    assert point_stride(8 * 16) == 8 * 16
    assert point_stride(8 * 96) == 8 * 96 + 16
    assert point_stride(14 * 24) == 14 * 24


def test_scratch_holds_each_panel_and_its_gap() -> None:
    """resnet8's 32x32x16 layer: 4 panels of 16 tiles, each 36 points of 16 x 16 floats and a
    line for V and for M, PANEL_GAP after each."""
    per_panel = 36 * 2 * (16 * 16 + 16) + 2 * PANEL_GAP
    assert scratch_bytes(1, 16, 16, 32, 32, 4) == 4 * 4 * per_panel + 64


def test_one_block_of_output_channels_takes_panels_of_up_to_16_tiles() -> None:
    """resnet8's 32x32x16 layer (64 tiles, one block of 16 output channels) takes panels of
    16 tiles; with two blocks (32 channels: 28 accumulators) at most 14."""
    assert panel_rows(64, 1) == 16
    assert panel_rows(64, 2) == 8
    assert panel_rows(15, 1) == 15
    assert panel_rows(15, 2) == 8  # 16 rows in two panels of 8


def test_the_scratch_layout_constants_agree_with_the_kernel_text() -> None:
    """scratch_bytes sizes the kernel's scratch from PANEL_GAP and point_stride: the C
    text's EMBER_WINO_GAP and EMBER_WINO_STRIDE must say the same."""
    gap = re.search(r"#define EMBER_WINO_GAP (\d+)", WINOGRAD_C)
    stride = re.search(
        r"#define EMBER_WINO_STRIDE\(n\) \(\(n\) % (\d+) == 0 \? \(n\) \+ (\d+)", WINOGRAD_C
    )
    assert gap is not None and stride is not None
    assert int(gap.group(1)) == PANEL_GAP
    every, line = int(stride.group(1)), int(stride.group(2))
    assert point_stride(every) == every + line and point_stride(every + 16) == every + 16
