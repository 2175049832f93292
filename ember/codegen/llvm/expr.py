"""Expressions of the loop IR -> LLVM IR values, scalar and vector alike.

Vector dtypes (``float32x8``) are LLVM vectors: the same instruction works on both, so
one path serves Ramp/Broadcast code and scalars. C semantics are kept where they differ
from LLVM's: a Select or an ``&&``/``||`` whose other side could fault (a load, an integer
division, an extern call) branches instead of evaluating both sides; floor division of
operands the enclosing loop ranges prove non-negative is a plain ``sdiv``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.codegen.llvm.ir_text import (
    FunctionWriter,
    Val,
    float_literal,
    int_literal,
    scalar_type,
    splat,
    value_type,
)
from ember.codegen.llvm.mathfn import math_call
from ember.codegen.llvm.memory import MemoryLowering
from ember.codegen.llvm.narrow import is_narrow, narrow_value
from ember.codegen.llvm.narrow_lower import NarrowLowering
from ember.codegen.llvm.tiles import tile_symbol
from ember.errors import CompileError
from ember.support.dtypes import sub_bits
from ember.tir import dtype as dt
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
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
)
from ember.tir.functor import post_order_visit
from ember.tir.op import CHECK_KIND, CPACKED_KIND, REINTERPRET_KIND
from ember.tir.simplify import Simplifier

_FCMP = {EQ: "oeq", NE: "une", LT: "olt", LE: "ole", GT: "ogt", GE: "oge"}
_SCMP = {EQ: "eq", NE: "ne", LT: "slt", LE: "sle", GT: "sgt", GE: "sge"}
_UCMP = {EQ: "eq", NE: "ne", LT: "ult", LE: "ule", GT: "ugt", GE: "uge"}


def may_fault(e: PrimExpr) -> bool:
    """True if evaluating ``e`` could fault where C would not evaluate it (a load, an
    integer division, an extern call)."""
    found: list[object] = []

    def visit(n: object) -> None:
        extern = isinstance(n, Call) and n.kind == "extern"
        int_div = isinstance(n, Div | Mod | FloorDiv | FloorMod) and not dt.is_float(n.dtype)
        if isinstance(n, BufferLoad) or extern or int_div:
            found.append(n)

    post_order_visit(e, visit)
    return bool(found)


class ExprLowering(NarrowLowering, MemoryLowering):
    """Lowers expressions into ``self.w``; statements live in the subclass."""

    w: FunctionWriter
    env: dict[Var, Val]
    bounds: Simplifier
    where: str
    #: call the AVX-512 copies of the float32 tile kernels (Options.avx512_tiles)
    avx512_tiles: bool = False

    def const(self, dtype: str, value: int | float) -> Val:
        """A constant of (possibly vector) ``dtype``."""
        ty = value_type(dtype, self.where)
        if is_narrow(dtype):  # the value the narrow type holds, as the C back end
            value = narrow_value(dtype, float(value))
        if dt.is_float(dtype):
            lit = float_literal(float(value), dtype)
        elif dt.is_bool(dtype):
            lit = "true" if value else "false"
        else:
            lit = int_literal(int(value), dt.bits_of(dtype))
        return Val(ty, splat(ty, lit) if dt.lanes_of(dtype) > 1 else lit)

    # -- the dispatcher -----------------------------------------------------------------
    def expr(self, e: PrimExpr) -> Val:
        """The LLVM value of ``e``."""
        if is_narrow(e.dtype):
            return self.narrow_expr(e)
        return self.plain_expr(e)

    def plain_expr(self, e: PrimExpr) -> Val:
        """The LLVM value of ``e``, a narrow float computed in float32 and not rounded."""
        if isinstance(e, Var):
            val = self.env.get(e)
            if val is None:
                raise CompileError(f"LLVM codegen{self.where}: variable '{e.name}' is unbound")
            return val
        if isinstance(e, IntImm | FloatImm):
            return self.const(e.dtype, e.value)
        if isinstance(e, StringImm):
            return Val("ptr", self.w.ctx.string(e.value))
        if isinstance(e, Add | Sub | Mul | Div | Mod):
            return self.arith(e)
        if isinstance(e, FloorDiv | FloorMod):
            return self.floor_divmod(e)
        if isinstance(e, Min | Max):
            a, b = self.expr(e.a), self.expr(e.b)
            pred = self.compare_pred(LT if isinstance(e, Min) else GT, e.a.dtype)
            c = self.compare(pred, a, b)
            return self.w.inst(a.ty, f"select {c.typed()}, {a.typed()}, {b.typed()}")
        if isinstance(e, CmpOp):
            pred = self.compare_pred(type(e), e.a.dtype)
            return self.compare(pred, self.expr(e.a), self.expr(e.b))
        if isinstance(e, And | Or):
            return self.logical(e)
        if isinstance(e, Not):
            a = self.expr(e.a)
            return self.w.inst(a.ty, f"xor {a.typed()}, {self.const(e.dtype, 1).ref}")
        if isinstance(e, Select):
            return self.select(e)
        if isinstance(e, Cast):
            return self.cast(self.expr(e.value), e.value.dtype, e.dtype)
        if isinstance(e, Call):
            if e.kind == "extern":
                return self.call_extern(e)
            if e.kind == CHECK_KIND:
                return self.index_check(e)
            if e.kind == CPACKED_KIND:
                return self.call_cpacked(e)
            if e.kind == REINTERPRET_KIND:  # the same bits read as another type of one width
                if is_narrow(e.dtype) or is_narrow(e.args[0].dtype):
                    raise CompileError(
                        f"LLVM codegen{self.where}: reinterpret {e.args[0].dtype} -> {e.dtype}: "
                        "narrow floats are not supported; reinterpret their storage instead"
                    )
                v, ty = self.expr(e.args[0]), value_type(e.dtype, self.where)
                return self.w.inst(ty, f"bitcast {v.typed()} to {ty}")
            if e.kind != "intrin":
                raise CompileError(
                    f"LLVM codegen{self.where}: '{e.kind}' calls ({e.op}) are not supported by "
                    "the llvm back end; use target 'c' for this kernel"
                )
            args = [self.expr(a) for a in e.args]
            return math_call(self.w, e.op, e.dtype, args, self.where)
        if isinstance(e, BufferLoad):
            return self.load(e)
        if isinstance(e, Let):
            return self.let_expr(e)
        if isinstance(e, Broadcast):
            if isinstance(e.value, IntImm | FloatImm):  # a constant vector, no shuffles
                return self.const(e.dtype, e.value.value)
            return self.broadcast(self.expr(e.value), e.lanes)
        if isinstance(e, Ramp):
            base = self.broadcast(self.expr(e.base), e.lanes)
            stride = self.broadcast(self.expr(e.stride), e.lanes)
            lanes = ", ".join(
                f"{scalar_type(e.dtype)} {int_literal(k, dt.bits_of(e.dtype))}"
                for k in range(e.lanes)
            )
            steps = Val(base.ty, f"<{lanes}>")
            scaled = self.w.inst(base.ty, f"mul {stride.typed()}, {steps.ref}")
            return self.w.inst(base.ty, f"add {base.typed()}, {scaled.ref}")
        raise CompileError(f"LLVM codegen{self.where}: unsupported expression {type(e).__name__}")

    # -- pieces ---------------------------------------------------------------------------
    def arith(self, e: Add | Sub | Mul | Div | Mod) -> Val:
        """+ - * / % with C semantics for the dtype."""
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.dtype):
            op = {Add: "fadd", Sub: "fsub", Mul: "fmul", Div: "fdiv", Mod: "frem"}[type(e)]
            # no fast-math flag: only reduction updates are contracted (contract.py)
            return self.w.inst(a.ty, f"{op} {a.typed()}, {b.ref}")
        signed = not dt.is_uint(e.dtype)
        if isinstance(e, Div | Mod):
            op = ("s" if signed else "u") + ("div" if isinstance(e, Div) else "rem")
            return self.w.inst(a.ty, f"{op} {a.typed()}, {b.ref}")
        op = {Add: "add", Sub: "sub", Mul: "mul"}[type(e)]
        # C's int and int64_t arithmetic may not overflow; narrower types promote and wrap
        nsw = " nsw" if signed and dt.bits_of(e.dtype) >= 32 else ""
        return self.w.inst(a.ty, f"{op}{nsw} {a.typed()}, {b.ref}")

    def compare_pred(self, kind: type[CmpOp], dtype: str) -> str:
        """``fcmp olt`` / ``icmp slt`` ... for comparing two values of ``dtype``."""
        if dt.is_float(dtype):
            return "fcmp " + _FCMP[kind]
        table = _UCMP if dt.is_uint(dtype) or dt.is_bool(dtype) or dtype == "handle" else _SCMP
        return "icmp " + table[kind]

    def compare(self, pred: str, a: Val, b: Val) -> Val:
        """An i1 (or vector of i1) comparison result."""
        ty = a.ty.replace("float", "i1").replace("double", "i1")
        for it in ("i8", "i16", "i32", "i64", "ptr"):
            ty = ty.replace(it, "i1")
        return self.w.inst(ty, f"{pred} {a.typed()}, {b.ref}")

    def floor_divmod(self, e: FloorDiv | FloorMod) -> Val:
        """Floor division/modulo: sdiv/srem when both sides are non-negative, else fixed up."""
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.dtype):
            q = math_call(
                self.w,
                "floor",
                e.dtype,
                [self.w.inst(a.ty, f"fdiv {a.typed()}, {b.ref}")],
                self.where,
            )
            if isinstance(e, FloorDiv):
                return q
            qb = self.w.inst(a.ty, f"fmul {q.typed()}, {b.ref}")
            return self.w.inst(a.ty, f"fsub {a.typed()}, {qb.ref}")
        if dt.is_uint(e.dtype):
            op = "udiv" if isinstance(e, FloorDiv) else "urem"
            return self.w.inst(a.ty, f"{op} {a.typed()}, {b.ref}")
        scalar = dt.lanes_of(e.dtype) == 1
        if scalar and self.bounds.bound(e.a)[0] >= 0 and self.bounds.bound(e.b)[0] > 0:
            op = "sdiv" if isinstance(e, FloorDiv) else "srem"
            return self.w.inst(a.ty, f"{op} {a.typed()}, {b.ref}")
        zero = self.const(e.dtype, 0)
        r = self.w.inst(a.ty, f"srem {a.typed()}, {b.ref}")
        nonzero = self.compare("icmp ne", r, zero)
        r_neg = self.compare("icmp slt", r, zero)
        b_neg = self.compare("icmp slt", b, zero)
        differ = self.w.inst(nonzero.ty, f"xor {r_neg.typed()}, {b_neg.ref}")
        fix = self.w.inst(nonzero.ty, f"and {nonzero.typed()}, {differ.ref}")
        if isinstance(e, FloorMod):
            rb = self.w.inst(a.ty, f"add {r.typed()}, {b.ref}")
            return self.w.inst(a.ty, f"select {fix.typed()}, {rb.typed()}, {r.typed()}")
        q = self.w.inst(a.ty, f"sdiv {a.typed()}, {b.ref}")
        q1 = self.w.inst(a.ty, f"sub {q.typed()}, {self.const(e.dtype, 1).ref}")
        return self.w.inst(a.ty, f"select {fix.typed()}, {q1.typed()}, {q.typed()}")

    def lazy(self, cond: Val, then: PrimExpr, other: Val, when: bool = True) -> Val:
        """``then`` when ``cond`` is ``when`` (evaluated only then), else ``other``."""
        w = self.w
        yes, done = w.label("sel_then"), w.label("sel_done")
        start = w.block
        if when:
            w.cond_br(cond, yes, done)
        else:
            w.cond_br(cond, done, yes)
        w.start(yes)
        val = self.expr(then)
        end = w.block
        w.br(done)
        w.start(done)
        return w.inst(val.ty, f"phi {val.ty} [ {val.ref}, %{end} ], [ {other.ref}, %{start} ]")

    def select(self, e: Select) -> Val:
        """``c ? a : b``: a select, or branches when a side may fault (C evaluates one)."""
        cond = self.expr(e.condition)
        vector = dt.lanes_of(e.dtype) > 1
        if vector or not (may_fault(e.true_value) or may_fault(e.false_value)):
            a, b = self.expr(e.true_value), self.expr(e.false_value)
            return self.w.inst(a.ty, f"select {cond.typed()}, {a.typed()}, {b.typed()}")
        w = self.w
        yes, no, done = w.label("if_t"), w.label("if_f"), w.label("if_end")
        w.cond_br(cond, yes, no)
        w.start(yes)
        a = self.expr(e.true_value)
        a_end = w.block
        w.br(done)
        w.start(no)
        b = self.expr(e.false_value)
        b_end = w.block
        w.br(done)
        w.start(done)
        return w.inst(a.ty, f"phi {a.ty} [ {a.ref}, %{a_end} ], [ {b.ref}, %{b_end} ]")

    def logical(self, e: And | Or) -> Val:
        """``&&`` / ``||``: short-circuit when the right side may fault."""
        a = self.expr(e.a)
        if dt.lanes_of(e.dtype) > 1 or not may_fault(e.b):
            b = self.expr(e.b)
            op = "and" if isinstance(e, And) else "or"
            return self.w.inst(a.ty, f"{op} {a.typed()}, {b.ref}")
        # And: a ? b : false;  Or: a ? true : b
        if isinstance(e, And):
            return self.lazy(a, e.b, Val("i1", "false"), when=True)
        return self.lazy(a, e.b, Val("i1", "true"), when=False)

    def cast(self, v: Val, src: str, dst: str) -> Val:
        """C conversion of ``v`` from ``src`` to ``dst``."""
        if dt.element_of(src) == dt.element_of(dst):
            return v
        if is_narrow(src) or is_narrow(dst):
            return self.narrow_cast(v, src, dst)
        if sub_bits(dt.element_of(dst)) and dt.is_integral(dst):  # wrap: the low bits
            byte = dt.with_lanes("int8" if dt.is_int(dst) else "uint8", dt.lanes_of(dst))
            return self.sub_byte_value(self.cast(v, src, byte), dst)
        ty = value_type(dst, self.where)
        if dt.is_bool(dst):
            zero = self.const(src, 0)
            pred = "fcmp une" if dt.is_float(src) else "icmp ne"
            return self.compare(pred, v, zero)
        sf, df = dt.is_float(src), dt.is_float(dst)
        if sf and df:
            op = "fpext" if dt.bits_of(dst) > dt.bits_of(src) else "fptrunc"
        elif sf:
            bits = dt.bits_of(dst)
            if bits < 64 and (bits < 32 or dt.is_uint(dst)):
                # as C compilers do: through a wider signed integer, then truncate, so
                # negative values wrap (-2.0 -> 254 for uint8) instead of being poison
                wide = "i32" if bits < 32 else "i64"
                wide_ty = ty.replace(scalar_type(dst), wide)
                tmp = self.w.inst(wide_ty, f"fptosi {v.typed()} to {wide_ty}")
                return self.w.inst(ty, f"trunc {tmp.typed()} to {ty}")
            op = "fptoui" if dt.is_uint(dst) else "fptosi"
        elif df:
            op = "uitofp" if dt.is_uint(src) or dt.is_bool(src) else "sitofp"
        else:
            sb = 1 if dt.is_bool(src) else dt.bits_of(src)
            db = dt.bits_of(dst)
            if db == sb:
                return Val(ty, v.ref)
            signed = dt.is_int(src)
            op = "trunc" if db < sb else ("sext" if signed else "zext")
        return self.w.inst(ty, f"{op} {v.typed()} to {ty}")

    def broadcast(self, v: Val, lanes: int) -> Val:
        """A vector of ``lanes`` copies of scalar ``v``."""
        ty = f"<{lanes} x {v.ty}>"
        one = self.w.inst(ty, f"insertelement {ty} poison, {v.typed()}, i32 0")
        return self.w.inst(
            ty, f"shufflevector {one.typed()}, {ty} poison, <{lanes} x i32> zeroinitializer"
        )

    def let_expr(self, e: Let) -> Val:
        """``let v = value in body``."""
        previous = self.env.get(e.var)
        self.env[e.var] = self.expr(e.value)
        saved = self.bounds.ranges.get(e.var)
        if dt.is_integral(e.var.dtype) and dt.lanes_of(e.var.dtype) == 1:
            self.bounds.ranges[e.var] = self.bounds.bound(e.value)
        out = self.expr(e.body)
        if previous is None:
            del self.env[e.var]
        else:
            self.env[e.var] = previous
        if saved is None:
            self.bounds.ranges.pop(e.var, None)
        else:
            self.bounds.ranges[e.var] = saved
        return out

    if TYPE_CHECKING:  # provided by checks.CheckLowering

        def index_check(self, e: Call) -> Val:
            """The checked index of ``tir.index_check``."""

        def call_cpacked(self, e: Call) -> Val:
            """The status of a ``tir.call_cpacked``."""

    def call_extern(self, e: Call) -> Val:
        """A call to an extern function, declaring it (or using its definition here)."""
        args = [self.expr(a) for a in e.args]
        ret = value_type(e.dtype, self.where)
        sig = f"{ret} ({', '.join(a.ty for a in args)})"
        name = tile_symbol(e.op, self.avx512_tiles)
        defined = self.w.ctx.defined.get(name)
        if defined is not None and defined != sig:
            raise CompileError(
                f"LLVM codegen{self.where}: call_extern '{e.op}' as {sig} does not match "
                f"its definition {defined}"
            )
        if defined is None:
            self.w.ctx.declare(name, f"declare {ret} @{name}({', '.join(a.ty for a in args)})")
        val = self.w.call(ret, name, args)
        return val if val is not None else Val("i32", "0")
