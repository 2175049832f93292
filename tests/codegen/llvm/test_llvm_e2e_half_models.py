"""tests/e2e/test_half_models.py for the ``llvm`` and ``llvmjit`` targets: float16 models
(SqueezeNet, MobileNetV2; ResNet-50, BERT and the full MobileNetV2 slow) against
onnxruntime with the same tolerances (``llvm_build.e2e_suite``)."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

globals().update(e2e_suite("test_half_models"))

pytestmark = pytest.mark.cc
