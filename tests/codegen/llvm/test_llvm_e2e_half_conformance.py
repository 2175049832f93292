"""tests/e2e/test_half_conformance.py and test_conformance_lowp.py for the ``llvm`` and
``llvmjit`` targets: the float16/bfloat16 conformance cases (the models onnx's cases make
float16) and the narrow Attention cases, compiled (``llvm_build.e2e_suite``)."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

globals().update(e2e_suite("test_half_conformance"))
globals().update(e2e_suite("test_conformance_lowp"))

pytestmark = pytest.mark.cc
