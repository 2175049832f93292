"""Per-layer choices of packed float32 convolutions on AVX2 C targets: the micro-kernel's
channels-last tiles only where the reduction is long enough (layout and schedule switch
together), and position-lane tiles (NCHW, 16 output positions as the lanes) where the rows
fit them (interpreted against the graph reference, compiled against onnxruntime)."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv_f32 import tile_kernel_pays
from ember.ops.nn_conv_lanes import lanes_tile_reference, position_lanes
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.testing.lowering import primitive

AVX2 = "c -mcpu=haswell"


def v(name: str, shape: tuple[int, ...]) -> Var:
    return Var(name, TensorType(shape, "float32"))


def _lower_and_check(xshape, wshape, target: str = AVX2, **attrs) -> str:
    """Lower conv_packed + bias + relu for ``target``, interpret it (the kernel calls by
    their Python reference) against the graph-IR reference; return the loop IR's text."""
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (attrs.get("channels", wshape[0] * wshape[-1]), 1, 1))
    body = call("relu", call("add", call("nn.conv_packed", x, wp, **attrs), b))
    prim = lower_group(primitive((x, wp, b), body), "kernel", target)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in (x, wp, b)]
    (ref,) = evaluate(Function((x, wp, b), body), xs)
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [*xs, out], externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    return str(prim)


def test_kernel_pays_on_long_reductions_only():
    assert tile_kernel_pays(32, 9, 256, 16)  # 3x3, 288 steps
    assert tile_kernel_pays(16, 9, 256, 16)  # resnet8's stride-2 3x3 16->32 (144 steps)
    assert not tile_kernel_pays(8, 9, 1024, 16)  # 72 steps
    assert not tile_kernel_pays(64, 1, 125, 16)  # ds_cnn_kws's 1x1 convs
    assert tile_kernel_pays(72, 1, 56 * 56, 8)  # a large image: half the reduction
    assert not tile_kernel_pays(128, 1, 28 * 28, 16)


@pytest.mark.parametrize(
    ("cin", "kernel_called", "buffer"),
    [
        (4, False, "Buffer((1, 4, 9, 9)"),  # short reduction: loop-IR tiles, NCHW padded copy
        (8, True, "Buffer((1, 8, 9, 9)"),  # the same tiles call the kernel from 8 channels on
        (32, True, "Buffer((1, 9, 9, 32)"),  # the kernel's channels-last padded copy
    ],
)
def test_layout_and_schedule_switch_together(cin, kernel_called, buffer):
    # 7 columns: no position lanes; the layer's reduction length picks the rest
    text = _lower_and_check((1, cin, 7, 7), (1, cin, 3, 3, 16), padding=(1, 1, 1, 1))
    assert ("ember_f32_conv_tile" in text) is kernel_called
    assert buffer in text


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs"),
    [
        ((1, 3, 6, 16), (1, 3, 3, 3, 16), {"padding": (1, 1, 1, 1)}),  # rows of 16
        ((1, 5, 4, 8), (2, 5, 1, 1, 16), {}),  # 1x1 over 32 flattened positions
        ((1, 4, 5, 32), (2, 2, 3, 3, 16), {"groups": 2, "padding": (1, 1, 1, 1)}),
        ((1, 2, 9, 20), (1, 2, 3, 5, 16), {"strides": (2, 1)}),  # stride 2 down, 1 along
        ((1, 3, 4, 16), (1, 3, 3, 3, 16), {"padding": (1, 1, 1, 1), "channels": 13}),
    ],
)
def test_position_lanes_call_the_kernel_and_match_reference(xshape, wshape, attrs):
    text = _lower_and_check(xshape, wshape, **attrs)
    assert "ember_f32_lanes_tile" in text and "ember_f32_conv_tile" not in text
    assert f"Buffer((1, {xshape[1]}," in text.split("def kernel")[1]  # the input stays NCHW


def test_position_lanes_need_unit_row_stride_rows_of_16_and_small_or_aliasing_images():
    assert position_lanes(16, (1, 1), (32, 32), flat=False)
    assert position_lanes(16, (1, 1), (160, 160), flat=True)  # 25 x 1024 positions
    assert not position_lanes(16, (1, 1), (112, 112), flat=True)
    assert position_lanes(16, (1, 1), (4, 4), flat=True)  # 16 positions
    assert not position_lanes(16, (1, 1), (4, 4), flat=False)  # rows of 4
    assert not position_lanes(16, (2, 2), (16, 16), flat=False)
    assert not position_lanes(8, (1, 1), (32, 32), flat=False)  # blocks of 8


def test_position_lanes_only_on_the_kernel_targets():
    text = _lower_and_check((1, 3, 6, 16), (1, 3, 3, 3, 16), "llvm", padding=(1,) * 4)
    assert "ember_f32_conv_tile" not in text


@pytest.mark.cc
@pytest.mark.parametrize(
    ("cin", "cout", "size", "kernel", "pads", "stride"),
    [
        (1, 64, 10, 3, 1, 2),  # rows of 5: one register tile each
        (16, 16, 32, 3, 1, 1),
        (8, 32, 32, 1, 0, 1),
        (3, 32, 16, 3, 1, 1),
        (16, 32, 32, 3, 1, 2),  # stride 2: loop-IR tiles calling the kernel
        (16, 32, 32, 1, 0, 2),
    ],
)
def test_compiled_position_lanes_match_onnxruntime(cin, cout, size, kernel, pads, stride):
    _compiled_matches_onnxruntime(cin, cout, size, kernel, pads, stride, "c")


