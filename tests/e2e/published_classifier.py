"""The checks every seeded example classifier of a published architecture takes: registered,
valid ONNX (full shape checks), deterministic, the published parameter count, and a
non-degenerate 1000-way output in onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx

from ember.examples.models import MODELS, make_model
from ember.testing import run_onnxruntime


def check_published_classifier(name: str, params: float, tolerance: float) -> onnx.ModelProto:
    """Check the registered example ``name`` (``params`` published parameters, within the
    fraction ``tolerance``); return its model for the family's own checks."""
    assert name in MODELS.names()
    case = make_model(name)
    onnx.checker.check_model(case.model, full_check=True)
    assert case.model.SerializeToString() == make_model(name).model.SerializeToString()
    count = sum(int(np.prod(t.dims)) for t in case.model.graph.initializer)
    assert abs(count - params) < tolerance * params
    (out,) = run_onnxruntime(case.model, case.inputs)
    assert out.shape == (1, 1000) and np.all(np.isfinite(out)) and float(np.std(out)) > 1e-2
    return case.model
