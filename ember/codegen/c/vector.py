"""Explicit vector code in C: Ramp/Broadcast and vector dtypes via GCC vector extensions.

A vector dtype ``float32x8`` becomes ``typedef float ember_f32x8
__attribute__((vector_size(32)))``. Contiguous loads and stores (a Ramp index of stride 1
in flat terms) go through ``memcpy`` helpers (unaligned-safe, compiled to one vector
move); other strides gather or scatter lane by lane. ``+ - * /`` are native vector
operators, ``min``/``max`` lane-wise helpers, casts ``__builtin_convertvector``. This is
what register-tiled micro-kernels are written in.
"""

from __future__ import annotations

from ember.codegen.c.abi import c_type
from ember.codegen.c.file_context import FileContext
from ember.errors import CompileError
from ember.support import dtypes
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
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
)
from ember.tir.simplify import simplify

_OPS: dict[type, str] = {Add: "+", Sub: "-", Mul: "*", Div: "/"}
_CMP: dict[type, tuple[str, str]] = {
    EQ: ("eq", "=="),
    NE: ("ne", "!="),
    LT: ("lt", "<"),
    LE: ("le", "<="),
    GT: ("gt", ">"),
    GE: ("ge", ">="),
}


def _lanewise(ctx: FileContext, name: str, ret: str, params: str, lanes: int, lane: str) -> str:
    """Declare ``static inline ret name(params)`` computing ``r[k] = lane`` for each lane."""
    ctx.helpers.setdefault(
        f"2_{name}",
        f"static inline {ret} {name}({params}) {{ {ret} r; "
        f"for (int k = 0; k < {lanes}; ++k) r[k] = {lane}; return r; }}",
    )
    return name


def vector_type(dtype: str, ctx: FileContext, where: str) -> str:
    """The C typedef name of a vector dtype, declaring it (and its helpers) in the prelude."""
    base, lanes = dt.split_lanes(dtype)
    if dtypes.is_half(base) or dtypes.sub_bits(base):
        raise CompileError(
            f"C codegen{where}: vector dtype {dtype} is not supported; vectorize float16, "
            "bfloat16, float8, float4 and 2-/4-bit integer kernels with a vectorized loop over "
            "scalar code instead"
        )
    if lanes & (lanes - 1):
        raise CompileError(f"C codegen{where}: vector lanes must be a power of two, got {dtype}")
    ct = c_type(base, where)
    short = {"float32": "f32", "float64": "f64"}.get(base, base)
    name = f"ember_{short}x{lanes}"
    size = dt.bytes_of(dtype)
    ctx.helpers.setdefault(
        f"0_{name}", f"typedef {ct} {name} __attribute__((vector_size({size})));"
    )
    ctx.helpers.setdefault(
        f"1_{name}_load",
        f"static inline {name} {name}_load(const {ct}* p) "
        f"{{ {name} v; memcpy(&v, p, sizeof(v)); return v; }}",
    )
    ctx.helpers.setdefault(
        f"1_{name}_store",
        f"static inline void {name}_store({ct}* p, {name} v) {{ memcpy(p, &v, sizeof(v)); }}",
    )
    ctx.helpers.setdefault(
        f"1_{name}_bcast",
        f"static inline {name} {name}_bcast({ct} x) "
        f"{{ {name} v; for (int k = 0; k < {lanes}; ++k) v[k] = x; return v; }}",
    )
    if dt.is_integral(base):
        ctx.helpers.setdefault(
            f"1_{name}_ramp",
            f"static inline {name} {name}_ramp({ct} b, {ct} s) "
            f"{{ {name} v; for (int k = 0; k < {lanes}; ++k) v[k] = b + k * s; return v; }}",
        )
    for op, sym in (("min", "<"), ("max", ">")):
        ctx.helpers.setdefault(
            f"1_{name}_{op}",
            f"static inline {name} {name}_{op}({name} a, {name} b) {{ {name} v; "
            f"for (int k = 0; k < {lanes}; ++k) v[k] = a[k] {sym} b[k] ? a[k] : b[k]; "
            "return v; }",
        )
    return name


def flat_access(buf: Buffer, indices: tuple[PrimExpr, ...], where: str) -> tuple[PrimExpr, int]:
    """(scalar flat offset of lane 0, flat stride between lanes) of a vector access."""
    ramps = [k for k, i in enumerate(indices) if isinstance(i, Ramp)]
    if len(ramps) != 1 or any(
        dt.lanes_of(i.dtype) != 1 for k, i in enumerate(indices) if k != ramps[0]
    ):
        raise CompileError(
            f"C codegen{where}: a vector access of '{buf.name}' needs exactly one Ramp index "
            "and scalar other indices"
        )
    k = ramps[0]
    ramp = indices[k]
    assert isinstance(ramp, Ramp)
    scalar = list(indices)
    scalar[k] = ramp.base
    strides = buf.strides or buf.row_major_strides()
    stride = simplify(ramp.stride * strides[k])
    if not isinstance(stride, IntImm):
        raise CompileError(f"C codegen{where}: vector access stride {stride} must be constant")
    return buf.offset_of(scalar), stride.value


