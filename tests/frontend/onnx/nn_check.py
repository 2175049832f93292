"""Shared helper of the nn-family frontend tests: a one-node model run in onnxruntime and
in ember (importer + reference evaluator), compared with per-dtype tolerances."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnxruntime
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ember.frontend import from_onnx
from ember.ir import evaluate

TOL = {"float16": (5e-3, 5e-3), "float32": (1e-4, 1e-5), "float64": (1e-10, 1e-12)}


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, tuple[str, tuple[int, ...]]],
    outputs: list[str],
    initializers: dict[str, np.ndarray],
    opset: int,
) -> onnx.ModelProto:
    """A model of ``nodes`` with typed inputs, untyped outputs and initializers."""
    graph = helper.make_graph(
        nodes,
        "nn_test",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(d)), s)
            for n, (d, s) in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        [numpy_helper.from_array(v, n) for n, v in initializers.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)  # onnxruntime may lag behind onnx
    return model


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime (CPU) outputs."""
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return [np.asarray(v) for v in sess.run(None, feeds)]


def oracle(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], reference: bool = False
) -> list[np.ndarray]:
    """onnxruntime's outputs; the ONNX reference implementation's when ``reference`` or
    where ORT has no kernel for the dtype (e.g. float64 Conv)."""
    try:
        if not reference:
            return ort_run(model, feeds)
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
    model = make_model([node], spec, outs, initializers=params, opset=opset)
    mod, ember_params = from_onnx(model)
    got = evaluate(mod, inputs, ember_params)
    want = oracle(model, inputs, reference)
    dtype = next(iter(inputs.values())).dtype.name
    rtol, atol = tol or TOL.get(dtype, (0, 0))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)
    return got


def rand(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
