"""nn_conv ops (nn.conv, nn.conv_transpose, nn.dense, nn.matmul): type rules, error
messages and numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import OpPattern, TensorType, call, get_op

from .ir_check import run as _run
from .ir_check import var as _var


def _naive_conv2d(x, w, stride, pads, dil, groups):  # type: ignore[no-untyped-def]
    xp = np.pad(x, [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    n, _, hp, wp = xp.shape
    o, cg, kh, kw = w.shape
    oh = (hp - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wp - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                r0, c0 = i * stride[0], j * stride[1]
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    r0 : r0 + dil[0] * (kh - 1) + 1 : dil[0],
                    c0 : c0 + dil[1] * (kw - 1) + 1 : dil[1],
                ]
                y[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    return y


@pytest.mark.parametrize(
    "stride,pads,dil,groups",
    [
        ((1, 1), (0, 0, 0, 0), (1, 1), 1),
        ((2, 1), (1, 2, 0, 1), (1, 2), 2),
        ((1, 2), (1, 1, 1, 1), (2, 1), 6),
    ],
)
def test_conv_matches_naive_loops(stride, pads, dil, groups) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 6, 9, 8))
    w = rng.standard_normal((6, 6 // groups, 3, 2))
    xv, wv = _var(x.shape, "float64"), _var(w.shape, "float64", "w")
    expr = call("nn.conv", xv, wv, strides=stride, padding=pads, dilation=dil, groups=groups)
    (y,) = _run(expr, [xv, wv], [x, w])
    np.testing.assert_allclose(y, _naive_conv2d(x, w, stride, pads, dil, groups), atol=1e-12)


def test_conv_type_rule_and_pattern() -> None:
    x = _var((1, 4, 10, 10, 10))
    w = _var((8, 2, 3, 3, 3), name="w")
    c = call("nn.conv", x, w, strides=(2, 2, 2), padding=(1, 1, 1, 1, 1, 1), groups=2)
    assert c.type == TensorType((1, 8, 5, 5, 5), "float32")
    assert get_op("nn.conv").pattern == OpPattern.OUT_ELEMWISE_FUSABLE


@pytest.mark.parametrize(
    "wshape,attrs,message",
    [
        ((8, 3, 3, 3), {}, "expects 3 input channels"),
        ((8, 4, 3, 3), {"groups": 3}, "groups=3 must divide"),
        ((8, 4, 3, 3), {"padding": (1, 1)}, "expected 4 \\(begin then end"),
        ((8, 4, 3), {}, "must have the rank of data"),
        ((8, 4, 9, 9), {}, "smaller than the dilated kernel extent 9"),
        ((8, 4, 3, 3), {"strides": (0, 1)}, "'strides' must be positive"),
    ],
)
def test_conv_type_errors(wshape, attrs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(IRError, match=message):
        call("nn.conv", _var((1, 4, 8, 8)), _var(wshape, name="w"), **attrs)


def test_conv_dtype_mismatch() -> None:
    with pytest.raises(IRError, match="weight has dtype float64 but data has dtype float32"):
        call("nn.conv", _var((1, 4, 8, 8)), _var((8, 4, 3, 3), "float64", "w"))


def test_conv_transpose_is_adjoint_of_conv() -> None:
    """<conv(x), y> == <x, conv_transpose(y)> for matching attributes."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4, 9, 7))
    w = rng.standard_normal((6, 2, 3, 2))
    attrs = {"strides": (2, 1), "padding": (1, 0, 1, 1), "dilation": (1, 2), "groups": 2}
    xv, wv = _var(x.shape, "float64"), _var(w.shape, "float64", "w")
    (cx,) = _run(call("nn.conv", xv, wv, **attrs), [xv, wv], [x, w])
    y = rng.standard_normal(cx.shape)
    yv = _var(y.shape, "float64", "y")
    tr = call("nn.conv_transpose", yv, wv, output_padding=(0, 0), **attrs)
    assert tr.type.shape == (1, 4, 9, 7)  # type: ignore[attr-defined]
    (ty,) = _run(tr, [yv, wv], [y, w])
    assert np.isclose((cx * y).sum(), (x * ty).sum())


def test_dense_and_matmul() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 5)).astype(np.float16)
    w = rng.standard_normal((4, 5)).astype(np.float16)
    av, wv = _var(a.shape, "float16"), _var(w.shape, "float16", "w")
    (y,) = _run(call("nn.dense", av, wv), [av, wv], [a, w])
    assert y.dtype == np.float16
    np.testing.assert_allclose(y, a.astype(np.float32) @ w.T.astype(np.float32), rtol=2e-3)
    cases = [((5,), (5,), ()), ((2, 1, 3, 4), (5, 4, 2), (2, 5, 3, 2)), ((4,), (2, 4, 3), (2, 3))]
    for sa, sb, out in cases:
        m = call("nn.matmul", _var(sa), _var(sb, name="b"))
        assert m.type.shape == out  # type: ignore[attr-defined]
    with pytest.raises(IRError, match="reduction sizes differ"):
        call("nn.matmul", _var((2, 3)), _var((4, 2), name="b"))
    with pytest.raises(IRError, match="do not broadcast"):
        call("nn.matmul", _var((2, 2, 3)), _var((3, 3, 2), name="b"))
    with pytest.raises(IRError, match="K=5"):
        call("nn.dense", _var((2, 5)), _var((3, 4), name="w"))
