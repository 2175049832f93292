"""nn.conv_depthwise_packed: the legalizer that packs depthwise weights, the op's type
rule and reference, and its channel-blocked lowering (interpreted and compiled)."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.ir import Attrs, Function, TensorType, Var, call, const, evaluate
from ember.ir.ops.nn_conv_weights import unpack_depthwise_weight
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv import conv_to_packed


def v(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var(name, TensorType(shape, dtype))


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs"),
    [
        ((1, 16, 7, 7), (16, 1, 3, 3), {"padding": (1, 1, 1, 1)}),
        ((2, 32, 9, 8), (32, 1, 3, 3), {"strides": (2, 2), "padding": (1, 0, 1, 1)}),
        ((1, 8, 11), (8, 1, 5), {"dilation": (2,), "padding": (2, 2)}),
    ],
)
def test_legalizer_packs_depthwise_weights(xshape, wshape, attrs):
    x = v("x", xshape)
    w = _data(wshape, 1)
    node = call("nn.conv", x, const(w), groups=wshape[0], name="dw", **attrs)
    out = conv_to_packed(node)
    assert out.op.name == "nn.conv_depthwise_packed" and out.name == "dw"
    block = out.args[1].data.shape[-1]
    assert out.args[1].data.shape == (wshape[0] // block, *wshape[2:], block)
    np.testing.assert_array_equal(unpack_depthwise_weight(out.args[1].data), w)
    assert out.type == node.type
    xs = [_data(xshape, 2)]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-5, atol=1e-5)


def test_other_grouped_convolutions_are_not_depthwise_packed():
    x = v("x", (1, 16, 6, 6))
    multiplier = call("nn.conv", x, const(_data((32, 1, 3, 3), 0)), groups=16)
    grouped = call("nn.conv", x, const(_data((16, 4, 3, 3), 0)), groups=4)
    odd = call("nn.conv", v("y", (1, 12, 6, 6)), const(_data((12, 1, 3, 3), 0)), groups=12)
    for node in (multiplier, grouped, odd):
        assert conv_to_packed(node) is node


def test_depthwise_type_rule():
    x = v("x", (1, 16, 6, 6))
    assert call("nn.conv_depthwise_packed", x, v("w", (1, 3, 3, 16))).type.shape == (1, 16, 4, 4)
    with pytest.raises(IRError, match="rank of data"):
        call("nn.conv_depthwise_packed", x, v("w", (1, 1, 3, 3, 16))).type  # noqa: B018


def _run(params: list[Var], body, tol: float = 1e-4) -> str:
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in params]
    func = Function(tuple(params), body, Attrs({"Primitive": 1}))
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    return str(prim)


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs"),
    [
        ((1, 16, 7, 7), (1, 3, 3, 16), {"padding": (1, 1, 1, 1)}),
        ((1, 16, 9, 10), (1, 3, 3, 16), {"strides": (2, 2), "padding": (0, 1, 1, 0)}),
        ((2, 8, 5, 17), (1, 3, 3, 8), {"padding": (1, 1, 1, 1)}),  # 17 columns: a tail tile
        ((1, 8, 12), (1, 3, 8), {"dilation": (3,)}),
    ],
)
def test_depthwise_lowering_matches_reference(xshape, wshape, attrs):
    x, w = v("x", xshape), v("w", wshape)
    conv = call("nn.conv_depthwise_packed", x, w, **attrs)
    text = _run([x, w], call("clip", conv, a_min=0.0, a_max=6.0))
    assert f"vectorized({wshape[-1]})" in text and "pad_blocked" in text


@pytest.mark.parametrize("width", [5, 6])
def test_narrow_blocked_rows_are_one_register_tile(width):
    # ds_cnn_kws's rows of 5: one tile of the whole row, no guarded tail tile
    x, w = v("x", (1, 16, 6, width)), v("w", (1, 3, 3, 16))
    conv = call("nn.conv_depthwise_packed", x, w, padding=(1, 1, 1, 1))
    text = _run([x, w], call("relu", conv))
    assert f"conv = allocate(Buffer((1, 1, {width}, 16)" in text and "if " not in text


@pytest.mark.cc
@pytest.mark.parametrize(("size", "stride"), [(14, 1), (9, 2), (30, 1), (5, 1), (12, 2)])
def test_compiled_depthwise_matches_onnxruntime(size, stride):
    from onnx import TensorProto, helper, numpy_helper

    from ember.testing import assert_matches_onnxruntime

    c = 32
    w = _data((c, 1, 3, 3), 3)
    b = _data((c,), 4)
    out = (size + 2 - 3) // stride + 1
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], group=c, pads=[1] * 4, strides=[stride] * 2
        ),
        helper.make_node("Clip", ["c", "lo", "hi"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "dw",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, out, out])],
        initializer=[
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(b, "b"),
            numpy_helper.from_array(np.array(0, np.float32), "lo"),
            numpy_helper.from_array(np.array(6, np.float32), "hi"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert_matches_onnxruntime(model, {"x": _data((1, c, size, size), 5)}, rtol=1e-4, atol=1e-5)
