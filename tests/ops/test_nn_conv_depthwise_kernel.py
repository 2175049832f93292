"""The 3x3 channels-last float32 depthwise kernel (ember.ops.nn_depthwise_kernel,
``ember_f32_dw3x3``): the predicate and tile width, the call in the generated C, compiled
results bitwise equal to the loop-IR tiles it replaces (same fused multiply-adds per output
in the same order; the skipped padding taps add +-0 to accumulators that start at +0), with
every epilogue, stride, padding, channel count and map shape, at 1 and 2 threads; the
kernel's AVX-512 and plain C bodies bit for bit each other; and models against
onnxruntime."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from c_source_lib import build_c_library

from ember.codegen.c.f32_depthwise import F32_DEPTHWISE_C
from ember.driver import build
from ember.ir import Function, IRModule, TensorType, Var, call, const
from ember.ops.nn_depthwise_kernel import (
    DEPTHWISE_KERNEL_CONFIG,
    DW_MAX_COLS,
    depthwise_kernel_target,
    dw_tile_cols,
)
from ember.runtime import num_threads
from ember.support.cpuinfo import host_cpu_flags
from ember.target import Target
from ember.testing.runners import run_artifacts
from ember.transform import PassContext


@pytest.fixture(autouse=True)
def _all_taps(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-row and one-column images exercise the kernels' edges with every tap: keep the
    taps that read only padding (ember.ops.nn_conv_dead_taps would drop them)."""
    from ember.ops import nn_conv_dead_taps

    monkeypatch.setattr(nn_conv_dead_taps, "DEAD_TAPS", False)


F32 = "float32"
AVX512 = "x86-avx512" in Target.create("c").keys
needs_avx512 = pytest.mark.skipif(not AVX512, reason="the depthwise kernel needs AVX-512")


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_predicate_and_tile_width() -> None:
    avx512, avx2 = Target.create("c -mcpu=znver4"), Target.create("c -mcpu=haswell")
    assert depthwise_kernel_target(avx512)
    assert not depthwise_kernel_target(avx2)
    assert not depthwise_kernel_target(Target.create("llvm -mcpu=znver4"))
    assert dw_tile_cols(avx512, 112, (3, 3), 16) == 112  # whole rows
    assert dw_tile_cols(avx512, 5, (3, 3), 16) == 5
    assert dw_tile_cols(avx512, 300, (3, 3), 16) == 150  # the widest divisor up to the cap
    assert DW_MAX_COLS == 256
    assert dw_tile_cols(avx512, 257, (3, 3), 16) == 0  # a prime width over the cap
    assert dw_tile_cols(avx512, 514, (3, 3), 16) == 0  # 2 x 257: tiles of 2 would be slow
    assert dw_tile_cols(avx512, 112, (5, 5), 16) == 0
    assert dw_tile_cols(avx512, 112, (3, 3), 8) == 0
    assert dw_tile_cols(avx2, 112, (3, 3), 16) == 0


