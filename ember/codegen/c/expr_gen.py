"""Expression code generation for C: literals, operators, math and extern calls.

``ExprCodegen`` prints loop-IR expressions as C with minimal parentheses (C precedence
levels 3-16). Floor division/modulo of operands that the enclosing loop ranges prove
non-negative print as ``/`` and ``%``; otherwise, and for ``min``/``max``, small inline
helpers are added to the file's ``FileContext``, which also collects extern prototypes
and static workspace pools for the prelude of one output file.
"""

from __future__ import annotations

import math

from ember.codegen.c import half, subbyte
from ember.codegen.c.abi import c_string, c_type, dtype_suffix
from ember.codegen.c.checks import CheckMixin, divisor_guard
from ember.codegen.c.f32_depthwise import (
    DEPTHWISE_HELPER_KEY,
    DEPTHWISE_KERNEL_NAMES,
    F32_DEPTHWISE_C,
)
from ember.codegen.c.f32_kernels import F32_KERNEL_NAMES, F32_KERNELS_C
from ember.codegen.c.f32_kernels import HELPER_KEY as F32_HELPER_KEY
from ember.codegen.c.f32_lane_groups import (
    LANE_GROUP_HELPER_KEY,
    LANE_GROUP_KERNEL_C,
    LANE_GROUP_KERNEL_NAMES,
)
from ember.codegen.c.f32_lanes import LANES_HELPER_KEY, LANES_KERNEL_C, LANES_KERNEL_NAMES
from ember.codegen.c.f32_narrow import F32_NARROW_C, NARROW_HELPER_KEY, NARROW_KERNEL_NAMES
from ember.codegen.c.f32_winograd import WINOGRAD_C, WINOGRAD_HELPER_KEY, WINOGRAD_KERNEL_NAMES
from ember.codegen.c.file_context import FileContext
from ember.codegen.c.int8_dwconv_add import DW_ADD_KERNEL_NAMES, DW_ADD_KERNELS_C
from ember.codegen.c.int8_dwconv_add import HELPER_KEY as DW_ADD_HELPER_KEY
from ember.codegen.c.int8_kernels import HELPER_KEY as INT8_HELPER_KEY
from ember.codegen.c.int8_kernels import INT8_KERNEL_NAMES, INT8_KERNELS_C
from ember.codegen.c.packed_call import PackedCallMixin
from ember.codegen.c.random import HELPER_KEY as RANDOM_HELPER_KEY
from ember.codegen.c.random import RANDOM_KERNEL_NAMES, random_kernels_c
from ember.codegen.c.vector import VectorMixin, vector_type
from ember.errors import CompileError
from ember.support.dtypes import numpy_dtype
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    StringImm,
    Sub,
    Var,
)
from ember.tir.functor import post_order_visit
from ember.tir.op import CHECK_KIND, CPACKED_KIND, PACKED_KIND, REINTERPRET_KIND
from ember.tir.simplify import Simplifier
from ember.tir.stmt import Allocate, PrimFunc

_FLOAT_FN = {
    "exp": "exp",
    "log": "log",
    "sqrt": "sqrt",
    "tanh": "tanh",
    "erf": "erf",
    "fabs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "rint",
    "trunc": "trunc",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "asin": "asin",
    "acos": "acos",
    "atan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "asinh": "asinh",
    "acosh": "acosh",
    "atanh": "atanh",
    "expm1": "expm1",
    "log1p": "log1p",
    "pow": "pow",
    "fmod": "fmod",
}
_BINARY: dict[type, tuple[str, int]] = {
    Add: ("+", 12),
    Sub: ("-", 12),
    Mul: ("*", 13),
    Div: ("/", 13),
    Mod: ("%", 13),
}
_COMPARE: dict[type, tuple[str, int]] = {
    EQ: ("==", 9),
    NE: ("!=", 9),
    LT: ("<", 10),
    LE: ("<=", 10),
    GT: (">", 10),
    GE: (">=", 10),
}


