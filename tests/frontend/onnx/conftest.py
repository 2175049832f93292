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
from onnx import helper

from ember.testing import build_model, run_onnx_reference, run_onnxruntime

ModelFactory = Callable[..., onnx.ModelProto]
#: the type of the compare_ort fixture.
Compare = Callable[..., list[np.ndarray]]
#: one generator per test process: tests draw their inputs from it in turn.
RNG = np.random.default_rng(42)
#: (rtol, atol) of float comparisons by dtype.
TOL = {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}


def rand(shape: tuple[int, ...], dtype: str, low: float = -3.0, high: float = 3.0) -> np.ndarray:
    """Random values of ``dtype`` (integers in [low, high], bools uniformly)."""
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        lo = 0 if dtype.startswith("uint") else int(low)
        return RNG.integers(lo, int(high) + 1, shape).astype(dtype)
    return RNG.uniform(low, high, shape).astype(dtype)


#: the helpers of ember.testing under the names these tests use.
make_model = build_model
ort_run = run_onnxruntime
ember_run = run_onnx_reference


def one(
    op: str,
    x: np.ndarray,
    consts: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    outputs: int = 1,
    **attrs: Any,
) -> Any:
    """A single-node model on input ``x`` with constant extra inputs (initializers).

    An empty-string key in ``consts`` stands for an omitted optional input.
    """
    names = ["x"] + [("" if k.startswith("_") else k) for k in (consts or {})]
    inits = {k: v for k, v in (consts or {}).items() if not k.startswith("_")}
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, **attrs)
    return make_model([node], {"x": (x.dtype.name, x.shape)}, outs, inits, opset=opset)


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
