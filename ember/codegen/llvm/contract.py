"""Fused multiply-add in reduction updates only, as the C back end contracts.

``buf[i] = buf[i] + a * b`` on float32/float64 (scalar or vector) becomes ``fmul
contract`` and ``fadd contract``, which LLVM fuses into one FMA where the CPU has it; every
other float operation carries no fast-math flag. This is ``ember.codegen.c.contract``'s
policy: contracting elsewhere moves values across rounding points (the inverse DFT's
butterflies differed from the C back end by 2.4e-6; the float steps between dynamically
quantized layers moved int8 results).
"""

from __future__ import annotations

from ember.codegen.llvm.expr import ExprLowering
from ember.codegen.llvm.ir_text import Val
from ember.tir import dtype as dt
from ember.tir.expr import Add, BufferLoad, Mul, PrimExpr
from ember.tir.stmt import BufferStore
from ember.tir.structural import structural_equal

#: element types whose reduction updates are contracted (the C back end's FMA_MACROS)
CONTRACTED = ("float32", "float64")


def reduction_update(store: BufferStore) -> tuple[PrimExpr, PrimExpr, BufferLoad] | None:
    """``(a, b, load)`` when ``store`` is ``buf[i] = buf[i] + a * b`` (either operand order
    of the sum, the same indices), else None."""
    value = store.value
    if dt.element_of(value.dtype) not in CONTRACTED or not isinstance(value, Add):
        return None
    for acc, prod in ((value.a, value.b), (value.b, value.a)):
        if (
            isinstance(prod, Mul)
            and isinstance(acc, BufferLoad)
            and acc.buffer is store.buffer
            and structural_equal(acc.indices, store.indices)
        ):
            return prod.a, prod.b, acc
    return None


def contracted_update(lower: ExprLowering, a: PrimExpr, b: PrimExpr, acc: BufferLoad) -> Val:
    """``acc + a * b`` with ``contract`` on both operations (one FMA)."""
    x, y, z = lower.expr(a), lower.expr(b), lower.expr(acc)
    product = lower.w.inst(x.ty, f"fmul contract {x.typed()}, {y.ref}")
    return lower.w.inst(x.ty, f"fadd contract {product.typed()}, {z.ref}")
