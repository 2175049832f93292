"""tests/e2e/test_models.py for the ``llvm`` and ``llvmjit`` targets, with the same
tolerances (``llvm_build.e2e_suite``: every ``ember.build`` of a test targets the kind):
the small models, the generators, and MobileNetV2-96 (slow); the other large models run
for ``c`` only, to keep the suite's time in bounds. Exporting a real model runs for
``llvm`` in test_llvm_e2e_models_export.py (``llvmjit`` cannot be exported)."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

from ember.examples.models import make_model
from ember.testing import assert_matches_onnxruntime

EXPORT = "test_exported_real_model_runs_the_same"  # llvmjit refuses export: llvm only
globals().update(e2e_suite("test_models", skip={"test_model_matches_onnxruntime", EXPORT}))

pytestmark = pytest.mark.cc


@pytest.mark.slow
def test_mobilenet_v2_96_matches_onnxruntime() -> None:
    case = make_model("mobilenet_v2_96")
    assert_matches_onnxruntime(case.model, case.inputs, rtol=1e-4, atol=3e-5)
