"""tests/e2e/test_half_models.py for the ``llvm`` and ``llvmjit`` targets: float16 models
(SqueezeNet, MobileNetV2; ResNet-50, BERT and the full MobileNetV2 slow) against
onnxruntime with the same tolerances (``llvm_build.e2e_suite``). The AOT executor run is
slow here (about 3 minutes a kind under load)."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

_TESTS = e2e_suite("test_half_models")
_AOT = "test_float16_model_runs_the_same_under_the_aot_executor"
_TESTS[_AOT] = pytest.mark.slow(_TESTS[_AOT])
globals().update(_TESTS)

pytestmark = pytest.mark.cc
