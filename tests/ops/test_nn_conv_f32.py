"""The AVX2 float32 convolution micro-kernel: where the rewrite calls it, that the calls
compute what the loop nests did (interpreted, compiled with fused epilogues against
onnxruntime), and that its C source runs with and without AVX2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library, call_tile
from packed_conv_lowering import lower_conv_bias_relu, v

from ember import tir
from ember.codegen.c.f32_kernels import F32_KERNELS_C
from ember.ir import Attrs, Function, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_pack
from ember.ops.nn_conv_f32 import (
    kernel_cols,
    kernel_tile,
    loop_tiles_win,
    use_tile_kernel,
)
from ember.ops.nn_conv_layouts import channel_pitch, channels_outer
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS, conv_tile_reference
from ember.target import Target

AVX2 = "c -mcpu=haswell"


@pytest.fixture(autouse=True)
def every_layer_takes_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel on every layer of an AVX2 C target, however short its reduction (the
    per-layer choice, nn_conv_f32.tile_kernel_pays, is tested in test_nn_conv_lanes.py)."""
    monkeypatch.setattr(nn_conv_pack, "tile_kernel_pays", lambda *args: True)


_lower = lower_conv_bias_relu


@pytest.mark.parametrize(
    ("target", "called"),
    [
        (AVX2, True),
        ("c -mcpu=x86-64-v3", True),
        ("llvm", False),
        # AVX-512: a 3-channel layer keeps the loop-IR tiles (test_nn_conv_f32_avx512.py)
        ("c -mcpu=skylake-avx512", False),
    ],
)
def test_kernel_only_on_avx2_c_targets(target, called):
    text, *_ = _lower((1, 3, 17, 17), (1, 3, 3, 3, 16), target, padding=(1, 1, 1, 1))
    assert ("ember_f32_conv_tile" in text) is called
    # the padded input: channels last for the kernel, NCHW (as before) elsewhere
    assert ("Buffer((1, 19, 19, 3)" in text) is called
    assert ("Buffer((1, 3, 19, 19)" in text) is not called
    assert use_tile_kernel(Target.create(AVX2), "float64") is False


def test_llvm_small_layers_with_long_reductions_call_the_kernel():
    # yolo's 10x10 layers: LLVM's own tiles lost to the kernel (LLVM_KERNEL_REDUCTION); an
    # AVX2 CPU named (the llvm kinds on AVX-512 CPUs call no ember_f32_conv_tile: the
    # runtime's copy is AVX2, nn_conv_f32.use_block_kernel)
    llvm = Target.create("llvm -mcpu=haswell")
    assert loop_tiles_win(llvm, 16, 100, 12800)  # reduction unknown: LLVM's tiles
    assert loop_tiles_win(llvm, 16, 256, 4096, reduction=576)  # resnet8's 3x3 64 at 8x8
    assert not loop_tiles_win(llvm, 16, 100, 12800, reduction=1152)
    assert not loop_tiles_win(Target.create("c -mcpu=haswell"), 16, 100, 12800)
    haswell = "llvm -mcpu=haswell"
    text, *_ = _lower((1, 128, 10, 10), (1, 128, 3, 3, 16), haswell, padding=(1, 1, 1, 1))
    assert "ember_f32_conv_tile" in text
    text, *_ = _lower((1, 32, 10, 10), (1, 32, 3, 3, 16), haswell, padding=(1, 1, 1, 1))
    assert "ember_f32_conv_tile" not in text


def test_tile_widths():
    assert [kernel_cols(w) for w in (3, 7, 8, 14, 56)] == [3, 4, 4, 5, 6]
    assert kernel_tile([7, 7]) == (7, 7)  # small images: one tile, split by the kernel
    assert kernel_tile([56, 56]) == (2, 56)  # bands of whole rows, split by the kernel
    assert kernel_tile([28, 28]) == (7, 28) and kernel_tile([32, 32]) == (4, 32)
    assert kernel_tile([112, 112]) == (1, 6)  # two rows are too many: row pieces
    assert kernel_tile([59, 59]) == (1, 6)  # no band divides the height
    assert kernel_tile([196]) == (1, 196) and kernel_tile([784]) == (1, 6)


