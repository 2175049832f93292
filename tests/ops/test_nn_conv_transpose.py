"""nn.conv_transpose with kernel == stride legalized to a 1x1 conv and a depth-to-space."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ir import Function, TensorType, Var, call, const, evaluate
from ember.ops.nn_conv_transpose import conv_transpose_to_pointwise
from ember.testing.onnx_models import build_model, node


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    ("cin", "cout", "size", "s"),
    [(24, 24, (5, 7), 2), (3, 1, (4, 3), 2), (5, 6, (3, 5), 3), (8, 16, (1, 1), 4)],
)
def test_legalized_form_matches_the_reference(cin, cout, size, s):
    x = Var("x", TensorType((2, cin, *size), "float32"))
    node = call("nn.conv_transpose", x, const(_data((cin, cout, s, s), 1)), strides=(s, s))
    out = conv_transpose_to_pointwise(node)
    assert out.op.name == "nn.depth_to_space" and out.args[0].op.name == "nn.conv"
    assert out.type == node.type
    xs = [_data((2, cin, *size), 2)]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": (2, 2), "padding": (1, 0, 0, 0)},
        {"strides": (2, 2), "output_padding": (1, 1)},
        {"strides": (2, 2), "groups": 2},
        {"strides": (2, 2), "dilation": (2, 2)},
        {"strides": (1, 1)},
        {"strides": (2, 1)},
    ],
)
def test_other_transposed_convolutions_stay(attrs):
    x = Var("x", TensorType((1, 4, 5, 5), "float32"))
    node = call("nn.conv_transpose", x, const(_data((4, 2, 2, 2), 0)), **attrs)
    assert conv_transpose_to_pointwise(node) is node
    weight = Var("w", TensorType((4, 2, 2, 2), "float32"))
    variable = call("nn.conv_transpose", x, weight, strides=(2, 2))
    assert conv_transpose_to_pointwise(variable) is variable


def _model(cin: int, cout: int, s: int, bias: bool, act: str, x: np.ndarray):
    inits = {"w": _data((cin, cout, s, s), 3)}
    if bias:
        inits["b"] = _data((cout,), 4)
    nodes = [
        node("ConvTranspose", ["x", *inits], "t", kernel_shape=[s, s], strides=[s, s]),
        node(act, ["t"], "y"),
    ]
    return build_model(nodes, {"x": x}, ["y"], inits)


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(
    ("cin", "cout", "size", "s", "bias", "act"),
    [
        (24, 24, (9, 11), 2, True, "Relu"),  # DBNet's head, odd sizes
        (24, 1, (7, 5), 2, True, "Sigmoid"),  # one output channel: an unpacked 1x1 conv
        (5, 7, (3, 4), 3, False, "Relu"),
        (16, 32, (6, 6), 2, False, "Sigmoid"),
    ],
)
def test_compiled_conv_transpose_matches_onnxruntime(cin, cout, size, s, bias, act, target):
    from ember.testing import assert_matches_onnxruntime

    x = _data((1, cin, *size), 5)
    model = _model(cin, cout, s, bias, act, x)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5, target=target)
