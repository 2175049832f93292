"""A small 3x3 depthwise tile's epilogue folded into its kernel call (ember.ops
.nn_depthwise_epilogue, ``ember_f32_dw3x3_ep``): which epilogues and tiles fold, the names
agreeing with the C's, results bitwise equal to the loop IR's at 1 and 2 threads, and the
kernel's AVX-512 and plain C bodies bit for bit a numpy reference (NaN, signed zeros)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library

from ember.codegen.c import f32_depthwise
from ember.driver import build
from ember.ir import Function, IRModule, TensorType, Var, call, const
from ember.ops import nn_depthwise_epilogue as epi
from ember.ops.nn_depthwise_kernel import DEPTHWISE_KERNEL_CONFIG
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
needs_avx512 = pytest.mark.skipif(
    "x86-avx512" not in Target.create("c").keys, reason="the depthwise kernel needs AVX-512"
)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_names_agree_with_the_c() -> None:
    assert epi.DEPTHWISE_KERNEL_NAME == f32_depthwise.DEPTHWISE_KERNEL_NAME
    assert epi.DEPTHWISE_EPILOGUE_KERNEL_NAME == f32_depthwise.DEPTHWISE_EPILOGUE_KERNEL_NAME
    assert epi.DW_SMALL == f32_depthwise.DW_SMALL
    assert f"#define EMBER_DW_SMALL {epi.DW_SMALL}\n" in f32_depthwise.F32_DEPTHWISE_C


def _module(h: int, w: int, c: int, stride: int, epilogue: str) -> tuple[IRModule, np.ndarray]:
    x = Var("x", TensorType((1, h, w, c), F32))
    wt = const(_rand(c, 1, 3, 3, seed=1))
    attrs = {"padding": [1, 1, 1, 1], "strides": [stride] * 2}
    y = call("nn.conv", x, wt, data_layout="NHWC", groups=c, **attrs)  # type: ignore[arg-type]
    if epilogue != "none":
        y = call("add", y, const(_rand(1, 1, c, seed=2)))
    if epilogue == "relu":
        y = call("relu", y)
    if epilogue in ("relu6", "clip"):
        y = call("clip", y, a_min=0.0, a_max=6.0 if epilogue == "relu6" else 0.5)
    if epilogue == "clip_low":
        y = call("clip", y, a_min=-0.5, a_max=6.0)
    if epilogue == "sigmoid":
        y = call("sigmoid", y)
    if epilogue == "residual":
        y = call("relu", call("add", y, x))
    return IRModule({"main": Function((x,), y)}), _rand(1, h, w, c, seed=3)


#: (h, w, channels, stride, epilogue, folded): bias, ReLU and ReLU-with-a-ceiling epilogues
#: of tiles up to DW_SMALL positions fold; other functions, no bias and wider tiles do not.
CASES = [
    (25, 5, 64, 1, "relu", True),  # ds_cnn_kws
    (7, 7, 32, 1, "relu6", True),  # mobilenet_v2's 7x7 layers
    (13, 13, 48, 2, "bias", True),  # stride 2: 7 columns
    (6, 8, 16, 1, "clip", True),  # a ceiling of 0.5, 8 columns
    (9, 1, 16, 1, "relu", True),  # 1-wide: one position, no position loop
    (1, 1, 16, 1, "relu6", True),
    (6, 9, 16, 1, "relu", False),  # 9 columns: the groups, the epilogue loop IR
    (6, 5, 16, 1, "none", False),  # no bias
    (6, 5, 16, 1, "clip_low", False),  # a floor below 0
    (6, 5, 16, 1, "sigmoid", False),
    (6, 5, 16, 1, "residual", False),  # bias, the input added, ReLU
]


@needs_avx512
@pytest.mark.cc
@pytest.mark.parametrize(("h", "w", "c", "stride", "epilogue", "folded"), CASES)
def test_folded_epilogues_bitwise_equal_to_loop_ir(  # type: ignore[no-untyped-def]
    h, w, c, stride, epilogue, folded
) -> None:
    mod, x = _module(h, w, c, stride, epilogue)
    new = build(mod, "c")
    src = b"".join(a.content for a in new if a.file_name.endswith(".c"))
    assert (b"(void)ember_f32_dw3x3_ep(" in src) == folded
    assert (b"(void)ember_f32_dw3x3(" in src) != folded
    old = build(mod, "c", pass_context=PassContext(config={DEPTHWISE_KERNEL_CONFIG: False}))
    want = run_artifacts(old, {"x": x})[0]
    got = run_artifacts(new, {"x": x})[0]
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))
    with num_threads(2):
        two = run_artifacts(new, {"x": x})[0]
    np.testing.assert_array_equal(two.view(np.int32), got.view(np.int32))


_WRAPPER = r"""
int32_t dwep(float* out, const float* x, const float* w, const float* b, int32_t ncols,
             int32_t oj, const int32_t* a, int32_t kind, float hi) {
  return ember_f32_dw3x3_ep(out, x, w, b, a[0], 0, 0, 0, ncols, oj, a[1], a[2], a[3], a[4],
                            a[5], a[6], a[7], a[8], a[9], a[10], kind, hi);
}
"""


@pytest.mark.cc
@pytest.mark.parametrize("march", ["x86-64-v4", "x86-64-v3"])
@pytest.mark.parametrize("kind", [epi.IDENTITY, epi.RELU, epi.RELU_CEILING])
@pytest.mark.parametrize(("ncols", "stride", "c0"), [(5, 1, -1), (8, 2, 33), (1, 1, -1)])
def test_kernel_against_numpy(
    tmp_path: Path, march: str, kind: int, ncols: int, stride: int, c0: int
) -> None:
    """ember_f32_dw3x3_ep: the taps' fused multiply-adds from +0 in numpy's order, then
    ``+ bias``, ``x < 0 ? 0 : x``, ``x > hi ? hi : x`` (a NaN bias kept), stored with a
    position stride."""
    if march == "x86-64-v4" and "avx512f" not in host_cpu_flags():
        pytest.skip("the host has no AVX-512")
    lib = build_c_library(tmp_path, f32_depthwise.F32_DEPTHWISE_C + _WRAPPER, march)
    rows, width, ch = 4, 40, 16
    x = _rand(rows, width, ch, seed=5)
    x[:, :, 3] = 0.0  # lane 3: every tap +-0, the sum +0, with the bias -0 below
    w = _rand(3, 3, 16, seed=6)
    bias = _rand(16, seed=7)
    bias[0], bias[1], bias[2], bias[3] = np.nan, -50.0, 50.0, -0.0
    r0 = 0  # the tile's input rows 0..2 of which 0 and 1 inside (rn = 2)
    args = [r0 * width * ch + c0 * ch, width * ch, ch, stride * ch, 48, 16, r0, 2, c0]
    args += [stride, width]
    oj = 32  # an output row of positions 32 floats apart
    out = np.full((ncols, oj), 7.0, np.float32)
    fp = ctypes.POINTER(ctypes.c_float)
    arr = (ctypes.c_int32 * len(args))(*args)
    lib.dwep(
        out.ctypes.data_as(fp), x.ctypes.data_as(fp), w.ctypes.data_as(fp),
        bias.ctypes.data_as(fp), ctypes.c_int32(ncols), ctypes.c_int32(oj), arr,
        ctypes.c_int32(kind), ctypes.c_float(2.5),
    )  # fmt: skip
    want = np.zeros((ncols, 16), np.float32)
    for j in range(ncols):
        for r in range(3):
            for k in range(3):
                row, col = r0 + r, c0 + j * stride + k
                if 0 <= row < 2 and 0 <= col < width:
                    prod = x[row, col].astype(np.float64) * w[r, k]
                    want[j] = (want[j].astype(np.float64) + prod).astype(np.float32)
    want = want + bias
    if kind >= epi.RELU:
        want = np.where(want < 0, np.float32(0), want)
    if kind == epi.RELU_CEILING:
        want = np.where(want > 2.5, np.float32(2.5), want)
    np.testing.assert_array_equal(out[:, :16].view(np.int32), want.view(np.int32))
    assert (out[:, 16:] == 7.0).all()  # nothing written between positions
