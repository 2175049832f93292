"""The C back end's test_c_run.py, run against the LLVM back end unchanged (see
``llvm_build.c_suite``: a private copy of the module whose ``compile_funcs`` uses LLVM)."""

from __future__ import annotations

import pytest
from llvm_build import c_suite

globals().update(c_suite("test_c_run"))

pytestmark = pytest.mark.cc