def _module(
    h: int,
    w: int,
    c: int,
    stride: int,
    pads: list[int],
    epilogue: str,
    batch: int = 1,
    dilation: int = 1,
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """An NHWC depthwise 3x3 convolution with ``epilogue`` (none, bias, relu, relu6,
    residual: bias, then the input added, then ReLU)."""
    x = Var("x", TensorType((batch, h, w, c), F32))
    wt = const(_rand(c, 1, 3, 3, seed=1))
    attrs = {"padding": pads, "strides": [stride] * 2, "dilation": [dilation] * 2}
    y = call("nn.conv", x, wt, data_layout="NHWC", groups=c, **attrs)  # type: ignore[arg-type]
    if epilogue != "none":
        y = call("add", y, const(_rand(1, 1, c, seed=2)))
    if epilogue == "relu":
        y = call("relu", y)
    if epilogue == "relu6":
        y = call("clip", y, a_min=0.0, a_max=6.0)
    if epilogue == "residual":
        y = call("relu", call("add", y, x))
    return IRModule({"main": Function((x,), y)}), {"x": _rand(batch, h, w, c, seed=3)}


def _build_both(mod: IRModule) -> tuple[Any, Any, int]:
    """The module built with the kernel and without, and the kernel's calls in the C (with
    and without the epilogue)."""
    new = build(mod, "c")
    src = b"".join(a.content for a in new if a.file_name.endswith(".c"))
    old = build(mod, "c", pass_context=PassContext(config={DEPTHWISE_KERNEL_CONFIG: False}))
    old_src = b"".join(a.content for a in old if a.file_name.endswith(".c"))
    assert b"ember_f32_dw3x3(" not in old_src  # the config keeps the loop IR
    return new, old, src.count(b"(void)ember_f32_dw3x3(") + src.count(b"(void)ember_f32_dw3x3_ep(")


#: (h, w, channels, stride, padding, epilogue, kernel called): strides 1 and 2, symmetric,
#: one-sided and no padding, channels of one and several blocks of 16 and of no multiple
#: of 16 (other blocks: the loop IR), odd widths, 1-wide maps and a 1x1 map.
CASES = [
    (25, 5, 64, 1, [1, 1, 1, 1], "relu6", True),  # ds_cnn_kws
    (14, 14, 32, 1, [1, 1, 1, 1], "none", True),
    (13, 13, 48, 2, [1, 1, 1, 1], "bias", True),
    (12, 12, 16, 2, [1, 1, 1, 1], "relu", True),
    (7, 9, 16, 1, [1, 1, 1, 1], "residual", True),
    (6, 11, 32, 1, [0, 0, 0, 0], "bias", True),
    (8, 8, 32, 2, [0, 0, 1, 1], "relu6", True),
    (9, 1, 16, 1, [1, 1, 1, 1], "relu6", True),  # a 1-wide map
    (1, 9, 16, 1, [1, 1, 1, 1], "bias", True),  # a 1-high map
    (1, 1, 16, 1, [1, 1, 1, 1], "relu6", True),  # one position: only the centre tap
    (5, 40, 20, 1, [1, 1, 1, 1], "relu6", False),  # 20 channels: blocks of 4
    (4, 23, 40, 2, [1, 1, 1, 1], "bias", False),  # 40 channels: blocks of 8
    (3, 300, 16, 1, [1, 1, 1, 1], "bias", True),  # tiles of 150 columns
    (4, 8, 16, 1, [1, 1, 1, 1], "relu", True),  # the widest tile held whole (EMBER_DW_SMALL)
    (4, 17, 16, 2, [1, 1, 1, 1], "relu6", True),  # 9 columns: the groups again
]


@needs_avx512
@pytest.mark.cc
@pytest.mark.parametrize(
    ("batch", "dilation", "pads", "called"),
    [(3, 1, [1, 1, 1, 1], True), (1, 2, [2, 2, 2, 2], False), (1, 2, [0, 0, 0, 0], False)],
)
def test_batches_and_dilations(batch, dilation, pads, called) -> None:  # type: ignore[no-untyped-def]
    """Batches call the kernel per image row; dilated taps keep the loop IR (the kernel's
    column test assumes adjacent taps)."""
    mod, inputs = _module(10, 9, 32, 1, pads, "relu6", batch, dilation)
    new, old, calls = _build_both(mod)
    assert (calls > 0) == called
    want = run_artifacts(old, inputs)[0]
    got = run_artifacts(new, inputs)[0]
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


@needs_avx512
@pytest.mark.cc
@pytest.mark.parametrize(("h", "w", "c", "stride", "pads", "epilogue", "called"), CASES)
def test_kernel_bitwise_equal_to_loop_ir(  # type: ignore[no-untyped-def]
    h, w, c, stride, pads, epilogue, called
) -> None:
    mod, inputs = _module(h, w, c, stride, pads, epilogue)
    new, old, calls = _build_both(mod)
    assert (calls > 0) == called
    want = run_artifacts(old, inputs)[0]
    got = run_artifacts(new, inputs)[0]
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    with num_threads(2):
        two = run_artifacts(new, inputs)[0]
    np.testing.assert_array_equal(two.view(np.int32), got.view(np.int32))


@needs_avx512
@pytest.mark.cc
def test_the_tile_zeroing_is_folded_into_the_call() -> None:
    """The loop IR's zeroing of a tile just before its call becomes the call's ``zero``
    flag (no zeroing loop left); the epilogue of a tile wider than DW_SMALL stays after
    the call (narrower ones: test_nn_depthwise_epilogue.py)."""
    mod, _ = _module(14, 14, 32, 1, [1, 1, 1, 1], "relu6")
    src = b"".join(a.content for a in build(mod, "c") if a.file_name.endswith(".c")).decode()
    fn = src[src.index("static int32_t ember_fused") :]
    call = fn[fn.index("(void)ember_f32_dw3x3(") :]
    assert call[: call.index(";")].endswith(", 1)")
    assert "= 0.0f;" not in fn[: fn.index("(void)ember_f32_dw3x3(")]


_WRAPPER = r"""
int32_t dw(float* acc, const float* x, const float* w, int64_t xoff, int64_t woff,
           int32_t ncols, const int32_t* a) {
  return ember_f32_dw3x3(acc, x, w, xoff, woff, ncols, a[0], a[1], a[2], a[3], a[4], a[5],
                         a[6], a[7], a[8], a[9], a[10]);
}
"""


def test_small_tiles_are_held_whole() -> None:
    """Tiles of at most EMBER_DW_SMALL positions (narrow rows: ds_cnn_kws's 5, 7x7 maps)
    take the path that holds them in registers, wider ones the groups of 8, 4 and 1."""
    assert "#define EMBER_DW_SMALL 8\n" in F32_DEPTHWISE_C
    row = F32_DEPTHWISE_C[F32_DEPTHWISE_C.index("void ember_dw_row(") :]
    assert row.index("if (ncols <= EMBER_DW_SMALL)") < row.index("ember_dw_g8(")


@pytest.mark.cc
@pytest.mark.parametrize("march", ["x86-64-v4", "x86-64-v3"])
@pytest.mark.parametrize("zero", [0, 1])
@pytest.mark.parametrize(
    ("rows", "ncols", "stride", "c0"),
    [
        (9, 20, 1, -1),
        (1, 20, 1, -1),
        (2, 7, 2, -1),
        (9, 1, 1, -1),
        (9, 13, 1, 0),
        (9, 30, 2, 3),
        (9, 8, 1, -1),  # tiles of up to EMBER_DW_SMALL positions: whole, in registers
        (9, 8, 2, 33),  # ... past the right edge (columns 33..48 of 40)
        (9, 5, 1, -3),  # ... starting left of the left padding
        (9, 9, 1, -1),  # one more: the groups
    ],
)
def test_kernel_avx512_and_plain_c_agree_with_numpy(
    tmp_path: Path, march: str, zero: int, rows: int, ncols: int, stride: int, c0: int
) -> None:
    """ember_f32_dw3x3 compiled with AVX-512 (when the host runs it) and without: bit for
    bit a float32 fused multiply-add loop in numpy's order of the taps, padding skipped,
    onto the accumulators or (``zero``) from +0."""
    if march == "x86-64-v4" and "avx512f" not in host_cpu_flags():
        pytest.skip("the host has no AVX-512")
    lib = build_c_library(tmp_path, F32_DEPTHWISE_C + _WRAPPER, march)
    ch, width = 48, 40  # an image of `rows` x `width` x 48 channels, block 1 (16..31)
    x = _rand(rows, width, ch, seed=5)
    w = _rand(3, 3, 16, seed=6)
    acc = _rand(ncols, 16, seed=7)
    r0 = -1 if rows > 1 else 0  # the tile's first input row (-1: a padded top row)
    xoff = r0 * width * ch + c0 * ch + 16
    args = [width * ch, ch, stride * ch, 48, 16, r0, rows, c0, stride, width, zero]
    got = acc.copy()
    xbuf = np.ascontiguousarray(x.reshape(-1))
    arr = (ctypes.c_int32 * len(args))(*args)
    fp = ctypes.POINTER(ctypes.c_float)
    lib.dw(
        got.ctypes.data_as(fp), xbuf.ctypes.data_as(fp), w.ctypes.data_as(fp),
        ctypes.c_int64(xoff), ctypes.c_int64(0), ctypes.c_int32(ncols), arr,
    )  # fmt: skip
    want = np.zeros_like(acc, np.float64) if zero else acc.astype(np.float64)
    for j in range(ncols):
        for r in range(3):
            for k in range(3):
                row, col = r0 + r, c0 + j * stride + k
                if 0 <= row < rows and 0 <= col < width:
                    prod = x[row, col, 16:32].astype(np.float64) * w[r, k]
                    want[j] = (want[j] + prod).astype(np.float32)  # one rounding: an FMA
    np.testing.assert_array_equal(got, want.astype(np.float32))


@needs_avx512
@pytest.mark.cc
@pytest.mark.parametrize("name", ["ds_cnn_kws", "mobilenet_v2_64_w0.35"])
def test_models_with_the_kernel_match_onnxruntime(name: str) -> None:
    """Models whose depthwise layers call the kernel, against onnxruntime (float32
    rounding of reordered sums elsewhere in the model: the zoo's tolerance)."""
    from ember.examples.models import make_model, register_builtin_models
    from ember.testing import assert_matches_onnxruntime

    register_builtin_models()
    case = make_model(name)
    assert_matches_onnxruntime(case.model, case.inputs, rtol=1e-4, atol=1e-4)
