"""Det compiled and compared with onnxruntime: batches, odd sizes, singular matrices."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import build_model, run_onnx_compiled, run_onnxruntime

pytestmark = pytest.mark.cc


def test_det_batched_odd_sizes_and_singular() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 5, 5)).astype(np.float32)
    a[0, 1, 2] = a[0, 1, 0] * 2.0  # singular: two dependent rows
    a[1, 2, :, 0] = 0.0  # singular: a zero column (no pivot)
    b = rng.standard_normal((7, 7)).astype(np.float32)
    nodes = [helper.make_node("Det", ["a"], ["ya"]), helper.make_node("Det", ["b"], ["yb"])]
    spec = {"a": ("float32", a.shape), "b": ("float32", b.shape)}
    model = build_model(nodes, spec, ["ya", "yb"], opset=21)  # onnxruntime's Det stops at 21
    feeds = {"a": a, "b": b}
    got = run_onnx_compiled(model, feeds)
    want = run_onnxruntime(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4)
    assert got[0].shape == (2, 3) and got[1].shape == ()


def test_det_float64_against_numpy() -> None:
    b = np.random.default_rng(4).standard_normal((2, 6, 6))
    model = build_model([helper.make_node("Det", ["b"], ["y"])], {"b": ("float64", b.shape)}, ["y"])
    got = run_onnx_compiled(model, {"b": b})[0]
    np.testing.assert_allclose(got, np.linalg.det(b), rtol=1e-10)
