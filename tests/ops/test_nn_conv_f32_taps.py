"""Packed float32 convolution weights with the kernel taps before the input channels
(nn.conv_packed's ``taps_first``, ember.ops.nn_conv_taps): which layers the legalizer packs
that way, that every path reading the weight computes the same convolution in either order
(interpreted on the C, llvm and non-AVX2 paths; compiled against onnxruntime), and that
builds are deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from packed_conv_lowering import lower_conv_bias_relu

from ember import tir
from ember.ir import Function, call, const, evaluate
from ember.ir.expr import Var
from ember.ir.ops.nn_conv_weights import conv_reference, pack_conv_weight, unpack_conv_weight
from ember.ir.types import TensorType
from ember.ops import nn_conv_taps
from ember.ops.nn_conv import conv_to_packed
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.ops.nn_conv_taps import taps_first
from ember.testing import assert_matches_onnxruntime, compile_onnx

AVX2 = "c -mcpu=haswell"


@pytest.mark.parametrize(
    ("kernel", "cin", "strides", "out", "first"),
    [
        ((3, 3), 256, (1, 1), (4, 25), True),  # crnn's 256->256 (whole image, taps outer)
        ((3, 3), 128, (1, 1), (8, 25), True),  # crnn's 128->128 (bands of 4 rows)
        ((3, 3), 64, (1, 1), (56, 56), True),  # ResNet-50's 3x3s at 56x56, 28x28, 14x14
        ((3, 3), 128, (1, 1), (28, 28), True),
        ((3, 3), 256, (1, 1), (14, 14), True),
        ((3, 3), 128, (2, 2), (28, 28), True),  # ResNet-50's strided 3x3s 56->28, 28->14
        ((3, 3), 256, (2, 2), (14, 14), True),
        ((3, 3), 512, (2, 2), (7, 7), True),  # 14->7 and 7x7: channels outer before
        ((3, 3), 512, (1, 1), (7, 7), True),
        ((2, 2), 256, (1, 1), (1, 24), True),  # crnn's last conv
        ((1, 1), 256, (1, 1), (14, 14), False),  # 1x1: both orders are one layout
        ((3, 3), 3, (1, 1), (32, 100), False),  # short reduction: loop-IR tiles
        ((3, 3), 32, (1, 1), (16, 16), False),  # position-lane tiles
    ],
)
def test_taps_first_rule(kernel, cin, strides, out, first):
    assert taps_first(kernel, cin, 16, strides, out) is first
    assert taps_first(kernel, cin, 8, strides, out) is False  # blocks of 8: channels first


def test_taps_first_switch(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(nn_conv_taps, "TAPS_FIRST", False)
    assert taps_first((3, 3), 256, 16, (1, 1), (4, 25)) is False


@pytest.mark.parametrize("first", [False, True])
def test_pack_round_trip(first):
    w = np.arange(20 * 6 * 3 * 2, dtype=np.float32).reshape(20, 6, 3, 2)
    wp = pack_conv_weight(w, 16, first)
    assert wp.shape == ((2, 3, 2, 6, 16) if first else (2, 6, 3, 2, 16))
    assert wp[1, 2, 1, 4, 3] == w[19, 4, 2, 1] if first else wp[1, 4, 2, 1, 3] == w[19, 4, 2, 1]
    np.testing.assert_array_equal(unpack_conv_weight(wp, 20, first), w)


def test_legalizer_packs_taps_first():
    x = Var("x", TensorType((1, 256, 4, 25), "float32"))
    w = np.random.default_rng(0).standard_normal((256, 256, 3, 3)).astype(np.float32)
    node = call("nn.conv", x, const(w), padding=(1, 1, 1, 1))
    packed = conv_to_packed(node)
    assert packed.attrs["taps_first"] == 1
    assert packed.args[1].type.shape == (16, 3, 3, 256, 16)
    assert packed.type == node.type
    pointwise = const(w[:, :, :1, :1].copy())
    assert conv_to_packed(call("nn.conv", x, pointwise)).attrs["taps_first"] == 0


#: (x, plain weight (O, I/groups, kh, kw), attrs): padding, stride, dilation, groups, on the
#: kernel's whole-image, row-band and strided tiles and the loop-IR tiles
SHAPES = [
    ((1, 32, 6, 9), (16, 32, 3, 3), {"padding": (1, 1, 1, 1)}),
    ((1, 32, 11, 12), (32, 32, 3, 3), {"strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ((1, 32, 12, 13), (16, 32, 3, 3), {"dilation": (2, 2), "padding": (2, 1, 2, 1)}),
    ((1, 64, 6, 7), (32, 32, 3, 3), {"groups": 2, "padding": (1, 1, 1, 1)}),
    ((1, 40, 5, 21), (16, 40, 2, 3), {"strides": (1, 2)}),
    ((1, 4, 9, 10), (16, 4, 3, 3), {"padding": (1, 1, 1, 1)}),  # short: loop-IR tiles
]


def _interpret(x, w, attrs, target, first):
    wp = pack_conv_weight(w, 16, first)
    text, prim, params, func = lower_conv_bias_relu(
        x, wp.shape, target, taps_first=int(first), **attrs
    )
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(x).astype(np.float32), wp]
    xs.append(rng.standard_normal(params[2].type.shape).astype(np.float32))
    (ref,) = evaluate(Function(func.params, func.body), xs)
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [*xs, out], externs=INTERPRET_EXTERNS)
    return text, out, ref, xs


@pytest.mark.parametrize(("x", "w", "attrs"), SHAPES)
@pytest.mark.parametrize("target", [AVX2, "llvm -mcpu=haswell", "c -mcpu=skylake-avx512"])
def test_both_orders_interpreted(x, w, attrs, target):
    weight = np.random.default_rng(2).standard_normal(w).astype(np.float32) / 8
    outs = []
    for first in (False, True):
        text, out, ref, xs = _interpret(x, weight, attrs, target, first)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        strides = attrs.get("strides", (1, 1))
        dilation = attrs.get("dilation", (1, 1))
        pads = attrs.get("padding", (0, 0, 0, 0))
        plain = conv_reference(
            xs[0], weight, strides, [(pads[0], pads[2]), (pads[1], pads[3])], dilation,
            attrs.get("groups", 1),
        )  # fmt: skip
        np.testing.assert_allclose(out, np.maximum(plain + xs[2], 0), rtol=1e-4, atol=1e-4)
        outs.append(out)
        if first and target == AVX2 and w[1] * 9 >= 256 and "dilation" not in attrs:
            assert "ember_f32_conv_tile" in text  # the kernel reads the taps-first weight
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def _model(cin, cout, size, stride, dilation=1, groups=1):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((cout, cin // groups, 3, 3)) / np.sqrt(cin * 9)
    pad = dilation
    conv = helper.make_node(
        "Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], strides=[stride] * 2,
        pads=[pad] * 4, dilations=[dilation] * 2, group=groups,
    )  # fmt: skip
    relu = helper.make_node("Relu", ["c"], ["y"])
    inits = [
        numpy_helper.from_array(w.astype(np.float32), "w"),
        numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([conv, relu], "conv", [x], [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.cc
@pytest.mark.parametrize(
    ("cin", "cout", "size", "stride", "dilation", "groups"),
    [
        (256, 32, 14, 1, 1, 1),  # whole image (196 positions), taps outer
        (64, 32, 20, 1, 1, 1),  # bands of rows
        (128, 16, 24, 2, 1, 1),  # strided
        (64, 32, 16, 1, 2, 1),  # dilated
        (128, 64, 12, 1, 1, 2),  # grouped
    ],
)
@pytest.mark.parametrize("first", [False, True])
def test_compiled_orders_match_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, cin, cout, size, stride, dilation, groups, first
):
    monkeypatch.setattr(nn_conv_taps, "TAPS_FIRST", first)
    model = _model(cin, cout, size, stride, dilation, groups)
    x = np.random.default_rng(5).standard_normal((1, cin, size, size)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-4, target="c")


@pytest.mark.cc
@pytest.mark.parametrize("kind", ["llvm", "llvmjit"])
def test_llvm_kinds_read_taps_first(kind):
    model = _model(128, 32, 14, 1)
    x = np.random.default_rng(6).standard_normal((1, 128, 14, 14)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-4, target=kind)


def test_taps_first_builds_are_deterministic():
    model = _model(128, 32, 14, 1)
    first, second = (compile_onnx(model, shape={"x": (1, 128, 14, 14)}) for _ in range(2))
    assert len(first) > 0 and first.content_hash() == second.content_hash()