def test_whole_images_reduce_channels_outer_with_a_padded_pitch():
    text, *_ = _lower((1, 256, 7, 7), (1, 256, 3, 3, 16), AVX2, padding=(1, 1, 1, 1))
    assert "Buffer((1, 9, 9, 272)" in text  # 256 channels + one cache line
    # e0 = channels (x stride 1, weight stride 9 taps x 16), then rows, then columns
    assert "256, 1, 144, 3, 2448, 48, 3, 272, 16)" in text
    assert channels_outer((7, 7)) and channels_outer((8, 8)) and channels_outer((4, 16))
    assert not channels_outer((14, 14)) and not channels_outer((4, 25))  # inputs pass L1
    assert not channels_outer((28, 28)) and not channels_outer((2, 3))  # bands; one tile
    assert [channel_pitch(c) for c in (32, 48, 128, 144, 512)] == [32, 48, 144, 144, 528]


def _lower_residual(xshape, wshape, act: str = "relu", **attrs) -> str:
    """act(conv + r) with a residual r of the output's shape, lowered for AVX2."""
    x, wp = v("x", xshape), v("wp", wshape)
    conv = call("nn.conv_packed", x, wp, **attrs)
    r = v("r", (xshape[0], wshape[0] * wshape[-1], *xshape[2:]))  # stride 1, same padding
    func = Function((x, wp, r), call(act, call("add", conv, r)), Attrs({"Primitive": 1}))
    return str(lower_group(func, "kernel", AVX2))


def test_wide_kernel_tiles_write_a_residual_epilogue_positions_innermost():
    # a whole image (1x1 over 49 flattened positions; 3x3 at 7 rows x 7 columns) with a
    # residual: per channel, the positions vectorised (NCHW output and residual contiguous)
    assert "vectorized(49)" in _lower_residual((1, 8, 7, 7), (1, 8, 1, 1, 16))
    assert "vectorized(7)" in _lower_residual((1, 8, 7, 7), (1, 8, 3, 3, 16), padding=(1,) * 4)
    # no residual, or a call in the epilogue (SiLU): channels innermost
    flat, *_ = _lower((1, 8, 7, 7), (1, 8, 1, 1, 16), AVX2)
    assert "vectorized(49)" not in flat and "ember_f32_conv_tile" in flat
    silu = _lower_residual((1, 8, 7, 7), (1, 8, 1, 1, 16), act="sigmoid")
    assert "vectorized(49)" not in silu and "ember_f32_conv_tile" in silu


def test_strided_1x1_reads_a_subsampled_positions_major_copy():
    text, *_ = _lower((1, 8, 9, 7), (16, 8, 1, 1, 16), AVX2, strides=(2, 2))
    assert "x_nhwc = allocate(Buffer((1, 20, 8)" in text  # 5 x 4 positions, channels last
    assert "ember_f32_conv_tile" in text
    # fewer than 256 outputs: the kernel reads the NCHW input in place (rows of 4 columns)
    text, *_ = _lower((1, 8, 9, 7), (1, 8, 1, 1, 16), AVX2, strides=(2, 2))
    assert "x_nhwc" not in text and "ember_f32_conv_tile" in text


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs"),
    [
        ((1, 3, 17, 17), (1, 3, 3, 3, 16), {"padding": (1, 1, 1, 1)}),  # row tiles, tail
        ((1, 2, 9, 9), (2, 2, 3, 3, 16), {"strides": (2, 2)}),  # whole image, strided
        ((1, 2, 16, 16), (1, 2, 3, 3, 16), {"dilation": (2, 2)}),  # 144 positions: split
        ((1, 4, 6, 6), (2, 2, 3, 3, 16), {"groups": 2, "padding": (1, 1, 1, 1)}),
        ((1, 5, 5, 3), (1, 5, 1, 1, 16), {}),  # 1x1, flattened positions
        ((1, 3, 9, 7), (16, 3, 1, 1, 16), {"strides": (2, 2)}),  # 1x1 stride 2, 256 outputs
    ],
)
def test_kernel_calls_match_reference(xshape, wshape, attrs):
    text, prim, params, func = _lower(xshape, wshape, AVX2, **attrs)
    assert "ember_f32_conv_tile" in text
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in params]
    refs = evaluate(Function(func.params, func.body), xs)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-4, atol=1e-4)


