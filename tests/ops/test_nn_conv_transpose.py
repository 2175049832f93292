"""nn.conv_transpose legalized to its phase form (ember.ir.ops.nn_conv_transpose_form): one
convolution of s*s*O channels, a depth-to-space and a crop; kernel == stride is the 1x1
case."""

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
    ("kernel", "attrs"),
    [
        ((4, 4), {"strides": (2, 2), "padding": (1, 1, 1, 1)}),  # DCGAN / FCN upsampling
        ((3, 3), {"strides": (2, 2), "padding": (1, 1, 1, 1), "output_padding": (1, 1)}),
        ((3, 3), {"strides": (2, 2)}),  # the kernel zero-padded to 4x4
        ((5, 5), {"strides": (2, 2), "padding": (2, 1, 2, 1)}),  # asymmetric padding
        ((4, 2), {"strides": (2, 2), "padding": (1, 0, 1, 0)}),  # not square
        ((6, 6), {"strides": (3, 3), "padding": (2, 2, 1, 1)}),
        ((2, 2), {"strides": (2, 2), "padding": (1, 0, 0, 0)}),
        ((2, 2), {"strides": (2, 2), "output_padding": (1, 1), "padding": (0, 0, 1, 1)}),
    ],
)
def test_phase_form_matches_the_reference(kernel, attrs):
    x = Var("x", TensorType((2, 5, 6, 7), "float32"))
    node = call("nn.conv_transpose", x, const(_data((5, 3, *kernel), 1)), **attrs)
    out = conv_transpose_to_pointwise(node)
    assert out is not node and out.type == node.type
    assert out.op.name in ("strided_slice", "nn.depth_to_space")
    xs = [_data((2, 5, 6, 7), 2)]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": (2, 2), "output_padding": (1, 1)},  # past the full product: zeros there
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


def _model(
    cin: int, cout: int, s: int, bias: bool, act: str, x: np.ndarray, k: int = 0, pad: int = 0
):
    k = k or s
    inits = {"w": _data((cin, cout, k, k), 3)}
    if bias:
        inits["b"] = _data((cout,), 4)
    attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [pad] * 4}
    nodes = [node("ConvTranspose", ["x", *inits], "t", **attrs), node(act, ["t"], "y")]
    return build_model(nodes, {"x": x}, ["y"], inits)


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(
    ("cin", "cout", "size", "s", "bias", "act", "kernel", "pad"),
    [
        (24, 24, (9, 11), 2, True, "Relu", 2, 0),  # DBNet's head, odd sizes
        (24, 1, (7, 5), 2, True, "Sigmoid", 2, 0),  # one output channel: an unpacked 1x1 conv
        (5, 7, (3, 4), 3, False, "Relu", 3, 0),
        (16, 32, (6, 6), 2, False, "Sigmoid", 2, 0),
        (32, 16, (8, 8), 2, True, "Relu", 4, 1),  # 4x4 stride 2, padding 1: phases of 2x2
        (8, 4, (5, 6), 2, True, "Relu", 3, 1),  # 3x3 stride 2, padding 1
    ],
)
def test_compiled_conv_transpose_matches_onnxruntime(
    cin, cout, size, s, bias, act, kernel, pad, target
):
    from ember.testing import assert_matches_onnxruntime

    x = _data((1, cin, *size), 5)
    model = _model(cin, cout, s, bias, act, x, kernel, pad)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5, target=target)
