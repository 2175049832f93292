"""Binary handlers against onnxruntime: broadcasting arithmetic, Pow, PRelu, variadic ops,
comparisons, logic and Where, Mod, bitwise ops and shifts."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from .conftest import RNG, TOL, Compare, make_model, rand

BROADCAST_SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize(("sa", "sb"), BROADCAST_SHAPES)
def test_arithmetic(compare_ort: Compare, op: str, dtype: str, sa: tuple, sb: tuple) -> None:
    a = rand(sa, dtype, -20, 20)
    b = rand(sb, dtype, 1, 7)
    if dtype.startswith("int"):
        b = b * np.where(RNG.integers(0, 2, sb) == 0, 1, -1).astype(dtype)
    node = helper.make_node(op, ["a", "b"], ["y"])
    model = make_model([node], {"a": (dtype, sa), "b": (dtype, sb)}, ["y"], opset=14)
    rtol, atol = TOL.get(dtype, (0, 0))
    compare_ort(model, {"a": a, "b": b}, rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("base", "exp"),
    [
        ("float32", "float32"),
        ("float32", "int64"),
        ("float64", "float32"),
        ("int32", "int32"),
        ("int64", "int64"),
        ("int32", "float32"),
    ],
)
def test_pow(compare_ort: Compare, base: str, exp: str) -> None:
    a = rand((3, 4), base, 1, 5)
    b = rand((4,), exp, 0, 3)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    model = make_model([node], {"a": (base, a.shape), "b": (exp, b.shape)}, ["y"], opset=15)
    compare_ort(model, {"a": a, "b": b})


def test_prelu(compare_ort: Compare) -> None:
    x = rand((2, 3, 4, 4), "float32")
    for slope_shape in [(3, 1, 1), (4,), (1,)]:
        slope = rand(slope_shape, "float32", 0, 1)
        node = helper.make_node("PRelu", ["x", "s"], ["y"])
        model = make_model([node], {"x": ("float32", x.shape)}, ["y"], {"s": slope}, opset=16)
        compare_ort(model, {"x": x})


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_variadic(compare_ort: Compare, op: str, count: int) -> None:
    shapes = [(2, 3, 4), (3, 1), (4,)][:count]
    feeds = {f"x{i}": rand(s, "float32") for i, s in enumerate(shapes)}
    node = helper.make_node(op, list(feeds), ["y"])
    inputs = {n: ("float32", v.shape) for n, v in feeds.items()}
    compare_ort(make_model([node], inputs, ["y"], opset=13), feeds)


def test_variadic_integers(compare_ort: Compare) -> None:
    feeds = {"a": rand((3, 4), "int32", -9, 9), "b": rand((4,), "int32", -9, 9)}
    for op in ("Max", "Min"):
        node = helper.make_node(op, ["a", "b"], ["y"])
        inputs = {n: ("int32", v.shape) for n, v in feeds.items()}
        compare_ort(make_model([node], inputs, ["y"], opset=13), feeds)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_comparisons(compare_ort: Compare, op: str, dtype: str) -> None:
    a = rand((3, 4), dtype, -3, 3)
    b = rand((4,), dtype, -3, 3)
    node = helper.make_node(op, ["a", "b"], ["y"])
    model = make_model([node], {"a": (dtype, a.shape), "b": (dtype, b.shape)}, ["y"], opset=16)
    compare_ort(model, {"a": a, "b": b})


def test_logic_and_where(compare_ort: Compare) -> None:
    a, b = rand((2, 3), "bool"), rand((3,), "bool")
    for op in ("And", "Or", "Xor"):
        node = helper.make_node(op, ["a", "b"], ["y"])
        model = make_model([node], {"a": ("bool", a.shape), "b": ("bool", b.shape)}, ["y"])
        compare_ort(model, {"a": a, "b": b})
    node = helper.make_node("Not", ["a"], ["y"])
    compare_ort(make_model([node], {"a": ("bool", a.shape)}, ["y"]), {"a": a})
    for dtype in ("float32", "int64", "int32"):
        x, y = rand((2, 3), dtype), rand((1, 3), dtype)
        node = helper.make_node("Where", ["c", "x", "y"], ["z"])
        inputs = {"c": ("bool", (2, 1)), "x": (dtype, x.shape), "y": (dtype, y.shape)}
        feeds = {"c": rand((2, 1), "bool"), "x": x, "y": y}
        compare_ort(make_model([node], inputs, ["z"], opset=16), feeds)


@pytest.mark.parametrize(("dtype", "fmod"), [("int32", 0), ("int64", 1), ("float32", 1)])
def test_mod(compare_ort: Compare, dtype: str, fmod: int) -> None:
    a = rand((3, 4), dtype, -20, 20)
    b = rand((4,), dtype, 1, 6) * np.array([1, -1, 1, -1], dtype)
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)
    model = make_model([node], {"a": (dtype, a.shape), "b": (dtype, b.shape)}, ["y"], opset=13)
    compare_ort(model, {"a": a, "b": b})


def test_bitwise_and_shift(compare_ort: Compare) -> None:
    a = RNG.integers(0, 256, (3, 4)).astype(np.uint8)
    b = RNG.integers(0, 8, (4,)).astype(np.uint8)
    inputs = {"a": ("uint8", a.shape), "b": ("uint8", b.shape)}
    for op, attrs in [("BitwiseAnd", {}), ("BitwiseOr", {}), ("BitwiseXor", {})]:
        node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
        compare_ort(make_model([node], inputs, ["y"], opset=18), {"a": a, "b": b})
    for direction in ("LEFT", "RIGHT"):
        node = helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)
        compare_ort(make_model([node], inputs, ["y"], opset=18), {"a": a, "b": b})
    node = helper.make_node("BitwiseNot", ["a"], ["y"])
    compare_ort(make_model([node], {"a": ("uint8", a.shape)}, ["y"], opset=18), {"a": a})
