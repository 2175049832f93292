"""Padded convolutions of pair tiles reading their input in place
(ember.ops.nn_conv_pair.pad_free, ``ember_f32_conv_tile2_pad``): no padded copy in the
lowered loop IR, results bitwise equal to the padded copy's (the padding's +0 products are
still added), and a kernel that reads nothing outside the unpadded input: each test below
places it against inaccessible pages, so a read outside crashes the test."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from c_source_lib import host_libraries
from packed_conv_lowering import nhwc_bias, nhwc_conv_module, v

from ember.codegen.c.f32_kernels import F32_KERNELS_C
from ember.driver import build
from ember.ir import Attrs, Function, call
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_pair
from ember.ops.nn_conv_pair import pad_free
from ember.ops.nn_conv_rewrite import pair_pad_tile_reference, pair_tile_reference
from ember.ops.nn_conv_winograd import WINOGRAD_CONFIG
from ember.runtime.cpu_features import host_features
from ember.target import Target
from ember.testing.runners import run_artifacts
from ember.transform import PassContext

AVX512 = "c -mcpu=znver4"


def test_pad_free_predicate() -> None:
    avx512 = Target.create(AVX512)
    assert pad_free(avx512, 4, (3, 3), 64)
    assert not pad_free(avx512, 3, (3, 3), 64)  # an odd count of blocks: no pair tiles
    assert not pad_free(avx512, 8, (3, 3), 64)  # 128 output channels: the copy pays
    assert not pad_free(avx512, 4, (3, 3), 2048)  # more channels than the zero row holds
    assert not pad_free(avx512, 4, (3, 3, 3), 64)  # 3-D: six conjuncts
    assert not pad_free(Target.create("c -mcpu=haswell"), 4, (3, 3), 64)
    assert not pad_free(Target.create("llvm -mcpu=znver4"), 4, (3, 3), 64)


def test_ops_constants_are_the_kernel_texts() -> None:
    # ember.ops may not import ember.codegen (the layer table): its copies of the kernel's
    # sizes must match the C text's
    from ember.codegen.c import f32_pair

    assert nn_conv_pair.PAD_CONDS == f32_pair.PAD_CONDS
    assert nn_conv_pair.PAD_MAX_CHANNELS == f32_pair.PAIR_CHUNK  # the row of zeros
    assert nn_conv_pair.PAIR_PAD_KERNEL == f32_pair.PAIR_PAD_KERNEL_NAME
    assert f"#define EMBER_F32P_CONDS {f32_pair.PAD_CONDS}" in f32_pair.F32_PAIR_C
    assert "ember_f32p_zeros[EMBER_F32P_CHUNK]" in f32_pair.F32_PAIR_C


def _lower(xshape: tuple[int, ...], wshape: tuple[int, ...], strides: int = 1) -> str:
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, wshape[0] * wshape[-1]))
    conv = call(
        "nn.conv_packed",
        x,
        wp,
        data_layout="NHWC",
        padding=[1, 1, 1, 1],
        strides=[strides, strides],
    )
    func = Function((x, wp, b), call("relu", call("add", conv, b)), Attrs({"Primitive": 1}))
    return str(lower_group(func, "kernel", AVX512))


def test_padded_conv_reads_its_input_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _lower((1, 32, 32, 16), (2, 16, 3, 3, 16), strides=2)
    assert '"ember_f32_conv_tile2_pad"' in text and "pad[" not in text
    # the top and left conjuncts (the bottom and right hold at every tap), then two unused
    assert ", 2, 0, 1, 0, -1, 0, 2, 0, 1, " in text and ", 0, 0, 0, 0, 0)" in text
    monkeypatch.setattr(nn_conv_pair, "PAD_FREE", False)
    text = _lower((1, 32, 32, 16), (2, 16, 3, 3, 16), strides=2)
    assert '"ember_f32_conv_tile2"' in text and "pad[" in text


def _conv_ref(x: np.ndarray, w: np.ndarray, pads: list[int], s: int, d: int) -> np.ndarray:
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    k = w.shape[-1]
    oh = (xp.shape[1] - d * (k - 1) - 1) // s + 1
    ow = (xp.shape[2] - d * (k - 1) - 1) // s + 1
    out = np.zeros((1, oh, ow, w.shape[0]))
    for kh in range(k):
        for kw in range(k):
            rows = slice(kh * d, kh * d + s * (oh - 1) + 1, s)
            cols = slice(kw * d, kw * d + s * (ow - 1) + 1, s)
            out += xp[:, rows, cols, :] @ w[:, :, kh, kw].T.astype(np.float64)
    return out


@pytest.mark.parametrize(
    ("size", "cin", "cout", "k", "pads", "s", "d"),
    [
        (32, 16, 32, 3, [1, 1, 1, 1], 2, 1),  # resnet8's stride-2 layers
        (16, 32, 64, 3, [1, 1, 1, 1], 2, 1),
        (15, 48, 32, 3, [1, 1, 1, 1], 2, 1),  # odd size: the bottom and right bound too
        (14, 64, 64, 3, [1, 1, 1, 1], 1, 1),  # a whole image per call
        (28, 32, 32, 3, [1, 1, 1, 1], 1, 1),  # bands of rows
        (100, 16, 32, 3, [1, 1, 1, 1], 1, 1),  # row pieces of 7 and a guarded tail
        (20, 16, 32, 3, [0, 0, 1, 1], 2, 1),  # asymmetric (TensorFlow's "SAME", stride 2)
        (12, 16, 32, 5, [2, 1, 2, 3], 1, 1),  # 5x5, every side its own padding
        (18, 16, 32, 3, [2, 2, 2, 2], 1, 2),  # dilated
        (9, 400, 32, 3, [1, 1, 1, 1], 1, 1),  # long reductions: chunks of the channels
    ],
)
def test_in_place_bitwise_equal_padded_copy(
    monkeypatch: pytest.MonkeyPatch,
    size: int,
    cin: int,
    cout: int,
    k: int,
    pads: list[int],
    s: int,
    d: int,
) -> None:
    """On the host: the same bits as the padded copy's kernel, and the float64 result."""
    rng = np.random.default_rng(size + cin)
    x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
    w = rng.standard_normal((cout, cin, k, k)).astype(np.float32)
    mod = nhwc_conv_module(x.shape, w, padding=pads, strides=[s, s], dilation=[d, d])
    direct = PassContext(config={WINOGRAD_CONFIG: False})  # stride 1: not Winograd's
    built = build(mod, "c", pass_context=direct)
    if "avx512f" in host_features():
        source = b"".join(a.content for a in built.artifacts if a.file_name.endswith(".c"))
        assert b"(void)ember_f32_conv_tile2_pad(" in source and b"pad[" not in source
    got = run_artifacts(built, {"x": x})[0]
    monkeypatch.setattr(nn_conv_pair, "PAD_FREE", False)
    want = run_artifacts(build(mod, "c", pass_context=direct), {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    ref = np.maximum(_conv_ref(x, w, pads, s, d) + nhwc_bias(cout), 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)


def test_reference_is_the_padded_copy_reference() -> None:
    rng = np.random.default_rng(5)
    h, w_, c, s = 5, 6, 3, 2
    x = rng.standard_normal((h, w_, c))
    xp = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    wb = 3 * 3 * c * 16
    w = [float(t) for t in rng.standard_normal(2 * wb)]
    oh, ow = 3, 3
    loops = (3, w_ * c, 3 * c * 16, 3, c, c * 16, c, 1, 16)
    conds = (-1, s, 0, 1, 0, h, -s, 0, -1, 0, -1, 0, s, 0, 1, w_, 0, -s, 0, -1)
    got = [0.0] * (oh * ow * 32)
    head = (oh * ow, ow, s * c, s * w_ * c)
    pair_pad_tile_reference(got, list(x.ravel()), w, -(w_ + 1) * c, 0, *head, *loops, wb, 4, *conds)
    want = [0.0] * (oh * ow * 32)
    loops_p = (3, (w_ + 2) * c, 3 * c * 16, 3, c, c * 16, c, 1, 16)
    head_p = (oh * ow, ow, s * c, s * (w_ + 2) * c)
    pair_tile_reference(want, list(xp.ravel()), w, 0, 0, *head_p, *loops_p, wb)
    np.testing.assert_allclose(got, want, rtol=1e-12)


#: the unpadded input copied against an inaccessible page before it or after it
_HARNESS = r"""#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static float* pp_guarded(size_t n, int at_end, char** base, size_t* total) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), body = (n + page - 1) / page * page;
  *total = body + 2 * page;
  *base = (char*)mmap(NULL, *total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (*base == MAP_FAILED) return NULL;
  if (mprotect(*base + page, body, PROT_READ | PROT_WRITE) != 0) return NULL;
  return (float*)(at_end ? *base + page + body - n : *base + page);
}
int32_t pp_pad(float* acc, const float* x, int64_t x_bytes, const float* w, const int64_t* o,
               const int32_t* a, int32_t at_end) {
  char* base;
  size_t total;
  float* gx = pp_guarded((size_t)x_bytes, at_end, &base, &total);
  if (gx == NULL) return -2;
  memcpy(gx, x, (size_t)x_bytes);
  int32_t rc = ember_f32_conv_tile2_pad(
      acc, gx, w, o[0], o[1], a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9],
      a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21],
      a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31], a[32], a[33],
      a[34]);
  munmap(base, total);
  return rc;
}
int32_t pp_copy(float* acc, const float* x, const float* w, const int64_t* o, const int32_t* a) {
  return ember_f32_conv_tile2(acc, x, w, o[0], o[1], a[0], a[1], a[2], a[3], a[4], a[5], a[6],
                              a[7], a[8], a[9], a[10], a[11], a[12], a[13]);
}
"""

_AVX512 = {"avx512f", "avx512bw", "avx512vl"}
#: -march per path, and the host features it needs to run
BUILDS = {"x86-64": set(), "x86-64-v4": _AVX512}


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    """The kernels with the harness, one library per build the host can run."""
    libs = host_libraries(tmp_path_factory, F32_KERNELS_C + _HARNESS, BUILDS)
    vp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    for lib in libs.values():
        lib.pp_pad.argtypes = [vp, vp, i64, vp, vp, vp, i32]
        lib.pp_copy.argtypes = [vp, vp, vp, vp, vp]
    return libs


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.cc
@pytest.mark.parametrize(
    ("h", "c", "k", "pads", "s", "d"),
    [
        (7, 16, 3, (1, 1, 1, 1), 1, 1),  # one register tile per row piece
        (9, 16, 3, (1, 1, 1, 1), 2, 1),  # a tile of 5x5 positions: tiles across rows
        (12, 24, 3, (0, 0, 1, 1), 2, 1),  # only the bottom and right in the padding
        (10, 8, 5, (2, 1, 2, 3), 1, 1),  # 5x5, every side its own
        (11, 16, 3, (2, 2, 2, 2), 1, 2),  # dilated: taps two apart
        (6, 400, 3, (1, 1, 1, 1), 1, 1),  # a long reduction: chunks of the channels
        (2, 16, 3, (1, 1, 1, 1), 1, 1),  # four positions: a call of one register tile
    ],
)
def test_kernel_reads_only_the_unpadded_input(
    libs: dict[str, ctypes.CDLL],
    h: int,
    c: int,
    k: int,
    pads: tuple[int, int, int, int],
    s: int,
    d: int,
) -> None:
    """Every build, the whole image as one call, the input against the page before it or
    after it: bit for bit ember_f32_conv_tile2 on a padded copy."""
    top, left, bottom, right = pads
    wd = h + 1
    rng = np.random.default_rng(h * c)
    x = rng.standard_normal((h, wd, c)).astype(np.float32)
    xp = np.pad(x, ((top, bottom), (left, right), (0, 0)))
    span = d * (k - 1) + 1
    oh, ow = (xp.shape[0] - span) // s + 1, (xp.shape[1] - span) // s + 1
    wb = k * k * c * 16
    w = rng.standard_normal(2 * wb).astype(np.float32)
    acc0 = rng.standard_normal((oh * ow, 32)).astype(np.float32)

    def loops(width: int) -> list[int]:
        return [k, d * width * c, k * c * 16, k, d * c, c * 16, c, 1, 16, wb]

    copy = np.ascontiguousarray(xp)
    head = [oh * ow, ow, s * c]
    args = np.array([*head, s * xp.shape[1] * c, *loops(xp.shape[1])], np.int32)
    conds = [
        (-top, s, 0, d, 0),  # row * s - top + d * i0 >= 0
        (h - 1 + top, -s, 0, -d, 0),  # row * s - top + d * i0 < h
        (-left, 0, s, 0, d),
        (wd - 1 + left, 0, -s, 0, -d),
    ]
    a = np.array([*head, s * wd * c, *loops(wd), 4, *[t for q in conds for t in q]], np.int32)
    offs = np.array([-(top * wd + left) * c, 0], np.int64)
    for march, lib in libs.items():
        want = acc0.copy()
        assert (
            lib.pp_copy(_ptr(want), _ptr(copy), _ptr(w), _ptr(np.zeros(2, np.int64)), _ptr(args))
            == 0
        )
        for at_end in (0, 1):
            got = acc0.copy()
            rc = lib.pp_pad(_ptr(got), _ptr(x), x.nbytes, _ptr(w), _ptr(offs), _ptr(a), at_end)
            assert rc == 0, (march, at_end)
            np.testing.assert_array_equal(got, want, err_msg=f"{march} at_end={at_end}")
        assert not np.array_equal(want, acc0)
