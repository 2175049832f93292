"""Expressions and stores of narrow float dtypes in LLVM IR, as the C back end does them
(``ember.codegen.c.expr_gen``: ``half_expr``/``half_bits``).

A value is a float32 holding a number the narrow type represents: a load widens the stored
bits, arithmetic and intrinsics compute in float32 and round once, a cast converts (from
float64 and the integers through the double, rounded once for float16), a Min/Max/Select
picks one of its operands. A store of a loaded value copies its bits (NaN payloads stay), a
store of a value computed in float32 or cast from a wider type converts once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.codegen.llvm import narrow
from ember.codegen.llvm.ir_text import FunctionWriter, Val
from ember.errors import CompileError
from ember.tir import dtype as dt
from ember.tir.expr import (
    Add,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    Max,
    Min,
    Mod,
    Mul,
    PrimExpr,
    Sub,
)

#: expressions of a narrow dtype whose float32 result is rounded to the type.
ROUNDED = (Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Call)


def _f32(dtype: str) -> str:
    return dt.with_lanes("float32", dt.lanes_of(dtype))


class NarrowLowering:
    """The narrow-float half of ExprLowering (which provides the plain lowering)."""

    w: FunctionWriter
    where: str

    if TYPE_CHECKING:  # provided by ExprLowering and MemoryLowering

        def expr(self, e: PrimExpr) -> Val:
            """The LLVM value of ``e``."""

        def plain_expr(self, e: PrimExpr) -> Val:
            """``e`` lowered without narrow rounding."""

        def cast(self, v: Val, src: str, dst: str) -> Val:
            """A C conversion."""

        def load(self, e: BufferLoad) -> Val:
            """The raw loaded value."""

    def narrow_expr(self, e: PrimExpr) -> Val:
        """The float value of ``e``, of a narrow dtype."""
        if isinstance(e, BufferLoad):
            return narrow.to_f32(self.w, e.dtype, self.load(e))
        if isinstance(e, Cast):
            return self.cast(self.expr(e.value), e.value.dtype, e.dtype)
        if isinstance(e, ROUNDED):
            return narrow.round_f32(self.w, e.dtype, self.unrounded(e))
        return self.plain_expr(e)  # Var, constants, Select, Min/Max, Let: already exact

    def unrounded(self, e: PrimExpr) -> Val:
        """``e`` computed in float32, before any rounding to its narrow dtype."""
        if isinstance(e, Call) and e.kind == "intrin":
            return self.plain_expr(Call(_f32(e.dtype), e.op, e.args, e.kind))
        if isinstance(e, (*ROUNDED, Min, Max)):
            return self.plain_expr(e)
        return self.expr(e)

    def narrow_bits(self, e: PrimExpr) -> Val:
        """The bits to store for ``e`` (of a narrow dtype): a copied load keeps its bits,
        a value computed in float32 or cast from a non-narrow type converts once."""
        if isinstance(e, BufferLoad):
            return self.load(e)
        if isinstance(e, Cast) and not narrow.is_narrow(e.value.dtype):
            return self.narrow_from(self.expr(e.value), e.value.dtype, e.dtype, bits=True)
        return narrow.from_f32(self.w, e.dtype, self.unrounded(e))

    def narrow_cast(self, v: Val, src: str, dst: str) -> Val:
        """C conversion of ``v`` from ``src`` to ``dst``, one of them narrow."""
        if not narrow.is_narrow(dst):  # a narrow value is a float32
            return self.cast(v, _f32(src), dst)
        if dt.element_of(src) == dt.element_of(dst):
            return v
        if narrow.is_narrow(src):
            return narrow.round_f32(self.w, dst, v)
        return self.narrow_from(v, src, dst, bits=False)

    def narrow_from(self, v: Val, src: str, dst: str, bits: bool) -> Val:
        """``v`` (float32, float64, an integer or bool) converted to the narrow ``dst``:
        its bits, or its float value. Integers convert through the double, as C does."""
        if dt.is_integral(src) or dt.is_bool(src):
            wide = dt.with_lanes("float64", dt.lanes_of(src))
            v, src = self.cast(v, src, wide), wide
        elif not dt.is_float(src):
            raise CompileError(f"LLVM codegen{self.where}: cannot cast {src} to {dst}")
        if dt.element_of(src) == "float64":
            v = narrow.f64_to_f32(self.w, dst, v)
        code = narrow.from_f32(self.w, dst, v)
        return code if bits else narrow.to_f32(self.w, dst, code)
