"""The narrow convolution kernels on AVX-512 C targets (ember.ops.nn_conv_narrow.narrow_avx512,
the AVX-512 path of ember_f32_conv_tile24 in ember/codegen/c/f32_narrow.py): where they are
called, their tile widths, that the calls compute what the loop nests did, and that the
AVX-512 code gives bitwise the AVX2 code's sums."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library, call_tile
from packed_conv_lowering import lower_conv_bias_relu

from ember import tir
from ember.codegen.c.f32_narrow import F32_NARROW_C, NARROW_KERNEL_NAMES
from ember.ir import Function, evaluate
from ember.ops.nn_conv_narrow import narrow_avx512, narrow_kernel_cols, narrow_kernel_tile
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.target import Target

AVX512 = "c -mcpu=znver4"


def _host_avx512() -> bool:
    try:
        return " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


needs_avx512 = pytest.mark.skipif(not _host_avx512(), reason="the host has no AVX-512")


def test_gate():
    znver4, haswell = Target.create(AVX512), Target.create("c -mcpu=haswell")
    assert narrow_avx512(znver4, "float32", 8) and narrow_avx512(znver4, "float32", 24)
    assert not narrow_avx512(znver4, "float32", 16)
    assert not narrow_avx512(znver4, "float16", 24)
    assert not narrow_avx512(haswell, "float32", 24)
    assert narrow_avx512(Target.create("llvm -mcpu=znver4"), "float32", 24)
    assert not narrow_avx512(None, "float32", 24)


def test_tile_widths():
    znver4, haswell = Target.create(AVX512), Target.create("c -mcpu=haswell")
    # 24 channels: up to 12 positions (18 zmm accumulators), even counts (whole vectors)
    # preferred; AVX2 keeps 4
    widths = (2, 7, 12, 20, 40, 80)
    assert [narrow_kernel_cols(w, 24, znver4) for w in widths] == [2, 7, 12, 12, 10, 12]
    assert [narrow_kernel_cols(w, 24, haswell) for w in (2, 7, 40, 80)] == [2, 4, 4, 4]
    # 8 channels: the AVX2 kernel's widths on both
    assert [narrow_kernel_cols(w, 8, znver4) for w in (5, 16, 80)] == [5, 8, 8]
    assert narrow_kernel_tile([80, 80], 24, znver4) == (1, 12)
    # the llvm kinds call the runtime's AVX-512 copy: its widths; on AVX2 the AVX2 ones
    assert narrow_kernel_cols(80, 24, Target.create("llvm -mcpu=znver4")) == 12
    assert narrow_kernel_cols(80, 24, Target.create("llvm -mcpu=haswell")) == 4


@pytest.mark.usefixtures("every_layer_takes_the_kernel")
@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs", "kernel"),
    [
        ((1, 3, 7, 30), (3, 3, 3, 3, 8), {"padding": (1, 1, 1, 1)}, "ember_f32_conv_tile24"),
        ((1, 2, 9, 9), (3, 2, 3, 3, 8), {"strides": (2, 2), "channels": 20}, "tile24"),
        ((1, 3, 6, 13), (1, 3, 3, 3, 8), {"padding": (1, 1, 1, 1)}, 'tile8"'),
        ((1, 5, 5, 3), (3, 5, 1, 1, 8), {}, "ember_f32_conv_tile24"),  # 1x1, flattened
    ],
)
def test_kernel_calls_match_reference(xshape, wshape, attrs, kernel):
    text, prim, params, func = lower_conv_bias_relu(
        xshape, wshape, AVX512, pass_channels=True, **attrs
    )
    assert kernel in text
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in params]
    refs = evaluate(Function(func.params, func.body), xs)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-4, atol=1e-4)


@pytest.mark.usefixtures("every_layer_takes_the_kernel")
def test_llvm_calls_the_narrow_kernel_and_blocks_of_16_do_not():
    text, *_ = lower_conv_bias_relu((1, 3, 7, 30), (3, 3, 3, 3, 8), "llvm -mcpu=znver4")
    assert "ember_f32_conv_tile24" in text
    text, *_ = lower_conv_bias_relu((1, 3, 7, 30), (2, 3, 3, 3, 16), AVX512)
    assert not any(name in text for name in NARROW_KERNEL_NAMES)


_WRAPPER = """
int32_t tile(float* acc, const float* x, const float* w, const int32_t* a) {
  return ember_f32_conv_tile24(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                               a[8], a[9], a[10], a[11], a[12], a[13], a[14]);
}
"""


def _run_tile(fn, ncols: int, acc0: np.ndarray, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    # positions in rows of 5 (several register tiles when wide), 3 x 2 x 300 steps
    args = [5, 8, ncols, 5, 2, 60, 3, 400, 2 * 300 * 24, 2, 1, 300 * 24, 300, 3, 24]
    acc = acc0.copy()
    call_tile(fn, acc, x, w, args)
    return acc


@needs_avx512
@pytest.mark.cc
@pytest.mark.parametrize("ncols", [1, 2, 5, 12, 13, 25])
def test_avx512_source_bitwise_equal_to_avx2(tmp_path: Path, ncols: int):
    """Every accumulator gets the same fused multiply-adds in the same order on both paths."""
    wide = build_c_library(tmp_path, F32_NARROW_C + _WRAPPER, "x86-64-v4").tile
    avx2 = build_c_library(tmp_path, F32_NARROW_C + _WRAPPER, "haswell").tile
    rng = np.random.default_rng(2)
    x = rng.standard_normal(6000).astype(np.float32)
    w = rng.standard_normal(3 * 2 * 300 * 24 + 8).astype(np.float32)
    acc0 = rng.standard_normal(ncols * 24).astype(np.float32)
    got = _run_tile(wide, ncols, acc0, x, w)
    np.testing.assert_array_equal(got, _run_tile(avx2, ncols, acc0, x, w))
    assert not np.array_equal(got, acc0)


def _model(cin: int, cout: int, size: int, stride: int):
    from ember.testing.onnx_models import build_model, node

    rng = np.random.default_rng(3)
    w = rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)
    nodes = [node("Conv", ["x", "w", "b"], "c", pads=[1] * 4, strides=[stride] * 2)]
    nodes.append(node("Relu", ["c"], "y"))
    params = {"w": w.astype(np.float32), "b": rng.standard_normal(cout).astype(np.float32)}
    return build_model(nodes, {"x": ("float32", (1, cin, size, size))}, ["y"], params)


@needs_avx512
@pytest.mark.cc
@pytest.mark.parametrize(
    ("cin", "cout", "size", "stride"),
    [
        (96, 24, 20, 1),  # dbnet's 3x3 96->24 (smallest map): 20 = 12 + 8 positions
        (40, 24, 23, 2),  # strided, odd tiles
        (64, 48, 13, 1),  # two blocks of 24
        (72, 8, 11, 1),  # 8 channels: the AVX2 kernel of 8
    ],
)
def test_compiled_matches_onnxruntime(cin: int, cout: int, size: int, stride: int):
    from ember.testing import assert_matches_onnxruntime

    rng = np.random.default_rng(5)
    inputs = {"x": rng.standard_normal((1, cin, size, size)).astype(np.float32)}
    model = _model(cin, cout, size, stride)
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4, target="c -mcpu=skylake-avx512")
