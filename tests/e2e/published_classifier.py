"""The checks every seeded example takes (registered, valid ONNX with full shape checks,
deterministic), and those an example classifier of a published architecture takes
besides: the published parameter count and a non-degenerate 1000-way output in
onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx

from ember.examples.models import MODELS, ModelCase, make_model
from ember.testing import run_onnxruntime


def check_registered_example(name: str) -> ModelCase:
    """The registered example ``name``, checked: valid ONNX (full shape checks) and
    deterministic (the same bytes from a second build)."""
    assert name in MODELS.names()
    case = make_model(name)
    onnx.checker.check_model(case.model, full_check=True)
    assert case.model.SerializeToString() == make_model(name).model.SerializeToString()
    return case


def check_published_classifier(name: str, params: float, tolerance: float) -> onnx.ModelProto:
    """Check the registered example ``name`` (``params`` published parameters, within the
    fraction ``tolerance``); return its model for the family's own checks."""
    case = check_registered_example(name)
    count = sum(int(np.prod(t.dims)) for t in case.model.graph.initializer)
    assert abs(count - params) < tolerance * params
    (out,) = run_onnxruntime(case.model, case.inputs)
    assert out.shape == (1, 1000) and np.all(np.isfinite(out)) and float(np.std(out)) > 1e-2
    return case.model
