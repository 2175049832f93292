"""Run an ONNX model three ways: compiled by ember (build -> load_artifacts ->
GraphExecutor), through ember's importer and reference evaluator, and in onnxruntime; and
compare the first with the last.

onnxruntime is a test-only dependency (``pip install ember[test]``): it is imported inside
:func:`run_onnxruntime`, which says how to install it when it is missing.

Example::

    outs = run_onnx_compiled(model, {"x": x})
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ember import ArtifactSet, GraphExecutor, cpu, load_artifacts
from ember.driver import build
from ember.errors import EmberError
from ember.frontend import from_onnx
from ember.ir import evaluate
from ember.testing.onnx_models import ORT_MAX_IR_VERSION


def compile_onnx(
    model: Any, shape: Mapping[str, Sequence[int]] | None = None, **build_kw: Any
) -> ArtifactSet:
    """Import ``model`` (ModelProto, path or bytes) and build it; return the ArtifactSet."""
    mod, params = from_onnx(model, shape=shape)
    return build(mod, params=params, **build_kw)


def run_artifacts(artifacts: Any, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Load an ArtifactSet through the loading process and run it once with the graph executor."""
    dev = cpu(0)
    factory = load_artifacts(artifacts, dev)
    ge = GraphExecutor(factory["default"](dev))
    for name, value in inputs.items():
        ge.set_input(name, value)
    ge.run()
    return [ge.get_output(i).numpy() for i in range(ge.get_num_outputs())]


def run_onnx_compiled(
    model: Any, inputs: Mapping[str, np.ndarray], **build_kw: Any
) -> list[np.ndarray]:
    """Compile ``model`` for the C target and run it on ``inputs``."""
    shapes = {k: tuple(np.shape(v)) for k, v in inputs.items()}
    return run_artifacts(compile_onnx(model, shape=shapes, **build_kw), inputs)


def run_onnxruntime(model: Any, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run ``model`` with onnxruntime's CPU provider (the numerical reference)."""
    try:
        import onnxruntime as ort  # optional: a test-only dependency
    except ImportError as err:
        raise EmberError(
            "ember.testing.run_onnxruntime needs onnxruntime, a test-only dependency; "
            "install it with `pip install onnxruntime` (or `pip install ember[test]`)"
        ) from err
    if isinstance(model, onnx.ModelProto) and model.ir_version > ORT_MAX_IR_VERSION:
        clamped = onnx.ModelProto()
        clamped.CopyFrom(model)
        clamped.ir_version = ORT_MAX_IR_VERSION
        model = clamped
    data = model if isinstance(model, bytes) else getattr(model, "SerializeToString", None)
    blob = data() if callable(data) else data
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(
        blob if blob is not None else str(model), opts, providers=["CPUExecutionProvider"]
    )
    return [np.asarray(o) for o in sess.run(None, dict(inputs))]


def run_onnx_reference(
    model: Any, inputs: Mapping[str, np.ndarray], shape: Mapping[str, Any] | None = None
) -> list[np.ndarray]:
    """Outputs of ember's importer and reference evaluator (no code generation)."""
    mod, params = from_onnx(model, shape=shape)
    return evaluate(mod, dict(inputs), params)


def assert_matches_onnxruntime(
    model: Any,
    inputs: Mapping[str, np.ndarray],
    rtol: float = 1e-4,
    atol: float = 1e-5,
    **build_kw: Any,
) -> list[np.ndarray]:
    """Compile and run ``model`` with ember and check every output against onnxruntime."""
    ours = run_onnx_compiled(model, inputs, **build_kw)
    ref = run_onnxruntime(model, inputs)
    assert len(ours) == len(ref), f"ember gave {len(ours)} outputs, onnxruntime {len(ref)}"
    for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
        assert a.shape == b.shape, f"output {i}: shape {a.shape} != onnxruntime's {b.shape}"
        assert a.dtype == b.dtype, f"output {i}: dtype {a.dtype} != onnxruntime's {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i}")
    return ours
