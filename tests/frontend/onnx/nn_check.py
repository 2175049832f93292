"""Shared helper of the nn-family frontend tests: a one-node model run in onnxruntime and
in ember (importer + reference evaluator), compared with per-dtype tolerances."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.testing import build_model, run_onnx_reference, run_onnxruntime
from ember.testing import random_input as rand  # noqa: F401  (re-exported to the nn tests)

TOL = {"float16": (5e-3, 5e-3), "float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)}


def oracle(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], reference: bool = False
) -> list[np.ndarray]:
    """onnxruntime's outputs; the ONNX reference implementation's when ``reference`` or
    where ORT has no kernel for the dtype (e.g. float64 Conv)."""
    try:
        if not reference:
            return run_onnxruntime(model, feeds)
    except Exception as err:  # ORT raises its own NotImplemented type
        if "NOT_IMPLEMENTED" not in str(err):
            raise
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


def check_node(
    op: str,
    inputs: dict[str, np.ndarray],
    attrs: dict[str, Any] | None = None,
    params: dict[str, np.ndarray] | None = None,
    opset: int = 17,
    outputs: int = 1,
    input_order: list[str] | None = None,
    tol: tuple[float, float] | None = None,
    reference: bool = False,
) -> list[np.ndarray]:
    """One-node model: ``inputs`` are graph inputs, ``params`` initializers; compare to ORT."""
    params = params or {}
    names = input_order or [*inputs, *params]
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    spec = {n: (v.dtype.name, v.shape) for n, v in inputs.items()}
    model = build_model([node], spec, outs, initializers=params, opset=opset)
    got = run_onnx_reference(model, inputs)
    want = oracle(model, inputs, reference)
    dtype = next(iter(inputs.values())).dtype.name
    rtol, atol = tol or TOL.get(dtype, (0, 0))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
    return got