def _host_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512f" in f.read()
    except OSError:
        return False


@pytest.mark.cc
@pytest.mark.skipif(not _host_avx512(), reason="the host runs no AVX-512")
@pytest.mark.parametrize(("cin", "cout", "size"), [(3, 16, 40), (3, 32, 56), (3, 8, 40)])
def test_compiled_stems_on_avx512_match_onnxruntime(cin, cout, size):
    # 3x3 stride-2 stems: rows of 20 (10-column tiles) and 28 (14), blocks of 16 and 8
    _compiled_matches_onnxruntime(cin, cout, size, 3, 1, 2, "c -mcpu=skylake-avx512")


def _compiled_matches_onnxruntime(cin, cout, size, kernel, pads, stride, target):
    from onnx import TensorProto, helper, numpy_helper

    from ember.testing import assert_matches_onnxruntime

    rng = np.random.default_rng(3)
    w = rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel)
    b = rng.standard_normal(cout)
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"],
            ["c"],
            kernel_shape=[kernel] * 2,
            pads=[pads] * 4,
            strides=[stride] * 2,
        ),
        helper.make_node("Add", ["c", "r"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    shape = [1, cout, size // stride, size // stride]
    graph = helper.make_graph(
        nodes,
        "conv",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, shape),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        initializer=[
            numpy_helper.from_array(w.astype(np.float32), "w"),
            numpy_helper.from_array(b.astype(np.float32), "b"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    inputs = {
        "x": rng.standard_normal((1, cin, size, size)).astype(np.float32),
        "r": rng.standard_normal(shape).astype(np.float32),
    }
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4, target=target)


def test_position_lanes_kernel_starts_from_zero_instead_of_a_zeroing_loop():
    text = _lower_and_check((1, 3, 6, 16), (1, 3, 3, 3, 16), padding=(1, 1, 1, 1))
    tile = text.split("def kernel")[1].split("ember_f32_lanes_tile")
    assert len(tile) == 2 and "= 0.0f" not in tile[0].split("parallel")[-1]
    # the zero flag (after acc, x, w, 2 offsets, ncols, tcols, cx, cr) is set
    assert tile[1].split(", ")[10] == "1"


def test_lanes_tile_reference_zeroes_only_when_asked():
    x = [1.0] * 4  # one weight per channel
    w = [float(k) for k in range(16)]  # one row of 16 positions
    for zero, start in ((0, 2.0), (1, 0.0)):
        acc = [2.0] * 32
        lanes_tile_reference(acc, x, w, 0, 0, 2, 16, 1, 0, zero, 1, 0, 0, 1, 0, 0, 1, 0, 0)
        assert acc == [start + k for k in range(16)] * 2


def test_narrow_rows_are_one_register_tile_calling_the_kernel():
    # ds_cnn_kws's stem shape: rows of 5 output columns, one input channel
    text = _lower_and_check((1, 1, 12, 7), (1, 1, 3, 3, 16))
    assert 'conv = allocate(Buffer((1, 1, 5, 16), "float32"' in text
    assert "ember_f32_conv_tile" in text
    # the llvm back end keeps its tiles of 4 columns
    text = _lower_and_check((1, 1, 12, 7), (1, 1, 3, 3, 16), target="llvm -mcpu=haswell")
    assert 'conv = allocate(Buffer((1, 1, 4, 16), "float32"' in text


@pytest.mark.parametrize(
    ("target", "width", "cin", "cols"),
    [
        ("c -mcpu=skylake-avx512", 20, 3, 10),  # 14 would leave a guarded tail of 6
        ("c -mcpu=skylake-avx512", 28, 3, 14),  # 14 divides the row
        ("c -mcpu=skylake-avx512", 20, 8, 14),  # not a stem: the target's tile and a tail
        ("c -mcpu=skylake-avx512", 17, 3, 14),  # nothing from 10 to 14 divides 17
    ],
)
def test_channels_last_stems_on_avx512_take_a_tile_dividing_the_row(target, width, cin, cols):
    from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS as EXTERNS

    x, wp = v("x", (1, 7, 2 * width, cin)), v("wp", (1, cin, 3, 3, 16))
    attrs = {"padding": (1, 1, 1, 1), "strides": (2, 2), "data_layout": "NHWC"}
    body = call("relu", call("nn.conv_packed", x, wp, **attrs))
    prim = lower_group(primitive((x, wp), body), "kernel", target)
    assert f'conv = allocate(Buffer((1, 1, {cols}, 16), "float32"' in str(prim)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in (x, wp)]
    (ref,) = evaluate(Function((x, wp), body), xs)
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [*xs, out], externs=EXTERNS)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("target", "tiles"),
    [
        ("c -mcpu=skylake-avx512", "i0_i1_fused_i2_outer_fused_i3_outer_fused"),  # blocks inner
        ("c -mcpu=haswell", "i0_i3_outer_fused_i1_fused_i2_outer_fused"),  # blocks outer
    ],
)
def test_channels_last_stems_on_avx512_run_the_blocks_of_a_tile_together(target, tiles):
    x, wp = v("x", (1, 8, 56, 3)), v("wp", (2, 3, 3, 3, 16))  # 3->32, rows of 28
    attrs = {"padding": (1, 1, 1, 1), "strides": (2, 2), "data_layout": "NHWC"}
    body = call("relu", call("nn.conv_packed", x, wp, **attrs))
    prim = lower_group(primitive((x, wp), body), "kernel", target)
    assert f"for {tiles} in" in str(prim)
