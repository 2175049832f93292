"""Scan handlers against onnxruntime: TopK (K as attribute and as input, ties) and CumSum
(exclusive, reverse, negative axis)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import random_input

from .conftest import Compare, make_model

RNG = np.random.default_rng(11)
I64 = np.int64


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "float64"])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize(("axis", "k"), [(-1, 3), (0, 2), (1, 0), (1, 6)])
def test_topk(compare_ort: Compare, dtype: str, largest: int, axis: int, k: int) -> None:
    x = RNG.integers(0, 4, (3, 6)).astype(dtype)  # ties: lower index first, as onnxruntime
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    model = make_model(
        [node], {"x": (dtype, x.shape)}, ["v", "i"], {"k": np.array([k], I64)}, opset=11
    )
    compare_ort(model, {"x": x})


def test_topk_opset1_attribute(compare_ort: Compare) -> None:
    x = RNG.standard_normal((2, 7)).astype(np.float32)
    node = helper.make_node("TopK", ["x"], ["v", "i"], k=3)
    compare_ort(make_model([node], {"x": ("float32", x.shape)}, ["v", "i"], opset=9), {"x": x})


@pytest.mark.parametrize("dtype", ["float32", "int64", "float64"])
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [0, -1])
def test_cumsum(compare_ort: Compare, dtype: str, exclusive: int, reverse: int, axis: int) -> None:
    x = random_input((3, 5), dtype, seed=0, int_range=(-5, 6))
    node = helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse)
    model = make_model([node], {"x": (dtype, x.shape)}, ["y"], {"a": np.array(axis, I64)}, opset=14)
    compare_ort(model, {"x": x}, rtol=1e-6, atol=1e-6)
