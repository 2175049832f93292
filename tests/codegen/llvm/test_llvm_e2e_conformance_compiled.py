"""tests/e2e/test_conformance_compiled.py for the ``llvm`` and ``llvmjit`` targets, with the same
tolerances (``llvm_build.e2e_suite``: every ``ember.build`` of a test targets the kind),
run-time index checks (gather/scatter) included. The cases with float16, bfloat16, float8
or float4 tensors pass as they do for ``c`` (ember.codegen.llvm.narrow): no known failures
beyond the C suite's own."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

globals().update(e2e_suite("test_conformance_compiled"))

pytestmark = pytest.mark.cc
