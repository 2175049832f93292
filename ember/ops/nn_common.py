"""Helpers shared by the nn op implementations: dtype checks, reduction identities and the
window arithmetic of convolutions and pools (all sizes are static Python ints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember import tir
from ember.errors import CompileError
from ember.support.dtypes import dtype_info
from ember.tir import PrimExpr
from ember.tir import dtype as dt


def check_dtype(op: str, dtype: str) -> None:
    """Raise CompileError when ``op`` cannot be generated for ``dtype`` (half types)."""
    if dtype_info(dtype).c_type is None:
        raise CompileError(
            f"{op}: {dtype} is not supported by the C code generator yet; convert the "
            "model's inputs and weights to float32 before compiling (the LLVM backend will "
            "bring half types)"
        )


def lowest(dtype: str) -> PrimExpr:
    """The smallest value of ``dtype`` (-inf for floats): the identity of max."""
    if dt.is_float(dtype):
        return tir.const(float("-inf"), dtype)
    bits = dt.bits_of(dtype)
    return tir.const(-(1 << (bits - 1)) if dt.is_int(dtype) else 0, dtype)


def ceil_div(a: Any, b: int) -> Any:
    """ceil(a / b) for an integer expression ``a`` (any sign) and a positive int ``b``."""
    if b == 1:
        return a
    return (a + (b - 1)) // b


def product(values: Sequence[int]) -> int:
    """The product of ints (1 for none)."""
    out = 1
    for v in values:
        out *= int(v)
    return out


def prod_expr(values: Sequence[PrimExpr]) -> PrimExpr | None:
    """The product of expressions, or None for an empty list."""
    out: PrimExpr | None = None
    for v in values:
        out = v if out is None else out * v
    return out


def sum_expr(values: Sequence[PrimExpr]) -> PrimExpr | None:
    """The sum of expressions, or None for an empty list."""
    out: PrimExpr | None = None
    for v in values:
        out = v if out is None else out + v
    return out
