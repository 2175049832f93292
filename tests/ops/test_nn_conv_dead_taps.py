"""Kernel taps that only read padding, dropped from constant-weight convolutions
(ember.ops.nn_conv_dead_taps): the same outputs from the sliced kernel."""

import numpy as np
import pytest

from ember.ir import Function, TensorType, Var, call, const, evaluate
from ember.ops.nn_conv_dead_taps import drop_dead_taps


def _conv(xshape, wshape, layout="NCHW", **attrs):
    rng = np.random.default_rng(7)
    x = Var("x", TensorType(xshape, "float32"))
    w = rng.standard_normal(wshape).astype(np.float32)
    node = call("nn.conv", x, const(w), data_layout=layout, **attrs)
    data = rng.standard_normal(xshape).astype(np.float32)
    return x, node, data


def _same(x, node, out, data):
    want = evaluate(Function((x,), node), [data])[0]
    got = evaluate(Function((x,), out), [data])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_aspp_rate_18_on_a_16x16_map_is_a_1x1_convolution():
    """DeepLabV3 at 256 x 256: the 3x3 convolution dilated by 18 reads only its centre."""
    x, node, data = _conv((1, 8, 16, 16), (4, 8, 3, 3), padding=(18,) * 4, dilation=(18, 18))
    out = drop_dead_taps(node)
    assert out is not None
    assert np.asarray(out.args[1].data).shape == (4, 8, 1, 1)
    assert tuple(out.attrs["padding"]) == (0,) * 4 and tuple(out.attrs["dilation"]) == (1, 1)
    _same(x, node, out, data)


@pytest.mark.parametrize(
    ("xshape", "wshape", "layout", "attrs", "kernel"),
    [
        (
            (1, 3, 6, 20),
            (2, 3, 5, 3),
            "NCHW",
            {"padding": (8, 1, 8, 1), "dilation": (4, 1)},
            (3, 3),
        ),
        (
            (1, 20, 6, 3),
            (2, 3, 3, 5),
            "NHWC",
            {"padding": (1, 8, 1, 8), "dilation": (1, 4)},
            (3, 3),
        ),
        ((1, 2, 9), (3, 2, 3), "NCHW", {"padding": (12, 12), "dilation": (12,)}, (1,)),
        (
            (1, 2, 7, 7),
            (2, 2, 3, 3),
            "NCHW",
            {"padding": (9,) * 4, "strides": (2, 2), "dilation": (9, 9)},
            (1, 1),
        ),
    ],
)
def test_partially_dead_kernels_are_sliced(xshape, wshape, layout, attrs, kernel):
    x, node, data = _conv(xshape, wshape, layout, **attrs)
    out = drop_dead_taps(node)
    assert out is not None and np.asarray(out.args[1].data).shape[2:] == kernel
    assert out.type == node.type
    _same(x, node, out, data)


@pytest.mark.parametrize(
    ("xshape", "attrs"),
    [
        ((1, 2, 16, 16), {"padding": (12,) * 4, "dilation": (12, 12)}),  # every tap reads rows
        ((1, 2, 16, 16), {"padding": (1,) * 4}),
        ((1, 2, 8, 8), {"padding": (5, 5, 8, 8), "dilation": (10, 10)}),  # padding would be < 0
    ],
)
def test_live_kernels_and_negative_paddings_are_left_alone(xshape, attrs):
    _, node, _ = _conv(xshape, (2, 2, 3, 3), **attrs)
    assert drop_dead_taps(node) is None
