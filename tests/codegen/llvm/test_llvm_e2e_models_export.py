"""tests/e2e/test_models.py's exported-library test for ``llvm`` (an ``llvmjit`` set
cannot be exported: tests/codegen/llvm/test_llvm_target.py checks that error)."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

globals().update(
    e2e_suite("test_models", ("llvm",), only={"test_exported_real_model_runs_the_same"})
)

pytestmark = pytest.mark.cc
