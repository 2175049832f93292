"""Unary elementwise computes, lowered to loop IR and interpreted, against the graph-IR
numpy references (``ember.ir.evaluate``)."""

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.elemwise import LIBM_EXTERNS
from ember.tir.expr import Div

SHAPES = [(7,), (2, 3, 5)]


def _group(params, body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def check(func: Function, xs: list[np.ndarray], rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Lower ``func``, interpret it and compare every output with the reference."""
    refs = evaluate(Function(func.params, func.body), xs)
    refs = refs if isinstance(refs, list | tuple) else [refs]
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, [np.array(x, order="C") for x in xs] + outs, externs=LIBM_EXTERNS)
    for out, ref in zip(outs, refs, strict=True):
        assert out.dtype == ref.dtype
        np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)


def _unary(op: str, x: np.ndarray, **attrs) -> None:
    v = Var("x", TensorType(x.shape, x.dtype.name))
    check(_group([v], call(op, v, **attrs)), [x])


def _data(shape, dtype="float32", seed=0, scale=3.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale).astype(dtype)


FLOAT_OPS = [
    "sigmoid", "tanh", "softplus", "softsign", "hard_swish", "erf", "exp", "floor", "ceil",
    "round", "sin", "cos", "tan", "atan", "sinh", "cosh", "asinh", "relu", "negative", "abs",
    "sign",
]  # fmt: skip


@pytest.mark.parametrize("op", FLOAT_OPS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_unary(op, dtype):
    for k, shape in enumerate(SHAPES):
        _unary(op, _data(shape, dtype, seed=k))


@pytest.mark.parametrize("op", ["sqrt", "log", "reciprocal", "acosh"])
def test_positive_domain(op):
    x = np.abs(_data((4, 5))) + 1.0
    _unary(op, x)


@pytest.mark.parametrize("op", ["asin", "acos", "atanh"])
def test_unit_domain(op):
    x = np.random.default_rng(2).uniform(-0.99, 0.99, (3, 7)).astype("float32")
    _unary(op, x)


def test_nan_and_edge_values_propagate():
    x = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, 2.5, -2.5, 0.5, 1.5], "float32")
    for op in ["relu", "sign", "abs", "round", "floor", "sigmoid", "exp", "softplus", "tanh"]:
        _unary(op, x)
    _unary("clip", x, a_min=-1.0, a_max=1.0)
    _unary("leaky_relu", x, alpha=0.1)


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("leaky_relu", {"alpha": 0.2}),
        ("elu", {"alpha": 0.7}),
        ("selu", {}),
        ("selu", {"alpha": 1.5, "gamma": 2.0}),
        ("hard_sigmoid", {"alpha": 0.3, "beta": 0.4}),
        ("gelu", {"approximate": "none"}),
        ("gelu", {"approximate": "tanh"}),
        ("clip", {"a_min": -0.5, "a_max": 0.75}),
        ("clip", {"a_min": None, "a_max": 0.75}),
        ("clip", {"a_min": 2.0, "a_max": 1.0}),
    ],
)
def test_unary_with_attrs(op, attrs):
    _unary(op, _data((3, 8)), **attrs)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_unary(dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    x = rng.integers(max(info.min, -100), min(info.max, 100), (4, 6)).astype(dtype)
    ops = ["relu", "abs", "sign", "bitwise_not"] + (["negative"] if info.min < 0 else [])
    for op in ops:
        _unary(op, x)
    _unary("clip", x, a_min=-3.5, a_max=40.2)
    _unary("clip", x, a_min=-1000.0, a_max=None)


def test_predicates_and_logical_not():
    x = np.array([[np.nan, np.inf, -np.inf, 1.0]], "float32")
    _unary("isnan", x)
    _unary("isinf", x)
    _unary("isinf", x, detect_positive=False)
    _unary("isinf", x, detect_negative=False)
    _unary("logical_not", np.array([True, False, True]))


@pytest.mark.parametrize(
    "src,dst",
    [
        ("float32", "int32"),
        ("float32", "int8"),
        ("float32", "uint8"),
        ("float32", "bool"),
        ("float64", "float32"),
        ("float32", "float64"),
        ("int64", "int32"),
        ("int32", "float32"),
        ("bool", "float32"),
        ("bool", "int64"),
        ("int32", "bool"),
        ("uint8", "int64"),
        ("float32", "float16"),
        ("float16", "float32"),
        ("float16", "int32"),
    ],
)
def test_cast(src, dst):
    rng = np.random.default_rng(5)
    if src == "bool":
        x = rng.integers(0, 2, (3, 5)).astype(bool)
    elif src.startswith(("int", "uint")):
        x = rng.integers(0 if src.startswith("u") else -50, 100, (3, 5)).astype(src)
    else:
        x = (rng.standard_normal((3, 5)) * 20).astype(src)
        x[0, 0] = 0.0
        x[0, 1] = 2.5
        x[0, 2] = -2.5
    _unary("cast", x, dtype=dst)


def test_fused_chain_of_unaries_is_one_loop_nest():
    v = Var("x", TensorType((4, 16), "float32"))
    body = call("tanh", call("cast", call("relu", v), dtype="float64"))
    func = _group([v], call("cast", body, dtype="float32"))
    check(func, [_data((4, 16))])
    text = str(lower_group(func, "k"))
    assert text.count("for ") <= 2


@pytest.mark.parametrize("op", ["sigmoid", "tanh", "exp", "relu", "gelu", "round", "abs"])
def test_half_precision_computes_in_float32(op):
    x = _data((3, 5), "float16", seed=6)
    _unary(op, x)
    v = Var("x", TensorType(x.shape, "float16"))
    check(_group([v], call("sum", call(op, v), axes=(1,), keepdims=False)), [x], rtol=2e-3)


def test_hard_swish_multiplies_by_its_slope() -> None:
    # x * clip(x / 6 + 0.5, 0, 1) computed with x * (1/6): no divide in the kernel (a vector
    # divide in every conv epilogue), equal to the reference at and around the knees
    x = np.array([-4.0, -3.0, -2.9, -1e-3, 0.0, 1.0, 2.99, 3.0, 3.01, 7.5], "float32")
    v = Var("x", TensorType(x.shape, "float32"))
    func = _group([v], call("hard_swish", v))
    check(func, [x])
    found: list[object] = []
    tir.post_order_visit(lower_group(func, "kernel").body, found.append)
    assert not [n for n in found if isinstance(n, Div)]
