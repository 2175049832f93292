"""Compiled math and logic ops against onnxruntime: unary functions and activations, Clip,
Cast, broadcasting arithmetic, comparisons, logic, bitwise ops, Mod, Pow, PRelu and Where.

Each test builds one ONNX model holding many nodes (one C compile per model), compiles it
for the C target with ``ember.build`` and compares every output with onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from onnx import helper

from ember.testing import (
    assert_matches_onnxruntime,
    build_model,
    elem_type,
    random_input,
    run_onnx_compiled,
)

pytestmark = pytest.mark.cc


def unary_suite(ops: Sequence[tuple[str, dict]], x: np.ndarray, opset: int = 20) -> Any:
    """One model applying every (op, attrs) to ``x``; outputs y0, y1, ..."""
    nodes = [helper.make_node(op, ["x"], [f"y{k}"], **attrs) for k, (op, attrs) in enumerate(ops)]
    return build_model(nodes, {"x": x}, [f"y{k}" for k in range(len(ops))], opset=opset)


def rand(shape: tuple[int, ...], dtype: str, seed: int, scale: float = 3.0) -> np.ndarray:
    """Seeded inputs: normal * ``scale`` for floats, integers in [-20, 20) ([0, 20) unsigned)."""
    return random_input(shape, dtype, seed, scale=scale, int_range=(-20, 20))


FLOAT_UNARY = [
    ("Relu", {}), ("Sigmoid", {}), ("Tanh", {}), ("Softplus", {}), ("Softsign", {}),
    ("HardSwish", {}), ("Erf", {}), ("Exp", {}), ("Floor", {}), ("Ceil", {}), ("Round", {}),
    ("Sign", {}), ("Neg", {}), ("Abs", {}), ("Sin", {}), ("Cos", {}), ("Tan", {}),
    ("Atan", {}), ("Sinh", {}), ("Cosh", {}), ("Asinh", {}),
    ("LeakyRelu", {"alpha": 0.3}), ("Elu", {"alpha": 0.7}), ("Selu", {}),
    ("HardSigmoid", {"alpha": 0.25, "beta": 0.4}), ("Gelu", {}),
    ("Gelu", {"approximate": "tanh"}), ("IsNaN", {}), ("IsInf", {}),
]  # fmt: skip


@pytest.mark.parametrize("shape", [(2, 3, 17), (5,)])
def test_float_unary_ops(shape):
    x = rand(shape, "float32", 0)
    x.flat[0] = 2.5  # a rounding tie
    assert_matches_onnxruntime(unary_suite(FLOAT_UNARY, x), {"x": x}, rtol=2e-5, atol=1e-6)


def test_float64_unary_and_domain_ops():
    x = rand((3, 8), "float64", 1)
    ops = [("Sigmoid", {}), ("Tanh", {}), ("Exp", {}), ("Relu", {}), ("Round", {}), ("Abs", {})]
    assert_matches_onnxruntime(unary_suite(ops, x), {"x": x}, rtol=1e-10, atol=1e-12)
    pos = np.abs(rand((4, 9), "float32", 2)) + 1.0
    ops = [("Sqrt", {}), ("Log", {}), ("Reciprocal", {}), ("Acosh", {})]
    assert_matches_onnxruntime(unary_suite(ops, pos), {"x": pos}, rtol=1e-5, atol=1e-6)
    unit = np.random.default_rng(3).uniform(-0.95, 0.95, (4, 9)).astype("float32")
    ops = [("Asin", {}), ("Acos", {}), ("Atanh", {})]
    assert_matches_onnxruntime(unary_suite(ops, unit), {"x": unit}, rtol=1e-5, atol=1e-6)


def test_nan_and_infinities_through_compiled_kernels():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5, 1.5, 0.5, -0.5], "float32")
    ops = [("Relu", {}), ("Abs", {}), ("IsNaN", {}), ("IsInf", {}), ("Floor", {}), ("Round", {})]
    ops.append(("IsInf", {"detect_negative": 0}))
    assert_matches_onnxruntime(unary_suite(ops, x, opset=13), {"x": x})
    bounds = helper.make_tensor("lo", 1, (), [-1.0]), helper.make_tensor("hi", 1, (), [1.0])
    nodes = [
        helper.make_node("Constant", [], ["lo"], value=bounds[0]),
        helper.make_node("Constant", [], ["hi"], value=bounds[1]),
        helper.make_node("Clip", ["x", "lo", "hi"], ["y"]),
    ]
    assert_matches_onnxruntime(build_model(nodes, {"x": x}, ["y"], opset=13), {"x": x})


@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
def test_integer_unary_ops(dtype):
    x = rand((3, 7), dtype, 4)
    ops = [("Relu", {}), ("Abs", {}), ("Neg", {}), ("Sign", {})]
    if dtype != "int8":
        ops.append(("BitwiseNot", {}))
    assert_matches_onnxruntime(unary_suite(ops, x, opset=18), {"x": x})


CASTS = ["float32", "float64", "int8", "uint8", "int32", "int64", "bool"]


@pytest.mark.parametrize("src", ["float32", "int64", "bool", "uint8"])
def test_cast_to_every_dtype(src):
    x = rand((4, 6), src, 5, scale=20.0)
    if src == "float32":
        x[0, :3] = [0.0, -2.5, 2.5]
    ops = [("Cast", {"to": elem_type(d)}) for d in CASTS if d != src]
    assert_matches_onnxruntime(unary_suite(ops, x, opset=13), {"x": x})


def binary_suite(ops: Sequence[str], a: np.ndarray, b: np.ndarray, opset: int = 18) -> Any:
    nodes = [helper.make_node(op, ["a", "b"], [f"y{k}"]) for k, op in enumerate(ops)]
    return build_model(nodes, {"a": a, "b": b}, [f"y{k}" for k in range(len(ops))], opset=opset)


ARITH = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((2, 2), (2, 2))])
def test_broadcast_arithmetic_and_comparisons(dtype, shapes):
    a, b = rand(shapes[0], dtype, 6), rand(shapes[1], dtype, 7)
    if dtype.startswith("int"):
        b = np.where(b == 0, 3, b).astype(dtype)  # ORT traps on integer division by zero
    else:
        a.flat[0] = b.flat[0] = np.nan
    ops = ARITH + COMPARE + (["Mod"] if dtype.startswith("int") else [])
    assert_matches_onnxruntime(binary_suite(ops, a, b), {"a": a, "b": b}, rtol=1e-6, atol=1e-6)


def test_logic_bitwise_shift_mod_pow_prelu_where():
    p, q = rand((3, 4), "bool", 8), rand((4,), "bool", 9)
    nodes = [
        helper.make_node(op, ["a", "b"], [f"y{k}"]) for k, op in enumerate(["And", "Or", "Xor"])
    ]
    nodes.append(helper.make_node("Not", ["a"], ["y3"]))
    model = build_model(nodes, {"a": p, "b": q}, ["y0", "y1", "y2", "y3"], opset=13)
    assert_matches_onnxruntime(model, {"a": p, "b": q})

    ia, ib = rand((3, 5), "int32", 10) * 37, rand((5,), "int32", 11) * 11
    ops = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]
    assert_matches_onnxruntime(binary_suite(ops, ia, ib), {"a": ia, "b": ib})

    ua = rand((2, 6), "uint8", 12) * 9
    ub = np.array([0, 1, 2, 3, 5, 7], "uint8")
    nodes = [
        helper.make_node("BitShift", ["a", "b"], ["y0"], direction="LEFT"),
        helper.make_node("BitShift", ["a", "b"], ["y1"], direction="RIGHT"),
    ]
    assert_matches_onnxruntime(build_model(nodes, {"a": ua, "b": ub}, ["y0", "y1"], opset=13),
                               {"a": ua, "b": ub})  # fmt: skip

    sa = np.array([-8, -1, 5, -(2**31), 16, -3, 7], "int32")
    sb = np.array([1, 1, 2, 1, 31, 32, -1], "int32")
    fc = np.array([np.inf, -np.inf, 1.0, -1.0, -6.0, 5.5, -5.5], "float32")
    fd = np.array([2.0, 2.0, np.inf, np.inf, 3.0, -2.0, 0.0], "float32")
    nodes = [
        helper.make_node("BitShift", ["a", "b"], ["y0"], direction="LEFT"),
        helper.make_node("BitShift", ["a", "b"], ["y1"], direction="RIGHT"),
        helper.make_node("Mod", ["c", "d"], ["y2"], fmod=0),
    ]
    feeds = {"a": sa, "b": sb, "c": fc, "d": fd}
    model = build_model(nodes, feeds, ["y0", "y1", "y2"], opset=13)
    # onnxruntime has neither signed BitShift nor float Mod with fmod=0: numpy is the spec
    with np.errstate(all="ignore"):
        want = [np.left_shift(sa, sb), np.right_shift(sa, sb), np.mod(fc, fd)]
    for got, ref in zip(run_onnx_compiled(model, feeds), want, strict=True):
        np.testing.assert_array_equal(got, ref)

    fa, fb = rand((3, 4), "float32", 13), rand((4,), "float32", 14)
    fa[0] = [np.inf, -np.inf, 1.0, -6.0]
    fb[:] = [2.0, 2.0, np.inf, -3.0]
    nodes = [
        helper.make_node("Mod", ["a", "b"], ["y0"], fmod=1),
        helper.make_node("Pow", ["c", "b"], ["y1"]),
        helper.make_node("PRelu", ["a", "b"], ["y2"]),
        helper.make_node("Greater", ["a", "b"], ["cond"]),
        helper.make_node("Where", ["cond", "a", "b"], ["y3"]),
    ]
    c = np.abs(fa) + 0.5
    feeds = {"a": fa, "b": fb, "c": c}
    model = build_model(nodes, feeds, ["y0", "y1", "y2", "y3"], opset=16)
    assert_matches_onnxruntime(model, feeds, rtol=1e-5, atol=1e-6)
