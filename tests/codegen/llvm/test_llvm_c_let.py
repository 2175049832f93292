"""The C back end's test_c_let.py, run against the LLVM back end unchanged (see
``llvm_build.c_suite``: a private copy of the module whose ``compile_funcs`` uses LLVM)."""

from __future__ import annotations

import pytest
from llvm_build import c_suite

# checks libmvec symbols in the C back end's library
C_ONLY = {"test_lets_run_like_the_interpreter"}

globals().update(c_suite("test_c_let", C_ONLY))

pytestmark = pytest.mark.cc
