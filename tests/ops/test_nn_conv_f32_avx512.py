"""ember_f32_conv_tile's AVX-512 register tiles: which layers of an AVX-512 C target call
the kernel (nn_conv_f32.use_block_kernel, avx512_loop_tiles_win), that its C source computes
what the reference does, and that compiled models give bitwise the loop-IR tiles' results."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library, call_tile
from packed_conv_lowering import lower_conv_bias_relu

from ember.codegen.c.f32_kernels import AVX512_MAX_TILE, F32_KERNELS_C
from ember.ops import nn_conv_f32
from ember.ops.nn_conv_f32 import (
    AVX512_MAX_COLS,
    kernel_cols,
    kernel_max_cols,
    kernel_tile,
    use_block_kernel,
    use_tile_kernel,
)
from ember.ops.nn_conv_rewrite import conv_tile_reference
from ember.support.cpuinfo import host_cpu_flags
from ember.target import Target

AVX512 = "c -mcpu=x86-64-v4"

needs_avx512 = pytest.mark.skipif(
    "avx512f" not in host_cpu_flags(), reason="the host has no AVX-512: cannot run its code"
)


def test_avx512_c_targets_call_only_the_16_channel_kernel():
    avx512 = Target.create(AVX512)
    assert use_block_kernel(avx512, "float32") and not use_tile_kernel(avx512, "float32")
    assert not use_block_kernel(avx512, "float64")
    # the llvm kinds too: they call the runtime library's AVX-512 copy
    assert use_block_kernel(Target.create("llvm -mcpu=x86-64-v4"), "float32")
    haswell = Target.create("c -mcpu=haswell")
    assert use_block_kernel(haswell, "float32") and use_tile_kernel(haswell, "float32")
    assert kernel_max_cols(avx512) == AVX512_MAX_COLS == AVX512_MAX_TILE
    assert kernel_max_cols(haswell) == 6


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs", "called"),
    [
        ((1, 32, 17, 17), (1, 32, 3, 3, 16), {"padding": (1, 1, 1, 1)}, True),  # 3x3
        ((1, 3, 30, 30), (1, 3, 7, 7, 16), {"strides": (2, 2)}, False),  # a 3-channel stem
        ((1, 256, 7, 7), (1, 256, 1, 1, 16), {}, False),  # 1x1 on 49 positions: loop IR
        ((1, 256, 14, 14), (1, 256, 1, 1, 16), {}, False),  # 1x1 on 196: loop-IR tiles
        ((1, 256, 27, 27), (1, 256, 1, 1, 16), {"strides": (2, 2)}, True),  # strided 1x1
    ],
)
def test_which_layers_call_the_kernel_on_avx512(xshape, wshape, attrs, called):
    text, *_ = lower_conv_bias_relu(xshape, wshape, AVX512, **attrs)
    assert ("ember_f32_conv_tile" in text) is called


def test_avx512_tile_widths():
    assert [kernel_cols(w, AVX512_MAX_COLS) for w in (7, 10, 14, 56)] == [7, 10, 8, 8]
    assert kernel_tile([7, 7], AVX512_MAX_COLS) == (7, 7)  # whole images as before
    assert kernel_tile([56, 56], AVX512_MAX_COLS) == (2, 56)


_WRAPPER = """
int32_t tile(float* acc, const float* x, const float* w, const int32_t* a) {
  return ember_f32_conv_tile(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                             a[9], a[10], a[11], a[12], a[13], a[14]);
}
"""

#: 9 positions in rows of 4 (one register tile), 3 x 2 x 300 steps
TAPS_OUTER = [5, 16, 9, 4, 2, 50, 3, 400, 160, 2, 1, 48, 300, 3, 16]
#: 30 positions in rows of 10 (3 register tiles of 10), 1100 steps: two chunks (1024 + 76)
WIDE = [3, 0, 30, 10, 7, 80, 1, 0, 0, 1, 0, 0, 1100, 1, 16]
#: 25 positions in rows of 5 (3 register tiles: 9, 8, 8), 61 channels outer x 3 x 3
CHANNELS_OUTER = [3, 0, 25, 5, 8, 70, 61, 1, 144, 3, 70, 48, 3, 8, 16]


def _run_tile(fn: ctypes.CDLL, args: list[int]) -> tuple[np.ndarray, list[float]]:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4000).astype(np.float32)
    w = rng.standard_normal(20000).astype(np.float32)
    acc = rng.standard_normal(args[2] * 16).astype(np.float32)
    want = [float(a) for a in acc]
    conv_tile_reference(want, [float(t) for t in x], [float(t) for t in w], *args)
    call_tile(fn.tile, acc, x, w, args)
    return acc, want


@pytest.mark.cc
@needs_avx512
@pytest.mark.parametrize(
    "args", [TAPS_OUTER, WIDE, CHANNELS_OUTER], ids=["taps", "wide", "channels"]
)
def test_avx512_c_source_matches_reference_and_portable_c(tmp_path: Path, args: list[int]):
    acc, want = _run_tile(build_c_library(tmp_path, F32_KERNELS_C + _WRAPPER, "x86-64-v4"), args)
    np.testing.assert_allclose(acc, np.array(want, np.float32), rtol=1e-4, atol=1e-3)
    # the same fused multiply-adds in the same order as the portable C loops: bitwise
    portable, _ = _run_tile(build_c_library(tmp_path, F32_KERNELS_C + _WRAPPER, "x86-64"), args)
    np.testing.assert_array_equal(acc, portable)


def _conv_model(cin: int, cout: int, size: int, kernel: int, stride: int):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel)
    b = rng.standard_normal(cout)
    pad = kernel // 2
    out = (size + 2 * pad - kernel) // stride + 1
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], kernel_shape=[kernel] * 2, strides=[stride] * 2,
            pads=[pad] * 4,
        ),
        helper.make_node("Relu", ["c"], ["y"]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, out, out])],
        initializer=[
            numpy_helper.from_array(w.astype(np.float32), "w"),
            numpy_helper.from_array(b.astype(np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.cc
@needs_avx512
@pytest.mark.parametrize(
    ("cin", "cout", "size", "kernel", "stride"),
    [
        (64, 32, 14, 3, 1),  # whole image: 196 positions in 17 register tiles
        (48, 32, 28, 3, 1),  # bands of 7 rows
        (256, 32, 7, 1, 1),  # 1x1 on 49 positions (with AVX512_POINTWISE_POSITIONS 64)
        (300, 16, 9, 3, 1),  # channels outer, chunks of the input channels
        (128, 32, 15, 1, 2),  # strided 1x1
    ],
)
def test_avx512_kernel_is_bitwise_the_loop_ir_tiles(monkeypatch, cin, cout, size, kernel, stride):
    from ember.testing import compile_onnx, run_artifacts, run_onnxruntime

    model = _conv_model(cin, cout, size, kernel, stride)
    x = np.random.default_rng(5).standard_normal((1, cin, size, size)).astype(np.float32)
    outs = []
    monkeypatch.setattr(nn_conv_f32, "AVX512_POINTWISE_POSITIONS", 64)
    for on in (True, False):
        monkeypatch.setattr(nn_conv_f32, "AVX512_KERNEL", on)
        artifacts = compile_onnx(model, shape={"x": x.shape}, target=AVX512)
        outs.append(run_artifacts(artifacts, {"x": x})[0])
    ref = run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(outs[0], ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])
