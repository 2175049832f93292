"""``ember_q8_dwconv`` built standalone with a worst-case runtime: its workspace full of
garbage and its parallel tasks (one channel each) run last channel first, so a task that
writes past its own channels clobbers outputs already written; guard bytes after the output
catch writes past the tensor. Each build (portable C, AVX2, AVX-512 without and with VNNI)
must give a numpy reference's bytes, serially and in parallel.

Regression: the AVX2 planes' output rows were copied 16 bytes at a time, every row but the
last spilling into the rows after it; with fewer than 8 columns the second-to-last row's
spill crossed into the next channel (16 - 2 OW bytes), so at 2 threads the first outputs
of a task's first channel sometimes got the previous task's bytes (3x3 stride 2 on 14x14).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from c_source_lib import host_libraries

from ember.codegen.c.int8_dwconv_add import DW_ADD_KERNELS_C
from ember.codegen.c.int8_kernels import INT8_KERNELS_C

pytestmark = pytest.mark.cc

#: the runtime the kernel calls, adversarial: workspace of 0xAA bytes, the parallel loop's
#: units run one at a time from the last; a test entry point over ember_q8_dwconv
_HARNESS_HEAD = r"""#include <stdlib.h>
#include <string.h>
static int dwb_threads = 1;
void* EmberBackendAllocWorkspace(int32_t dev, int32_t id, uint64_t n, int32_t code, int32_t bits) {
  void* p = aligned_alloc(64, (size_t)(n + 63) / 64 * 64);
  if (p != NULL) memset(p, 0xAA, (size_t)n);
  return p;
}
int32_t EmberBackendFreeWorkspace(int32_t dev, int32_t id, void* p) {
  free(p);
  return 0;
}
int32_t EmberBackendGetNumThreads(void) { return dwb_threads; }
typedef int32_t (*dwb_range)(int64_t begin, int64_t end, void* cdata);
int32_t EmberBackendParallelFor(dwb_range f, void* cdata, int64_t extent, int64_t grain,
                                int32_t nt) {
  if (grain >= extent) return f(0, extent, cdata);
  for (int64_t b = (extent - 1) / grain * grain; b >= 0; b -= grain)
    if (f(b, b + grain < extent ? b + grain : extent, cdata) != 0) return -1;
  return 0;
}
"""

_HARNESS_TAIL = r"""
int32_t dwb_run(const void* x, const int16_t* w, const int32_t* bias, const float* mult, void* y,
                void* scratch, const int32_t* g, int32_t threads) {
  dwb_threads = threads;
  return ember_q8_dwconv(x, w, bias, mult, y, scratch, g[0], g[1], g[2], g[3], g[4], g[5], g[6],
                         g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15], g[16], 0,
                         g[17], g[18]);
}
"""

_AVX512 = {"avx512f", "avx512bw", "avx512vl"}
#: -march per path, and the host features it needs to run
BUILDS = {
    "x86-64-v2": set(),  # portable C loops
    "znver3": {"avx2", "fma"},  # AVX2: the flattened phase planes
    "skylake-avx512": _AVX512,  # AVX-512BW: same3 / s2rows, the planes elsewhere
    "icelake-server": _AVX512 | {"avx512_vnni", "avx512vbmi", "avx512_vbmi2"},
}

GUARD = 64


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    """The kernel with the harness, one library per build the host can run."""
    source = _HARNESS_HEAD + INT8_KERNELS_C + DW_ADD_KERNELS_C + _HARNESS_TAIL
    return host_libraries(tmp_path_factory, source, BUILDS)


def _reference(x, w, bias, mult, zx, zy, k, s, p, d, out_hw) -> np.ndarray:
    """Depthwise conv of x - zx (zero padding), requantized as the kernels: float32
    acc * mult, rounded half to even, + zy, clamped to uint8."""
    n, c, h, wd = x.shape
    (kh, kw), (oh, ow) = k, out_hw
    xp = np.zeros((n, c, h + 2 * p[0], wd + 2 * p[1]), np.int64)
    xp[:, :, p[0] : p[0] + h, p[1] : p[1] + wd] = x.astype(np.int64) - zx
    acc = np.broadcast_to(bias[None, :, None, None].astype(np.int64), (n, c, oh, ow)).copy()
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * d[0], j * d[1]
            rows = slice(r0, r0 + s[0] * (oh - 1) + 1, s[0])
            tap = xp[:, :, rows, c0 : c0 + s[1] * (ow - 1) + 1 : s[1]]
            acc += tap * w[None, :, i * kw + j, None, None].astype(np.int64)
    v = np.rint(acc.astype(np.float32) * mult[None, :, None, None]) + zy
    return np.clip(v, 0, 255).astype(np.uint8)


@pytest.mark.parametrize(
    "shape,k,s,p,d",
    [
        ((1, 240, 14, 14), (3, 3), (2, 2), (1, 1), (1, 1)),  # 7x7 out: the 2-thread flake
        ((2, 9, 7, 7), (3, 3), (2, 2), (1, 1), (1, 1)),  # 4x4 out
        ((1, 11, 5, 5), (3, 3), (1, 1), (1, 1), (1, 1)),  # 5x5 'same'
        ((1, 7, 9, 9), (5, 5), (2, 2), (2, 2), (1, 1)),  # 5x5 kernel: the planes on AVX-512
        ((1, 6, 8, 7), (3, 3), (2, 2), (0, 0), (1, 1)),  # 3x3 out, no padding
        ((1, 5, 9, 1), (3, 1), (1, 1), (1, 0), (1, 1)),  # 1 column
        ((1, 5, 6, 9), (3, 3), (1, 1), (2, 2), (2, 2)),  # dilated, 6x9 out
        ((1, 4, 20, 20), (3, 3), (1, 1), (1, 1), (1, 1)),  # 20 columns: full rows and tails
    ],
)
@pytest.mark.parametrize("x_signed", [False, True])
def test_dwconv_writes_only_its_channels(libs, shape, k, s, p, d, x_signed) -> None:
    """Every build, serial (the planned scratch, garbage-filled) and in tasks of one channel
    run last first (each allocating garbage workspace): the reference's bytes, nothing
    written past the output."""
    rng = np.random.default_rng(5)
    n, c, h, wd = shape
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (wd + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    t = k[0] * k[1]
    w = rng.integers(-128, 128, (c, t)).astype(np.int16)
    wpad = np.zeros((c, (t + 1) // 2 * 2), np.int16)
    wpad[:, :t] = w
    bias = rng.integers(-2000, 2000, c).astype(np.int32)
    mult = rng.uniform(0.002, 0.006, c).astype(np.float32)
    zx, zy = (-3, 40) if x_signed else (120, 40)
    x = rng.integers(-128, 128, shape) if x_signed else rng.integers(0, 256, shape)
    x = x.astype(np.int8 if x_signed else np.uint8)
    want = _reference(x, w, bias, mult, zx, zy, k, s, p, d, (oh, ow))
    hp, wp = (oh - 1) * s[0] + (k[0] - 1) * d[0] + 1, (ow - 1) * s[1] + (k[1] - 1) * d[1] + 1
    phases = 2 * s[1] * hp * ((wp + s[1] - 1) // s[1] + 16)  # quantized_dwconv_int8's plan
    hq, wq = oh + (k[0] - 1) * d[0] // s[0], ow + (k[1] - 1) * d[1] // s[1]
    plane = max(phases, 2 * (s[0] * s[1] * hq * wq + wq + 32) + oh * wq + 32, 416)
    g = [n, c, h, wd, k[0], k[1], oh, ow, s[0], s[1], p[0], p[1], d[0], d[1], zx, int(x_signed)]
    g = np.asarray([*g, zy, 0, plane], np.int32)  # zy, is_signed, plane bytes
    # a parallel run needs EMBER_Q8_PAR_MACS / 4 = 100000 multiply-adds: 240x14x14 has them
    threads = [1, 2] if n * c * oh * ow * t >= 100000 else [1]
    wrong = []
    for march, lib in libs.items():
        for nt in threads:
            y = np.full(want.size + GUARD, 0x5A, np.uint8)
            scratch = np.full(plane + 64, 0xAA, np.uint8)
            ptr = [a.ctypes.data_as(ctypes.c_void_p) for a in (x, wpad, bias, mult, y, scratch, g)]
            assert lib.dwb_run(*ptr, nt) == 0
            past = int((y[want.size :] != 0x5A).sum())
            bad = np.argwhere(y[: want.size].reshape(want.shape) != want)
            if past or len(bad):
                wrong.append(f"{march} at {nt}: {past} bytes past, {len(bad)} wrong: {bad[:4]}")
    assert not wrong, "\n".join(wrong)