class ExprCodegen(VectorMixin, CheckMixin, PackedCallMixin):
    """The expression half of CodeGenC (needs ``func``, ``ctx``, ``where``, ``bounds``)."""

    func: PrimFunc
    ctx: FileContext
    where: str
    bounds: Simplifier
    #: inside an ``omp simd`` loop (set by CodeGenC): float16 uses its branch-free helpers
    in_simd: bool
    #: ids of the variables bound by an enclosing Let or LetStmt
    bound_vars: set[int]

    def var(self, v: Var) -> str:  # pragma: no cover - in CodeGenC
        """The C name of a variable (provided by CodeGenC)."""
        raise NotImplementedError

    # -- expressions --------------------------------------------------------------------
    def expr(self, e: PrimExpr, prec: int = 0) -> str:
        """C text of ``e``, parenthesised if its precedence is below ``prec``."""
        text, own = self._expr(e)
        return f"({text})" if own < prec else text

    def _expr(self, e: PrimExpr) -> tuple[str, int]:
        if isinstance(e, Let):
            return self.let_expr(e), 16
        if dt.lanes_of(e.dtype) != 1:
            return self.vector_expr(e)
        if half.is_half(e.dtype) and not isinstance(e, Var | FloatImm | Select):
            return self.half_expr(e)
        return self._expr_plain_prec(e)

    def _expr_plain(self, e: PrimExpr) -> str:
        return self._expr_plain_prec(e)[0]

    def _expr_plain_prec(self, e: PrimExpr) -> tuple[str, int]:
        if isinstance(e, Var):
            return self.var(e), 16
        if isinstance(e, IntImm):
            return self.int_literal(e), 16
        if isinstance(e, FloatImm):
            return self.float_literal(e), 16
        if isinstance(e, StringImm):
            return c_string(e.value), 16
        if isinstance(e, FloorDiv | FloorMod):
            return self.floor_divmod(e)
        if type(e) in _BINARY:
            assert isinstance(e, BinaryOp)
            if isinstance(e, Mod) and dt.is_float(e.dtype):
                return self.call_math("fmod", e.dtype, [e.a, e.b]), 16
            if isinstance(e, Div | Mod) and dt.is_integral(e.dtype) and not self.plain_div(e):
                return self.checked_divmod(e), 16
            sym, p = _BINARY[type(e)]
            return f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}", p
        if isinstance(e, Min | Max):
            name = f"ember_{type(e).__name__.lower()}_{dtype_suffix(e.dtype)}"
            ct = self.value_type(e.dtype)
            op = "<" if isinstance(e, Min) else ">"
            self.ctx.helpers[name] = (
                f"static inline {ct} {name}({ct} a, {ct} b) {{ return a {op} b ? a : b; }}"
            )
            return f"{name}({self.expr(e.a)}, {self.expr(e.b)})", 16
        if type(e) in _COMPARE:
            sym, p = _COMPARE[type(e)]
            return f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}", p  # type: ignore[attr-defined]
        if isinstance(e, And):
            return f"{self.expr(e.a, 5)} && {self.expr(e.b, 6)}", 5
        if isinstance(e, Or):
            return f"{self.expr(e.a, 4)} || {self.expr(e.b, 5)}", 4
        if isinstance(e, Not):
            return f"!{self.expr(e.a, 15)}", 15
        if isinstance(e, Select):
            c = self.expr(e.condition, 4)
            return f"{c} ? {self.expr(e.true_value, 3)} : {self.expr(e.false_value, 3)}", 3
        if isinstance(e, Cast):
            if dt.is_bool(e.dtype):
                return f"{self.expr(e.value, 10)} != 0", 9
            if subbyte.is_sub_byte(e.dtype):
                subbyte.use(self.ctx.helpers, e.dtype)
                return subbyte.cast_to(e.dtype, e.value.dtype, self.expr(e.value)), 16
            return f"({c_type(e.dtype, self.where)}){self.expr(e.value, 15)}", 15
        if isinstance(e, Call):
            if e.kind == "extern":
                return self.call_extern(e), 16
            if e.kind == CHECK_KIND:
                return self.index_check(e)
            if e.kind == CPACKED_KIND:
                return self.call_cpacked(e), 16
            if e.kind == PACKED_KIND:
                return self.call_packed(e), 16
            if e.kind == REINTERPRET_KIND:
                return self.reinterpret(e), 16
            return self.call_math(e.op, e.dtype, list(e.args)), 16
        if isinstance(e, BufferLoad):
            text = f"{self.buf(e.buffer)}[{self.expr(e.buffer.offset_of(e.indices))}]"
            if subbyte.is_sub_byte(e.buffer.dtype):
                subbyte.use(self.ctx.helpers, e.buffer.dtype)
                text = subbyte.load(e.buffer.dtype, text)
            return text, 16
        raise CompileError(f"C codegen{self.where}: unsupported expression {type(e).__name__}")

    def value_type(self, dtype: str) -> str:
        """The C type of a value of ``dtype``: scalar type or vector typedef (float for
        float16/bfloat16, see ``half``)."""
        if dt.lanes_of(dtype) != 1:
            return vector_type(dtype, self.ctx, self.where)
        if half.is_half(dtype):
            return "float"
        return c_type(dtype, self.where)

    def half_expr(self, e: PrimExpr) -> tuple[str, int]:
        """A float16/bfloat16 expression as a float holding an exactly representable value:
        loads widen, arithmetic and intrinsics round their float32 result, casts convert."""
        half.use(self.ctx.helpers, e.dtype)
        simd = self.in_simd
        if isinstance(e, BufferLoad):
            return half.load(e.dtype, self._expr_unhalved(e), simd), 16
        if isinstance(e, Cast):
            value = self.expr(e.value)
            return half.cast_to(e.dtype, e.value.dtype, value, self.where, simd), 16
        if isinstance(e, Min | Max):
            return self._expr_unhalved(e), 16  # one of the operands: exact
        return half.round_value(e.dtype, self._expr_unhalved(e), simd), 16

    def half_bits(self, e: PrimExpr) -> str:
        """The C text of the stored bits of the float16/bfloat16 value ``e``: a copied load
        keeps its bits, a value computed in float32 or cast from wider is converted once."""
        half.use(self.ctx.helpers, e.dtype)
        if isinstance(e, BufferLoad):
            return self._expr_unhalved(e)
        simd = self.in_simd
        if isinstance(e, Cast) and not half.is_half(e.value.dtype):
            return half.bits(e.dtype, e.value.dtype, self.expr(e.value), simd)
        if isinstance(e, Cast | Var | FloatImm | Select | Min | Max):
            return half.store(e.dtype, self.expr(e), simd)
        return half.store(e.dtype, self._expr_unhalved(e), simd)

    def _expr_unhalved(self, e: PrimExpr) -> str:
        """The C text of ``e`` computed in float32 (a half load: the stored bits)."""
        if isinstance(e, BufferLoad):
            return f"{self.buf(e.buffer)}[{self.expr(e.buffer.offset_of(e.indices))}]"
        if isinstance(e, Call) and e.kind == "intrin":
            return self.call_math(e.op, e.dtype, list(e.args))
        if isinstance(e, FloorDiv | FloorMod):
            return self.floor_divmod(e)[0]
        if isinstance(e, Mod):
            return self.call_math("fmod", e.dtype, [e.a, e.b])
        if type(e) in _BINARY or isinstance(e, Min | Max):
            return self._expr_plain(e)
        raise CompileError(
            f"C codegen{self.where}: {type(e).__name__} of dtype {e.dtype} is not supported "
            "by the C backend; cast to float32 first"
        )

    def let_expr(self, e: Let) -> str:
        """``let v = value in body`` as a GNU statement expression, evaluating value once.

        ``({ const T v = value; body; })`` keeps the value where the Let is (under a
        select branch it stays conditional) and is vectorized like any other expression.
        """
        name = self.var(e.var)
        ct = self.value_type(e.var.dtype)
        value = self.expr(e.value)
        saved = self.bounds.ranges.get(e.var)
        if dt.is_integral(e.var.dtype) and dt.lanes_of(e.var.dtype) == 1:
            self.bounds.ranges[e.var] = self.bounds.bound(e.value)
        self.bound_vars.add(id(e.var))
        body = self.expr(e.body)
        if saved is None:
            self.bounds.ranges.pop(e.var, None)
        else:
            self.bounds.ranges[e.var] = saved
        return f"({{ const {ct} {name} = {value}; {body}; }})"

    def int_literal(self, e: IntImm) -> str:
        """A C integer literal of the constant's type."""
        v = e.value
        if e.dtype == "bool":
            return "1" if v else "0"
        if e.dtype == "int32":
            return str(v) if v != -(1 << 31) else "(-2147483647 - 1)"
        if e.dtype == "int64":  # the other operand is int64 too, so small literals promote
            if -(1 << 31) < v < (1 << 31):
                return str(v)
            return f"INT64_C({v})" if v != -(1 << 63) else "INT64_MIN"
        if e.dtype == "uint64":
            return f"UINT64_C({v})"
        return f"({c_type(e.dtype, self.where)}){v}"

    def float_literal(self, e: FloatImm) -> str:
        """A C floating-point literal (``f`` suffix for float32, INFINITY/NAN)."""
        v = e.value
        c_type(e.dtype, self.where)
        f32 = dt.element_of(e.dtype) == "float32" or half.is_half(e.dtype)
        if half.is_half(e.dtype):  # the value the narrow type holds
            v = float(numpy_dtype(dt.element_of(e.dtype)).type(v))
        if math.isnan(v):
            return "NAN" if f32 else "((double)NAN)"
        if math.isinf(v):
            text = "INFINITY" if v > 0 else "-INFINITY"
            return text if f32 else f"((double){text})"
        text = repr(v)
        if "e" not in text and "." not in text:
            text += ".0"
        return text + "f" if f32 else text

    def floor_divmod(self, e: FloorDiv | FloorMod) -> tuple[str, int]:
        """Floor division/modulo: plain C when non-negative, else an inline helper."""
        if dt.is_float(e.dtype):
            if isinstance(e, FloorDiv):
                return self.call_math("floor", e.dtype, [Div(e.a, e.b)]), 16
            ct = self.value_type(e.dtype)
            sfx = "f" if ct == "float" else ""
            name = f"ember_floormod_{dtype_suffix(e.dtype)}"
            body = f"return a - floor{sfx}(a / b) * b;"
            self.ctx.helpers[name] = f"static inline {ct} {name}({ct} a, {ct} b) {{ {body} }}"
            return f"{name}({self.expr(e.a)}, {self.expr(e.b)})", 16
        a_lo = self.bounds.bound(e.a)[0]
        b_lo = self.bounds.bound(e.b)[0]
        if a_lo >= 0 and b_lo > 0:
            sym = "/" if isinstance(e, FloorDiv) else "%"
            return f"{self.expr(e.a, 13)} {sym} {self.expr(e.b, 14)}", 13
        ct = c_type(e.dtype, self.where)
        checked = not self.plain_div(e)  # a divisor that may trap: the checked helper
        guard = divisor_guard(e.dtype, isinstance(e, FloorDiv)) if checked else ""
        tag = "_checked" if checked else ""
        if isinstance(e, FloorDiv):
            name = f"ember_floordiv{tag}_{dtype_suffix(e.dtype)}"
            body = f"{ct} q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;"
        else:
            name = f"ember_floormod{tag}_{dtype_suffix(e.dtype)}"
            body = f"{ct} r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;"
        self.ctx.helpers[name] = f"static inline {ct} {name}({ct} a, {ct} b) {{ {guard}{body} }}"
        return f"{name}({self.expr(e.a)}, {self.expr(e.b)})", 16

    def call_math(self, op: str, dtype: str, args: list[PrimExpr]) -> str:
        """A <math.h> call (float variants for float32), rsqrt and sigmoid spelled out."""
        if not dt.is_float(dtype):
            raise CompileError(f"C codegen{self.where}: intrinsic {op} needs a float, got {dtype}")
        texts = [self.expr(a, 15 if op == "sigmoid" else 0) for a in args]
        return self.math_text(op, dtype, texts)

    def math_text(self, op: str, dtype: str, texts: list[str]) -> str:
        """The C text of intrinsic ``op`` on already printed (scalar) arguments."""
        elem = dt.element_of(dtype)
        ct = "float" if half.is_half(elem) else c_type(elem, self.where)
        sfx = "f" if ct == "float" else ""
        one = "1.0f" if sfx else "1.0"
        if op == "rsqrt":
            return f"({one} / sqrt{sfx}({texts[0]}))"
        if op == "sigmoid":
            return f"{self.ctx.sigmoid_function(ct)}({texts[0]})"
        if op == "exp":
            return f"{self.ctx.exp_function(ct)}({texts[0]})"
        if op == "erf" and (erf := self.ctx.erf_function(ct)) is not None:
            return f"{erf}({texts[0]})"
        if op not in _FLOAT_FN:
            raise CompileError(f"C codegen{self.where}: unknown intrinsic '{op}'")
        self.ctx.use_math(_FLOAT_FN[op], _FLOAT_FN[op] + sfx, ct)
        return f"{_FLOAT_FN[op]}{sfx}({', '.join(texts)})"

    def call_extern(self, e: Call) -> str:
        """A call to an extern C function, declaring its prototype in the prelude (the int8
        kernels of int8_kernels.py are defined there instead)."""
        if e.op in F32_KERNEL_NAMES | LANES_KERNEL_NAMES:
            self.ctx.helpers.setdefault(F32_HELPER_KEY, F32_KERNELS_C)
            if e.op in LANES_KERNEL_NAMES:
                self.ctx.helpers.setdefault(LANES_HELPER_KEY, LANES_KERNEL_C)
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if e.op in LANE_GROUP_KERNEL_NAMES:
            self.ctx.helpers.setdefault(LANE_GROUP_HELPER_KEY, LANE_GROUP_KERNEL_C)
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if e.op in DEPTHWISE_KERNEL_NAMES:
            self.ctx.helpers.setdefault(DEPTHWISE_HELPER_KEY, F32_DEPTHWISE_C)
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if e.op in WINOGRAD_KERNEL_NAMES:
            self.ctx.helpers.setdefault(WINOGRAD_HELPER_KEY, WINOGRAD_C)
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if e.op in NARROW_KERNEL_NAMES:
            self.ctx.helpers.setdefault(NARROW_HELPER_KEY, F32_NARROW_C)
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if e.op in RANDOM_KERNEL_NAMES:
            self.ctx.helpers.setdefault(RANDOM_HELPER_KEY, random_kernels_c())
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        if e.op in INT8_KERNEL_NAMES | DW_ADD_KERNEL_NAMES:
            self.ctx.helpers.setdefault(INT8_HELPER_KEY, INT8_KERNELS_C)
            if e.op in DW_ADD_KERNEL_NAMES:
                self.ctx.helpers.setdefault(DW_ADD_HELPER_KEY, DW_ADD_KERNELS_C)
            return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"
        arg_types = []
        for a in e.args:
            if isinstance(a, StringImm):
                arg_types.append("const char*")
            elif isinstance(a, Var) and dt.is_handle(a.dtype):
                arg_types.append(self.pointer_type(a))
            else:
                arg_types.append(c_type(a.dtype, self.where))
        ret = c_type(e.dtype, self.where)
        proto = f"extern {ret} {e.op}({', '.join(arg_types) or 'void'});"
        old = self.ctx.externs.get(e.op)
        if old is not None and old != proto:
            raise CompileError(
                f"C codegen{self.where}: call_extern '{e.op}' is used with two signatures:\n"
                f"  {old}\n  {proto}\ncast the arguments so every call agrees"
            )
        self.ctx.externs[e.op] = proto
        return f"{e.op}({', '.join(self.expr(a) for a in e.args)})"

    def reinterpret(self, e: Call) -> str:
        """The bits of a scalar read as another dtype of their width (a memcpy helper)."""
        src, dst = e.args[0].dtype, e.dtype
        if half.is_half(src) or half.is_half(dst):
            raise CompileError(
                f"C codegen{self.where}: reinterpret {src} -> {dst}: 16-bit floats are not "
                "supported; reinterpret their storage as uint16 instead"
            )
        name = f"ember_bits_{src}_{dst}"
        sc, dc = c_type(src, self.where), c_type(dst, self.where)
        self.ctx.helpers.setdefault(
            f"1_{name}",
            f"static inline {dc} {name}({sc} v) {{ {dc} r; memcpy(&r, &v, sizeof r); return r; }}",
        )
        return f"{name}({self.expr(e.args[0])})"

    def pointer_type(self, v: Var) -> str:
        """The C pointer type of a handle var: typed if it is a known buffer's data."""
        for b in self._buffers():
            if b.data is v:
                return f"{c_type(b.dtype, self.where)}*"
        return "void*"

    def _buffers(self) -> list[Buffer]:
        out = [p for p in self.func.params if isinstance(p, Buffer)]

        post_order_visit(
            self.func.body, lambda n: out.append(n.buffer) if isinstance(n, Allocate) else None
        )
        return out
