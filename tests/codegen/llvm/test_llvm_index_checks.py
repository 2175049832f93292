"""tests/security/test_index_checks.py for the ``llvm`` and ``llvmjit`` targets: run-time
index checks fail the kernel with the same messages as the C back end's."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

globals().update(e2e_suite("test_index_checks", folder="security"))

pytestmark = pytest.mark.cc
