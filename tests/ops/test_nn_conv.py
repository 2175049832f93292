"""nn.conv, nn.conv_transpose, nn.dense and nn.matmul lowered to loop IR, run by the loop-IR
interpreter and compared with the graph-IR numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import CompileError
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS


def _inputs(func: Function, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        ty = p.type
        if ty.dtype.startswith("float"):
            out.append(rng.standard_normal(ty.shape).astype(ty.dtype))
        else:
            out.append(rng.integers(-5, 6, ty.shape).astype(ty.dtype))
    return out


def run_group(func: Function, seed: int = 0, tol: float = 1e-5) -> str:
    """Lower ``func``, interpret it, compare with evaluate; return the loop IR text."""
    xs = _inputs(func, seed)
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    return str(prim)


def group(params: list[Var], body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def v(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var(name, TensorType(shape, dtype))


@pytest.mark.parametrize(
    ("shape", "wshape", "attrs"),
    [
        ((2, 3, 10), (4, 3, 3), {}),
        ((1, 4, 11), (6, 2, 3), {"strides": (2,), "padding": (1, 2), "groups": 2}),
        ((1, 2, 9), (2, 2, 2), {"dilation": (3,), "padding": (2, 0)}),
        ((1, 3, 7, 6), (5, 3, 3, 2), {"padding": (1, 0, 1, 1)}),
        ((2, 4, 8, 8), (4, 1, 3, 3), {"groups": 4, "strides": (2, 1), "padding": (1, 1, 1, 1)}),
        ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"padding": (1, 0, 1, 0, 1, 0), "strides": (1, 2, 1)}),
        ((1, 2, 4, 5, 5), (2, 1, 3, 1, 2), {"groups": 2, "dilation": (1, 1, 2)}),
    ],
)
def test_conv_1d_2d_3d(shape, wshape, attrs):
    x, w = v("x", shape), v("w", wshape)
    run_group(group([x, w], call("nn.conv", x, w, **attrs)))


def test_conv_bias_relu_epilogue_is_one_parallel_vectorised_nest():
    x, w, b = v("x", (1, 8, 12, 12)), v("w", (8, 8, 3, 3)), v("b", (8, 1, 1))
    body = call("relu", call("add", call("nn.conv", x, w, padding=(1, 1, 1, 1)), b))
    text = run_group(group([x, w, b], body))
    assert "parallel" in text and "vectorized" in text
    assert text.count("for ") <= 12


def test_conv_float64():
    x, w = v("x", (1, 2, 6, 6), "float64"), v("w", (3, 2, 3, 3), "float64")
    run_group(group([x, w], call("nn.conv", x, w, strides=(2, 2))), tol=1e-12)


def test_conv_half_refused_with_clear_error():
    x, w = v("x", (1, 2, 6, 6), "float16"), v("w", (3, 2, 3, 3), "float16")
    with pytest.raises(CompileError, match=r"nn.conv: float16"):
        lower_group(group([x, w], call("nn.conv", x, w)), "k")


@pytest.mark.parametrize(
    ("shape", "wshape", "attrs"),
    [
        ((1, 3, 5), (3, 2, 3), {}),
        ((2, 2, 4), (2, 3, 3), {"strides": (2,), "padding": (1, 0), "output_padding": (1,)}),
        ((1, 4, 4, 3), (4, 2, 3, 3), {"strides": (2, 3), "groups": 2, "padding": (1, 0, 1, 2)}),
        ((1, 2, 3, 4), (2, 2, 2, 2), {"dilation": (2, 1), "strides": (1, 2)}),
        ((1, 2, 3, 2, 3), (2, 1, 2, 2, 2), {"strides": (2, 1, 2), "padding": (0, 1, 0, 1, 0, 1)}),
        ((1, 2, 4, 4), (2, 1, 5, 5), {"padding": (5, 5, 5, 5), "strides": (3, 3)}),
    ],
)
def test_conv_transpose(shape, wshape, attrs):
    x, w = v("x", shape), v("w", wshape)
    run_group(group([x, w], call("nn.conv_transpose", x, w, **attrs)))


@pytest.mark.parametrize(("shape", "n"), [((5, 16), 7), ((2, 3, 9), 4), ((12,), 3)])
def test_dense(shape, n):
    x, w = v("x", shape), v("w", (n, shape[-1]))
    run_group(group([x, w], call("nn.dense", x, w)))


def test_dense_with_bias_epilogue():
    x, w, b = v("x", (64, 32)), v("w", (48, 32)), v("b", (48,))
    text = run_group(group([x, w, b], call("add", call("nn.dense", x, w), b)))
    assert "parallel" in text


@pytest.mark.parametrize(
    ("ashape", "bshape"),
    [
        ((4, 5), (5, 3)),
        ((6,), (6, 2)),
        ((3, 6), (6,)),
        ((7,), (7,)),
        ((2, 3, 4), (4, 5)),
        ((4,), (2, 4, 3)),
        ((2, 1, 3, 4), (3, 4, 2)),
        ((1, 3, 4), (5, 1, 4, 2)),
        ((2, 3, 4), (4,)),
    ],
)
def test_matmul_numpy_semantics(ashape, bshape):
    a, b = v("a", ashape), v("b", bshape)
    run_group(group([a, b], call("nn.matmul", a, b)))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_matmul_dtypes(dtype):
    a, b = v("a", (3, 5), dtype), v("b", (5, 4), dtype)
    run_group(group([a, b], call("nn.matmul", a, b)), tol=1e-12)


def test_matmul_large_is_parallel_and_vectorised():
    a, b = v("a", (64, 64)), v("b", (64, 64))
    text = str(lower_group(group([a, b], call("nn.matmul", a, b)), "k"))
    assert "parallel" in text and "vectorized" in text


def test_dense_with_constant_weight_legalizes_to_matmul_of_transposed_weight():
    from ember.ir import Constant, const
    from ember.ops.registry import find_legalizer

    rng = np.random.default_rng(3)
    x = v("x", (2, 3, 8))
    wdata = rng.standard_normal((5, 8)).astype("float32")
    node = call("nn.dense", x, const(wdata), name="fc")
    out = find_legalizer("nn.dense")(node)
    assert out.op.name == "nn.matmul" and out.name == "fc"
    assert isinstance(out.args[1], Constant)
    np.testing.assert_array_equal(out.args[1].data, wdata.T)
    xs = [rng.standard_normal((2, 3, 8)).astype("float32")]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-6)
    w = v("w", (5, 8))
    dynamic = call("nn.dense", x, w)
    assert find_legalizer("nn.dense")(dynamic) is dynamic


@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("out_ch", [8, 12, 19])
def test_short_rows_use_channel_blocks_with_guards(epilogue, out_ch):
    x, w, b = v("x", (1, 5, 6, 5)), v("w", (out_ch, 5, 3, 3)), v("b", (out_ch, 1, 1))
    conv = call("nn.conv", x, w, padding=(1, 1, 1, 1))
    body = call("relu", call("add", conv, b)) if epilogue else conv
    params = [x, w, b] if epilogue else [x, w]
    text = run_group(group(params, body))
    assert "unrolled(8)" in text


def test_long_rows_keep_one_channel_per_row():
    x, w = v("x", (1, 4, 4, 12)), v("w", (16, 4, 3, 3))
    text = run_group(group([x, w], call("nn.conv", x, w, padding=(1, 1, 1, 1))))
    assert "unrolled" not in text
