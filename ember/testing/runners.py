"""Testing helpers: compile an ONNX model with ember, run it, compare with onnxruntime.

onnxruntime is a test-only dependency; it is imported inside the functions that need it.

Example::

    outs = run_onnx_compiled(model, {"x": x})
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember.runtime.device import cpu

#: onnx may stamp models with an IR version newer than onnxruntime reads; the opsets we use
#: are all readable at this version.
ORT_MAX_IR_VERSION = 10


def compile_onnx(model: Any, shape: Mapping[str, Sequence[int]] | None = None, **build_kw: Any):
    """Import ``model`` (ModelProto, path or bytes) and build it; return the ArtifactSet."""
    from ember.driver import build
    from ember.frontend import from_onnx

    mod, params = from_onnx(model, shape=shape)
    return build(mod, params=params, **build_kw)


def run_artifacts(artifacts: Any, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Load an ArtifactSet through the loading process and run it once with the graph executor."""
    from ember.executor import GraphExecutor
    from ember.runtime.loading import load_artifacts

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
    import onnx
    import onnxruntime as ort

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
