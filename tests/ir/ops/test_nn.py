"""Type rules, error messages and numpy references of the nn op family."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import (
    Function,
    IRModule,
    OpPattern,
    TensorType,
    TupleType,
    Var,
    call,
    evaluate,
    get_op,
)
from ember.ir.expr import Expr


def _var(shape: tuple[int, ...], dtype: str = "float32", name: str = "x") -> Var:
    return Var(name, TensorType(shape, dtype))


def _run(expr: Expr, params: list[Var], values: list[np.ndarray]) -> list[np.ndarray]:
    return evaluate(IRModule.from_expr(Function(tuple(params), expr)), values)


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


def test_pools() -> None:
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    xv = _var(x.shape)
    mp = call("nn.max_pool", xv, pool_size=(2, 2), strides=(2, 2), ceil_mode=True)
    assert mp.type.shape == (2, 3, 3, 3)  # type: ignore[attr-defined]
    (y,) = _run(mp, [xv], [x])
    np.testing.assert_array_equal(y[0, 0], [[6, 8, 9], [16, 18, 19], [21, 23, 24]])
    ap = call("nn.avg_pool", xv, pool_size=(3, 3), padding=(1, 1, 1, 1))
    (y,) = _run(ap, [xv], [x])
    np.testing.assert_allclose(y[0, 0, 0, 0], np.mean([0, 1, 5, 6]))
    ap = call("nn.avg_pool", xv, pool_size=(3, 3), padding=(1, 1, 1, 1), count_include_pad=True)
    (y,) = _run(ap, [xv], [x])
    np.testing.assert_allclose(y[0, 0, 0, 0], (0 + 1 + 5 + 6) / 9, rtol=1e-6)
    (g,) = _run(call("nn.global_avg_pool", xv), [xv], [x])
    np.testing.assert_allclose(g, x.mean(axis=(2, 3), keepdims=True))
    with pytest.raises(IRError, match="pool_size \\[2\\] must hold 2 positive sizes"):
        call("nn.max_pool", xv, pool_size=(2,))


def test_norms_and_softmax() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    xv = _var(x.shape)
    vec = [_var((3,), name=n) for n in ("g", "b", "m", "v")]
    vals = [rng.standard_normal(3).astype(np.float32) for _ in range(3)]
    vals.append(rng.random(3).astype(np.float32) + 0.5)
    (y,) = _run(call("nn.batch_norm", xv, *vec, epsilon=1e-3), [xv, *vec], [x, *vals])
    g, b, m, v = (a.reshape(1, 3, 1) for a in vals)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-3) * g + b, rtol=1e-5, atol=1e-6)
    with pytest.raises(IRError, match="gamma must have shape \\(4,\\)"):
        call("nn.batch_norm", xv, *vec, axis=-1)
    (s,) = _run(call("nn.softmax", xv, axis=1), [xv], [x])
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-6)
    (ls,) = _run(call("nn.log_softmax", xv, axis=1), [xv], [x])
    np.testing.assert_allclose(np.exp(ls), s, rtol=1e-5)
    sc = _var((3, 4), name="s")
    ln = call("nn.layer_norm", xv, sc, axis=1)
    (y,) = _run(ln, [xv, sc], [x, np.ones((3, 4), np.float32)])
    np.testing.assert_allclose(y.reshape(2, -1).mean(axis=1), 0, atol=1e-6)
    with pytest.raises(IRError, match="must broadcast to the normalised shape"):
        call("nn.layer_norm", xv, _var((2, 3, 4), name="s"), axis=1)


def test_image_ops() -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    xv = _var(x.shape)
    nearest = call("image.resize", xv, sizes=(1, 1, 8, 8), scales=(1, 1, 2, 2))
    (y,) = _run(nearest, [xv], [x])
    np.testing.assert_array_equal(y[0, 0, ::2, ::2], x[0, 0])
    lin = call(
        "image.resize",
        xv,
        sizes=(1, 1, 7, 7),
        method="linear",
        coordinate_transformation_mode="align_corners",
    )
    (y,) = _run(lin, [xv], [x])
    np.testing.assert_allclose(y[0, 0, ::2, ::2], x[0, 0])
    np.testing.assert_allclose(y[0, 0, 1, 1], x[0, 0, :2, :2].mean())
    with pytest.raises(IRError, match="unknown coordinate_transformation_mode 'bogus'"):
        call("image.resize", xv, sizes=(1, 1, 8, 8), coordinate_transformation_mode="bogus")
    d = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    dv = _var(d.shape)
    d2s = call("nn.depth_to_space", dv, block_size=2)
    s2d = call("nn.space_to_depth", d2s, block_size=2)
    assert d2s.type.shape == (1, 1, 4, 4)  # type: ignore[attr-defined]
    (back,) = _run(s2d, [dv], [d])
    np.testing.assert_array_equal(back, d)
    with pytest.raises(IRError, match="not divisible by block_size"):
        call("nn.space_to_depth", xv, block_size=3)


def test_einsum() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    av, bv = _var(a.shape), _var(b.shape, name="b")
    for eq, shape in [("bij,bjk->bik", (2, 3, 5)), ("...ij,...jk", (2, 3, 5))]:
        e = call("einsum", av, bv, equation=eq)
        assert e.type.shape == shape  # type: ignore[attr-defined]
        (y,) = _run(e, [av, bv], [a, b])
        np.testing.assert_allclose(y, np.einsum(eq, a, b), rtol=1e-5)
    assert call("einsum", av, equation="ijk").type.shape == (2, 3, 4)  # type: ignore[attr-defined]
    assert call("einsum", av, equation="ijk->").type.shape == ()  # type: ignore[attr-defined]
    with pytest.raises(IRError, match="index 'j' has sizes 4 and 5"):
        call("einsum", av, bv, equation="bij,bjk->bik".replace("bjk", "bkj"))
    with pytest.raises(IRError, match="has 1 operands, got 2 inputs"):
        call("einsum", av, bv, equation="ijk")


def test_lstm_gru_types_and_single_step() -> None:
    rng = np.random.default_rng(5)
    seq, batch, inp, hid = 1, 2, 3, 4
    x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    w = rng.standard_normal((1, 3 * hid, inp)).astype(np.float32)
    r = rng.standard_normal((1, 3 * hid, hid)).astype(np.float32)
    b = np.zeros((1, 6 * hid), np.float32)
    h0 = np.zeros((1, batch, hid), np.float32)
    vs = [_var(a.shape, name=f"v{i}") for i, a in enumerate((x, w, r, b, h0))]
    gru = call("nn.gru", *vs, hidden_size=hid)
    assert gru.type == TupleType(
        (TensorType((seq, 1, batch, hid), "float32"), TensorType((1, batch, hid), "float32"))
    )
    y, yh = _run(gru, vs, [x, w, r, b, h0])
    z = 1 / (1 + np.exp(-(x[0] @ w[0, :hid].T)))
    hh = np.tanh(x[0] @ w[0, 2 * hid :].T)
    np.testing.assert_allclose(yh[0], (1 - z) * hh, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(y[0], yh)
    with pytest.raises(IRError, match="W must have shape \\(2, 12, 3\\)"):
        call("nn.gru", *vs, hidden_size=hid, direction="bidirectional")
    with pytest.raises(IRError, match="unknown activation 'Swish'"):
        call("nn.gru", *vs, hidden_size=hid, activations=("Swish", "Tanh"))


def test_max_pool_argmax_and_lp_pool() -> None:
    x = np.array([[[[1, 5, 2], [7, 3, 7], [0, 9, 4]]]], dtype=np.float32)
    xv = _var(x.shape)
    arg = call("nn.max_pool_argmax", xv, pool_size=(2, 2))
    assert arg.type == TensorType((1, 1, 2, 2), "int64")
    (idx,) = _run(arg, [xv], [x])
    np.testing.assert_array_equal(idx[0, 0], [[3, 5], [7, 7]])  # first maximum wins ties
    col = call("nn.max_pool_argmax", xv, pool_size=(2, 2), storage_order=1)
    (idx,) = _run(col, [xv], [x])
    np.testing.assert_array_equal(idx[0, 0], [[1, 7], [5, 5]])
    with pytest.raises(IRError, match="storage_order must be 0"):
        call("nn.max_pool_argmax", xv, pool_size=(2, 2), storage_order=2)
    lp = call("nn.lp_pool", xv, pool_size=(3, 3), p=2.0)
    (y,) = _run(lp, [xv], [x])
    np.testing.assert_allclose(y[0, 0, 0, 0], np.sqrt((x**2).sum()), rtol=1e-6)


def test_resize_type_errors_and_integer_nearest() -> None:
    xv = _var((1, 1, 4, 4), "int32")
    with pytest.raises(IRError, match="linear resize needs a floating point tensor"):
        call("image.resize", xv, sizes=(1, 1, 8, 8), method="linear")
    with pytest.raises(IRError, match="sizes \\[8, 8\\] must give one positive size per axis"):
        call("image.resize", xv, sizes=(8, 8))
    with pytest.raises(IRError, match="unknown nearest_mode 'up'"):
        call("image.resize", xv, sizes=(1, 1, 8, 8), nearest_mode="up")
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    down = call("image.resize", xv, sizes=(1, 1, 2, 2), coordinate_transformation_mode="asymmetric")
    (y,) = _run(down, [xv], [x])
    np.testing.assert_array_equal(y[0, 0], [[0, 2], [8, 10]])


def test_antialias_resize_smooths_downsampling() -> None:
    x = np.tile(np.array([0.0, 1.0], np.float32), 8).reshape(1, 1, 1, 16)
    xv = _var(x.shape)
    mode = {"method": "linear", "coordinate_transformation_mode": "asymmetric"}
    plain = call("image.resize", xv, sizes=(1, 1, 1, 4), **mode)
    smooth = call("image.resize", xv, sizes=(1, 1, 1, 4), antialias=True, **mode)
    (p,) = _run(plain, [xv], [x])
    (s,) = _run(smooth, [xv], [x])
    np.testing.assert_array_equal(p, 0.0)  # point samples all hit the 0 stripes
    # a filter 8 pixels wide averages the stripes (the first output sees clamped edges)
    np.testing.assert_allclose(s[..., 1:], 0.5, atol=0.07)


def test_rnn_sequence_lens_type_rule() -> None:
    vs = [
        _var((3, 2, 4), name="x"),
        _var((1, 5, 4), name="w"),
        _var((1, 5, 5), name="r"),
        _var((1, 10), name="b"),
        _var((1, 2, 5), name="h"),
    ]
    out = call("nn.rnn", *vs, _var((2,), "int32", "lens"), hidden_size=5)
    assert out.type.fields[0] == TensorType((3, 1, 2, 5), "float32")  # type: ignore[attr-defined]
    with pytest.raises(IRError, match="sequence_lens must be int32 or int64 of shape \\(2,\\)"):
        call("nn.rnn", *vs, _var((3,), "int32", "lens"), hidden_size=5)
    with pytest.raises(IRError, match="unknown direction 'up'"):
        call("nn.rnn", *vs, hidden_size=5, direction="up")
