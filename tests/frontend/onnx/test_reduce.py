"""Reduction handlers against onnxruntime: Reduce* (axes as attribute and as input,
keepdims, noop_with_empty_axes) and ArgMax/ArgMin (select_last_index)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from onnx import helper

from .conftest import ember_run, make_model

Compare = Callable[..., list[np.ndarray]]
RNG = np.random.default_rng(11)
I64 = np.int64

REDUCE_OPS = [
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSum",
    "ReduceLogSumExp",
]


def rand(shape: tuple[int, ...], dtype: str, positive: bool = False) -> np.ndarray:
    if dtype.startswith("int"):
        return RNG.integers(1 if positive else -5, 6, shape).astype(dtype)
    x = RNG.uniform(0.5, 1.5, shape) if positive else RNG.standard_normal(shape)
    return x.astype(dtype)


def reduce_model(op: str, x: np.ndarray, axes: list[int] | None, opset: int, **attrs: Any) -> Any:
    """A reduction node with axes given the way ``opset`` expects them."""
    axes_as_input = opset >= (13 if op == "ReduceSum" else 18)
    inits = {}
    names = ["x"]
    if axes is not None and axes_as_input:
        inits["axes"] = np.array(axes, I64)
        names.append("axes")
    elif axes is not None:
        attrs["axes"] = axes
    node = helper.make_node(op, names, ["y"], **attrs)
    return make_model([node], {"x": (x.dtype.name, x.shape)}, ["y"], inits, opset=opset)


def tolerance(dtype: str) -> tuple[float, float]:
    return {"float16": (3e-3, 3e-3), "float64": (1e-9, 1e-12)}.get(dtype, (2e-5, 1e-6))


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize(("axes", "keepdims"), [([1], 1), ([0, 2], 0), ([-1], 1), (None, 0)])
def test_reduce_float32(
    compare_ort: Compare, op: str, opset: int, axes: list | None, keepdims: int
) -> None:
    x = rand((3, 4, 5), "float32", positive=op == "ReduceLogSum")
    model = reduce_model(op, x, axes, opset, keepdims=keepdims)
    compare_ort(model, {"x": x}, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("dtype", ["float64", "float16", "int32", "int64"])
def test_reduce_dtypes(compare_ort: Compare, op: str, dtype: str) -> None:
    x = rand((4, 6), dtype, positive=op in ("ReduceLogSum", "ReduceProd"))
    rtol, atol = tolerance(dtype)
    if dtype.startswith("int") and op in ("ReduceLogSum", "ReduceLogSumExp"):
        # the float result is truncated back to an integer: a value within one ulp of a
        # whole number (5.9999994 vs 6.0000001) lands on either side depending on the
        # order of the float32 additions, so the engines may differ by exactly 1
        atol = 1
    compare_ort(reduce_model(op, x, [1], 18, keepdims=0), {"x": x}, rtol=rtol, atol=atol)


def test_reduce_noop_and_empty_axes(compare_ort: Compare) -> None:
    x = rand((2, 3), "float32")
    model = reduce_model("ReduceSum", x, None, 13, noop_with_empty_axes=1)
    got = compare_ort(model, {"x": x})
    np.testing.assert_array_equal(got[0], x)
    model = reduce_model("ReduceMax", x, [], 18, keepdims=1)
    compare_ort(model, {"x": x})


def test_log_sum_exp_is_stable() -> None:
    x = np.array([[1000.0, 1000.0], [-np.inf, -np.inf]], np.float32)
    got = ember_run(reduce_model("ReduceLogSumExp", x, [1], 18, keepdims=0), {"x": x})[0]
    np.testing.assert_allclose(got, [1000.0 + np.log(2.0), -np.inf])


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_reductions(compare_ort: Compare, op: str, axis: int, keepdims: int, last: int) -> None:
    x = RNG.integers(0, 3, (4, 5)).astype(np.float32)  # many ties
    node = helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=keepdims, select_last_index=last)
    compare_ort(make_model([node], {"x": ("float32", x.shape)}, ["y"], opset=13), {"x": x})
