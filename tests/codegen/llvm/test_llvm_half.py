"""float16/bfloat16 in the LLVM back ends: refused with a CompileError that names the way
out (the ``c`` target stores half types and computes in float32; see test_c_half.py)."""

from __future__ import annotations

import pytest

import ember
from ember.errors import CompileError
from ember.ir import Function, IRModule, TensorType, Var, call


@pytest.mark.parametrize("kind", ["llvm", "llvmjit"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_models_are_refused_with_a_clear_error(kind: str, dtype: str) -> None:
    x = Var("x", TensorType((4, 8), dtype))
    mod = IRModule.from_expr(Function((x,), call("add", x, x)))
    with pytest.raises(CompileError, match=rf"dtype {dtype} is not supported by the LLVM back end"):
        ember.build(mod, target=kind)
