"""Fixtures for ONNX frontend tests: build a model, run it in onnxruntime and in ember.

Usage in a test::

    def test_relu(onnx_model, compare_ort):
        model = onnx_model([helper.make_node("Relu", ["x"], ["y"])],
                           inputs={"x": ("float32", (2, 3))}, outputs=["y"], opset=14)
        compare_ort(model, {"x": np.random.default_rng(0).standard_normal((2, 3), "float32")})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest

from ember.testing import build_model, run_onnx_reference, run_onnxruntime

ModelFactory = Callable[..., onnx.ModelProto]


#: the helpers of ember.testing under the names these tests use.
make_model = build_model
ort_run = run_onnxruntime
ember_run = run_onnx_reference


def assert_close(
    got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float = 1e-5, atol: float = 1e-6
) -> None:
    """Same count, shapes and dtypes, and values within tolerance (exact for ints/bools
    unless ``atol`` allows at least one unit)."""
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.shape == w.shape, f"output {i}: shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype} != {w.dtype}"
        if np.issubdtype(w.dtype, np.floating) or atol >= 1:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


@pytest.fixture
def onnx_model() -> ModelFactory:
    """Factory building an onnx.ModelProto (``ember.testing.build_model``)."""
    return make_model


@pytest.fixture
def compare_ort() -> Callable[..., list[np.ndarray]]:
    """``compare_ort(model, feeds, rtol=, atol=, shape=)``: ember vs onnxruntime."""

    def run(
        model: onnx.ModelProto,
        feeds: Mapping[str, np.ndarray],
        rtol: float = 1e-5,
        atol: float = 1e-6,
        shape: Mapping[str, Any] | None = None,
    ) -> list[np.ndarray]:
        want = ort_run(model, feeds)
        got = ember_run(model, feeds, shape=shape)
        assert_close(got, want, rtol=rtol, atol=atol)
        return got

    return run


@pytest.fixture
def run_ember() -> Callable[..., list[np.ndarray]]:
    """``run_ember(model, feeds, shape=)``: ember's outputs only (importer + evaluator)."""
    return ember_run
