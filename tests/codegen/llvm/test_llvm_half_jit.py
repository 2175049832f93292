"""The C back end's float16/bfloat16/float8 tests (tests/codegen/test_c_half.py) on
``llvmjit``: conversions and arithmetic bit-exact against numpy/ml_dtypes."""

from __future__ import annotations

from llvm_build import c_copy

globals().update(c_copy("test_c_half", "llvmjit"))
