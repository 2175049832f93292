"""The C back end's float4/float8_e8m0fnu and sub-byte integer tests
(tests/codegen/test_c_subbyte.py) on ``llvm``: every code, bit-exact against ml_dtypes."""

from __future__ import annotations

from llvm_build import c_copy

globals().update(c_copy("test_c_subbyte", "llvm"))
