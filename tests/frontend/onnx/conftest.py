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
from onnx import helper, numpy_helper

from ember.frontend import from_onnx
from ember.ir import evaluate

ModelFactory = Callable[..., onnx.ModelProto]


def _elem(dtype: str) -> int:
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def make_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, tuple[str, Sequence[int | str | None] | None]],
    outputs: Sequence[str],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    name: str = "test_graph",
    extra_opsets: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """A model from nodes; ``inputs`` maps name -> (dtype, shape); outputs are untyped."""
    graph = helper.make_graph(
        list(nodes),
        name,
        [helper.make_tensor_value_info(n, _elem(dt), shp) for n, (dt, shp) in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()],
    )
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = min(model.ir_version, 10)  # onnxruntime may lag behind onnx
    return model


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of onnxruntime (CPU) for ``feeds``."""
    import onnxruntime

    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return [np.asarray(v) for v in sess.run(None, dict(feeds))]


def ember_run(
    model: onnx.ModelProto | bytes | str,
    feeds: Mapping[str, np.ndarray],
    shape: Mapping[str, Any] | None = None,
) -> list[np.ndarray]:
    """Outputs of ember's importer + reference evaluator for ``feeds``."""
    mod, params = from_onnx(model, shape=shape)
    return evaluate(mod, dict(feeds), params)


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
    """Factory building an onnx.ModelProto (see ``make_model``)."""
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