class VectorMixin:
    """Vector expression and store support for CodeGenC."""

    ctx: FileContext
    where: str
    bound_vars: set[int]

    def var(self, v: Var) -> str:  # pragma: no cover - in CodeGenC
        """The C name of a variable (provided by CodeGenC)."""
        raise NotImplementedError

    def expr(self, e: PrimExpr, prec: int = 0) -> str:  # pragma: no cover - in CodeGenC
        """C text of an expression (provided by CodeGenC)."""
        raise NotImplementedError

    def buf(self, b: Buffer) -> str:  # pragma: no cover - in CodeGenC
        """The C name of a buffer (provided by CodeGenC)."""
        raise NotImplementedError

    def emit(self, text: str) -> None:  # pragma: no cover - in CodeGenC
        """Append one line (provided by CodeGenC)."""
        raise NotImplementedError

    def vector_expr(self, e: PrimExpr) -> tuple[str, int]:
        """C text and precedence of an expression of vector dtype."""
        vt = vector_type(e.dtype, self.ctx, self.where)
        lanes = dt.lanes_of(e.dtype)
        if isinstance(e, Broadcast):
            return f"{vt}_bcast({self.expr(e.value)})", 16
        if isinstance(e, Ramp):
            return f"{vt}_ramp({self.expr(e.base)}, {self.expr(e.stride)})", 16
        if isinstance(e, BufferLoad):
            base, stride = flat_access(e.buffer, e.indices, self.where)
            name = self.buf(e.buffer)
            if stride == 1:
                return f"{vt}_load({name} + {self.expr(base, 12)})", 16
            lanes_text = ", ".join(
                f"{name}[{self.expr(simplify(base + k * stride))}]" for k in range(lanes)
            )
            return f"({vt}){{{lanes_text}}}", 16
        if type(e) in _OPS:
            sym = _OPS[type(e)]
            p = 12 if sym in "+-" else 13
            return f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}", p  # type: ignore[attr-defined]
        if isinstance(e, Min | Max):
            op = "min" if isinstance(e, Min) else "max"
            return f"{vt}_{op}({self.expr(e.a)}, {self.expr(e.b)})", 16
        if isinstance(e, Cast):
            return f"__builtin_convertvector({self.expr(e.value)}, {vt})", 16
        if isinstance(e, CmpOp):
            ot = vector_type(e.a.dtype, self.ctx, self.where)
            tag, sym = _CMP[type(e)]
            fn = _lanewise(
                self.ctx, f"{ot}_{tag}", vt, f"{ot} a, {ot} b", lanes, f"a[k] {sym} b[k]"
            )
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})", 16
        if isinstance(e, And | Or):
            sym = "&" if isinstance(e, And) else "|"
            p = 8 if sym == "&" else 6
            return f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}", p
        if isinstance(e, Not):
            fn = _lanewise(self.ctx, f"{vt}_not", vt, f"{vt} a", lanes, "!a[k]")
            return f"{fn}({self.expr(e.a)})", 16
        if isinstance(e, Select):
            mt = vector_type(e.condition.dtype, self.ctx, self.where)
            params = f"{mt} c, {vt} a, {vt} b"
            fn = _lanewise(self.ctx, f"{vt}_select", vt, params, lanes, "c[k] ? a[k] : b[k]")
            args = (self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value))
            return f"{fn}({', '.join(args)})", 16
        if isinstance(e, Call) and e.kind == "intrin":
            texts = [f"{chr(ord('a') + n)}[k]" for n in range(len(e.args))]
            lane = self.math_text(e.op, e.dtype, texts)  # type: ignore[attr-defined]
            params = ", ".join(f"{vt} {chr(ord('a') + n)}" for n in range(len(e.args)))
            fn = _lanewise(self.ctx, f"{vt}_{e.op}", vt, params, lanes, lane)
            return f"{fn}({', '.join(self.expr(a) for a in e.args)})", 16
        if isinstance(e, Var):
            if id(e) in self.bound_vars:
                return self.var(e), 16
            raise CompileError(
                f"C codegen{self.where}: vector variable '{e.name}' is not bound by a Let; "
                "vector parameters are not supported"
            )
        raise CompileError(
            f"C codegen{self.where}: {type(e).__name__} on vector dtype {e.dtype} is not "
            "supported by the C backend; use a vectorized loop instead"
        )

    def vector_store(self, buf: Buffer, value: PrimExpr, indices: tuple[PrimExpr, ...]) -> None:
        """Emit a vector store (contiguous via memcpy, otherwise lane by lane)."""
        vt = vector_type(value.dtype, self.ctx, self.where)
        base, stride = flat_access(buf, indices, self.where)
        name = self.buf(buf)
        if stride == 1:
            self.emit(f"{vt}_store({name} + {self.expr(base, 12)}, {self.expr(value)});")
            return
        self.emit("{")
        self.emit(f"  const {vt} lanes_ = {self.expr(value)};")
        for k in range(dt.lanes_of(value.dtype)):
            self.emit(f"  {name}[{self.expr(simplify(base + k * stride))}] = lanes_[{k}];")
        self.emit("}")
