"""Ops with value-dependent output shapes: folded when inputs are static, else refused."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.errors import FrontendError
from ember.frontend.onnx import from_onnx

from .conftest import make_model

X = np.array([[1, 0, 3], [0, 5, 1]], np.float32)


def test_nonzero_of_a_constant_folds(run_ember):
    node = helper.make_node("NonZero", ["c"], ["y"], name="nz")
    model = make_model([node], {}, ["y"], {"c": X}, opset=13)
    np.testing.assert_array_equal(run_ember(model, {})[0], np.array(np.nonzero(X)))


def test_unique_outputs_fold(run_ember):
    node = helper.make_node("Unique", ["c"], ["y", "idx", "inv", "cnt"], sorted=1)
    model = make_model([node], {}, ["y", "idx", "inv", "cnt"], {"c": X}, opset=11)
    y, idx, inv, cnt = run_ember(model, {})
    want = np.unique(X, return_index=True, return_inverse=True, return_counts=True)
    for got, expected in zip((y, idx, inv, cnt), want, strict=True):
        np.testing.assert_array_equal(got, expected.reshape(-1))


@pytest.mark.parametrize("op", ["NonZero", "Unique"])
def test_runtime_input_names_node_and_input(op):
    node = helper.make_node(op, ["x"], ["y"], name="dyn")
    model = make_model([node], {"x": ("float32", (2, 3))}, ["y"], opset=13)
    with pytest.raises(FrontendError, match=r"'dyn'.*X \(its values set the output shape"):
        from_onnx(model)
