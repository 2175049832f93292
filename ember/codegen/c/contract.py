"""Fused multiply-add in reductions only: ``acc = acc + a * b`` -> one ``fma``.

C is compiled with ``-std=c11`` (no a*b+c contraction anywhere): contracting the float steps
between dynamically quantized layers moves values across rounding points and breaks int8
agreement with onnxruntime. A store whose value is its own target plus a product is a
reduction update (convolutions, matrix products); only those are written as
``EMBER_FMA_F32(a, b, acc)``, a macro that is ``fmaf`` when the compiler targets a CPU with
fused multiply-add (``__FMA__`` on x86, always on AArch64) and ``a * b + acc`` otherwise (a
libm ``fmaf`` call in a vector loop would be slower than no contraction). Measured single
thread (Zen 4, CPU time): see ``ember.ops.nn_schedule_tiles.TILES``.
"""

from __future__ import annotations

from ember.codegen.c.file_context import FileContext
from ember.tir.expr import Add, BufferLoad, Mul, PrimExpr
from ember.tir.stmt import BufferStore

#: C names of the contraction macros by dtype.
FMA_MACROS: dict[str, str] = {"float32": "EMBER_FMA_F32", "float64": "EMBER_FMA_F64"}

_MACRO_TEXT = """#if defined(__FMA__) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
#define EMBER_FMA_F32(a, b, c) fmaf((a), (b), (c))
#define EMBER_FMA_F64(a, b, c) fma((a), (b), (c))
#else
#define EMBER_FMA_F32(a, b, c) ((a) * (b) + (c))
#define EMBER_FMA_F64(a, b, c) ((a) * (b) + (c))
#endif"""


def reduction_product(store: BufferStore) -> tuple[PrimExpr, PrimExpr, BufferLoad] | None:
    """``(a, b, load)`` when ``store`` is ``buf[i] = buf[j] + a * b`` on a float32/float64
    scalar (either operand order of the sum), else None; the caller checks that ``i`` and
    ``j`` print as the same offset."""
    value = store.value
    if value.dtype not in FMA_MACROS or not isinstance(value, Add):
        return None
    for acc, prod in ((value.a, value.b), (value.b, value.a)):
        if isinstance(prod, Mul) and isinstance(acc, BufferLoad) and acc.buffer is store.buffer:
            return prod.a, prod.b, acc
    return None


def fma_macro(ctx: FileContext, dtype: str) -> str:
    """The contraction macro for ``dtype``, defined once in the file's prelude."""
    ctx.helpers.setdefault("0a_ember_fma", _MACRO_TEXT)
    return FMA_MACROS[dtype]