def _model(cin: int, cout: int, size: int, kernel: int, stride: int, residual: bool):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel)
    b = rng.standard_normal(cout)
    pad = kernel // 2
    out = (size + 2 * pad - kernel) // stride + 1
    conv = helper.make_node(
        "Conv", ["x", "w", "b"], ["c"], kernel_shape=[kernel] * 2, strides=[stride] * 2,
        pads=[pad] * 4,
    )  # fmt: skip
    nodes = [conv]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])]
    if residual:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, cout, out, out]))
        nodes += [
            helper.make_node("Add", ["c", "r"], ["s"]),
            helper.make_node("Relu", ["s"], ["y"]),
        ]
    else:
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    inits = [
        numpy_helper.from_array(w.astype(np.float32), "w"),
        numpy_helper.from_array(b.astype(np.float32), "b"),
        numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, out, out])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, out


@pytest.mark.cc
@pytest.mark.parametrize(
    ("cin", "cout", "size", "kernel", "stride", "residual"),
    [
        (300, 32, 7, 3, 1, True),  # whole image, input channels in two chunks
        (24, 48, 20, 3, 1, False),  # bands of 5 rows (kernel_tile), taps outer
        (64, 16, 28, 3, 1, True),  # bands of 7 rows x 28 columns, 33 register tiles
        (8, 32, 23, 3, 2, True),  # strided, 12 columns: tail tiles
        (64, 256, 9, 1, 1, False),  # 1x1, positions-major copy of the input
        (3, 16, 30, 7, 2, False),  # ResNet's stem shape, small
        (256, 32, 7, 3, 1, True),  # channels outer, pitch 272, chunks of 28 channels + 4
        (160, 16, 9, 3, 2, False),  # strided, channels outer: 160 is no multiple of 28
        (512, 256, 5, 1, 1, True),  # 1x1, the transposed copy in tiles of 5 x 16
        (64, 256, 11, 1, 2, True),  # 1x1 stride 2: a subsampled positions-major copy
    ],
)
def test_compiled_kernel_matches_onnxruntime(cin, cout, size, kernel, stride, residual):
    from ember.testing import assert_matches_onnxruntime

    model, out = _model(cin, cout, size, kernel, stride, residual)
    rng = np.random.default_rng(5)
    inputs = {"x": rng.standard_normal((1, cin, size, size)).astype(np.float32)}
    if residual:
        inputs["r"] = rng.standard_normal((1, cout, out, out)).astype(np.float32)
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4, target="c")


_WRAPPER = """
int32_t tile(float* acc, const float* x, const float* w, const int32_t* a) {
  return ember_f32_conv_tile(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                             a[9], a[10], a[11], a[12], a[13], a[14]);
}
"""


#: 9 positions in rows of 4 (3 register tiles), 3 x 2 x 300 steps (two channel chunks)
TAPS_OUTER = [5, 16, 9, 4, 2, 50, 3, 400, 160, 2, 1, 48, 300, 3, 16]
#: 10 positions in rows of 5, 61 channels outer (chunks of 28, 28, 5) x 3 rows x 3 columns
CHANNELS_OUTER = [3, 0, 10, 5, 8, 70, 61, 1, 144, 3, 70, 48, 3, 8, 16]


@pytest.mark.cc
@pytest.mark.parametrize("args", [TAPS_OUTER, CHANNELS_OUTER], ids=["taps", "channels"])
@pytest.mark.parametrize("march", ["x86-64", "haswell"])
def test_c_source_with_and_without_avx2(tmp_path: Path, march: str, args: list[int]):
    fn = build_c_library(tmp_path, F32_KERNELS_C + _WRAPPER, march).tile
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4000).astype(np.float32)
    w = rng.standard_normal(10000).astype(np.float32)
    acc = rng.standard_normal(args[2] * 16).astype(np.float32)
    want = [float(a) for a in acc]
    conv_tile_reference(want, [float(t) for t in x], [float(t) for t in w], *args)
    call_tile(fn, acc, x, w, args)
    np.testing.assert_allclose(acc, np.array(want, np.float32), rtol=1e-4, atol=1e-3)
