"""Arithmetic simplification of index expressions so that generated C stays readable.

What it does (bottom-up, one pass): constant folding; ``x + 0``, ``x * 1``, ``x * 0`` and
``x // 1``; ``pow(x, n)`` for n = 1, 2, 3, 4 as products (what onnxruntime computes for
Pow by 2 and 3: libm's pow takes a slow path on negative bases); integer sums
canonicalised to ``c1*t1 + c2*t2 + ... + c`` (like terms merged); ``(a*c + b) // c -> a +
b // c`` and ``(a*c + b) % c -> b % c``; and, using the ranges of enclosing loop variables,
``b // c -> 0`` and ``b % c -> b`` when ``0 <= b < c``, and comparisons/min/max decided by
bounds. Apart from the powers (within an ulp of libm's), it never changes the value of an
expression.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

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
    BinaryOp,
    Call,
    Cast,
    CmpOp,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mod,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    Sub,
    Var,
)
from ember.tir.functor import IRMutator
from ember.tir.op import CHECK_KIND
from ember.tir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt, seq

Bound = tuple[int, int]  # inclusive [lo, hi]; +-inf encoded as None-free big numbers
_INF = 1 << 62
NON_NEGATIVE_MAX = _INF  # the upper bound to give a variable known only to be >= 0


def _is_int_const(e: PrimExpr, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and (value is None or e.value == value)


def _fold_int(op: type, a: int, b: int) -> int | None:
    if op is Add:
        return a + b
    if op is Sub:
        return a - b
    if op is Mul:
        return a * b
    if b == 0 and op in (Div, Mod, FloorDiv, FloorMod):
        return None
    if op is FloorDiv:
        return a // b
    if op is FloorMod:
        return a % b
    if op is Div:
        return (
            int(a / b)
            if abs(a) < (1 << 52)
            else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
        )
    if op is Mod:
        return a - b * (int(a / b) if abs(a) < (1 << 52) else 0)
    if op is Min:
        return min(a, b)
    if op is Max:
        return max(a, b)
    return None


def _fold_float(op: type, a: float, b: float) -> float | None:
    if op is Add:
        return a + b
    if op is Sub:
        return a - b
    if op is Mul:
        return a * b
    if op is Div and b != 0:
        return a / b
    if op is Min:
        return min(a, b)
    if op is Max:
        return max(a, b)
    return None


_CMP = {
    EQ: lambda a, b: a == b,
    NE: lambda a, b: a != b,
    LT: lambda a, b: a < b,
    LE: lambda a, b: a <= b,
    GT: lambda a, b: a > b,
    GE: lambda a, b: a >= b,
}


class Simplifier(IRMutator):
    """The simplification pass; ``ranges`` holds known [min, min+extent) of variables."""

    def __init__(self, ranges: dict[Var, Bound] | None = None) -> None:
        self.ranges: dict[Var, Bound] = dict(ranges or {})

    # -- bounds -----------------------------------------------------------------------
    def bound(self, e: PrimExpr) -> Bound:
        """Conservative inclusive integer bounds of ``e``."""
        if isinstance(e, IntImm):
            return (e.value, e.value)
        if isinstance(e, Var):
            return self.ranges.get(e, (-_INF, _INF))
        if isinstance(e, Add):
            (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
            return (_clamp(a0 + b0), _clamp(a1 + b1))
        if isinstance(e, Sub):
            (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
            return (_clamp(a0 - b1), _clamp(a1 - b0))
        if isinstance(e, Mul):
            (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
            prods = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
            return (_clamp(min(prods)), _clamp(max(prods)))
        if isinstance(e, FloorDiv) and _is_int_const(e.b) and e.b.value > 0:  # type: ignore[attr-defined]
            lo, hi = self.bound(e.a)
            c = e.b.value  # type: ignore[attr-defined]
            return (lo // c if lo > -_INF else -_INF, hi // c if hi < _INF else _INF)
        if isinstance(e, FloorMod) and _is_int_const(e.b) and e.b.value > 0:  # type: ignore[attr-defined]
            lo, hi = self.bound(e.a)
            c = e.b.value  # type: ignore[attr-defined]
            if lo >= 0 and hi < c:
                return (lo, hi)
            return (0, c - 1)
        if isinstance(e, Min):
            (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
            return (min(a0, b0), min(a1, b1))
        if isinstance(e, Max):
            (a0, a1), (b0, b1) = self.bound(e.a), self.bound(e.b)
            return (max(a0, b0), max(a1, b1))
        if isinstance(e, Cast) and dt.is_integral(e.dtype):
            inner = self.bound(e.value) if dt.is_integral(e.value.dtype) else None
            return _cast_bound(e.dtype, inner)
        if isinstance(e, Call) and e.kind == CHECK_KIND:  # a checked index lands in [0, n)
            return (0, max(0, self.bound(e.args[1])[1] - 1))
        return (-_INF, _INF)

    # -- statements that bind ranges ----------------------------------------------------
    def visit_For(self, op: For) -> Stmt:
        """Simplify a loop with its variable's range known; drop 0- and 1-trip loops."""
        mn = self.visit_expr(op.min)
        ext = self.visit_expr(op.extent)
        if _is_int_const(ext, 0):
            return SeqStmt(())
        if _is_int_const(ext, 1):  # a one-iteration loop is just its body at loop_var = min
            from ember.tir.functor import substitute

            return self.visit_stmt(substitute(op.body, {op.loop_var: mn}))
        old = self.ranges.get(op.loop_var)
        if isinstance(mn, IntImm) and isinstance(ext, IntImm):
            self.ranges[op.loop_var] = (mn.value, mn.value + ext.value - 1)
        else:
            lo = self.bound(mn)[0]
            hi_ext = self.bound(ext)[1]
            hi = self.bound(mn)[1] + hi_ext - 1 if max(abs(lo), hi_ext) < _INF else _INF
            self.ranges[op.loop_var] = (lo, _clamp(hi))
        body = self.visit_stmt(op.body)
        if old is None:
            del self.ranges[op.loop_var]
        else:
            self.ranges[op.loop_var] = old
        if mn is op.min and ext is op.extent and body is op.body:
            return op
        return replace(op, min=mn, extent=ext, body=body)

    def visit_LetStmt(self, op: LetStmt) -> Stmt:
        """Simplify a let, knowing the bound value's range in the body."""
        value = self.visit_expr(op.value)
        if dt.is_integral(value.dtype):
            self.ranges[op.var] = self.bound(value)
        body = self.visit_stmt(op.body)
        self.ranges.pop(op.var, None)
        return op if value is op.value and body is op.body else LetStmt(op.var, value, body)

    def visit_IfThenElse(self, op: IfThenElse) -> Stmt:
        """Simplify a branch; a constant condition keeps one side."""
        node = self.generic_stmt(op)
        assert isinstance(node, IfThenElse)
        if _is_int_const(node.condition):
            if node.condition.value:  # type: ignore[attr-defined]
                return node.then_case
            return node.else_case if node.else_case is not None else SeqStmt(())
        return node

    def visit_SeqStmt(self, op: SeqStmt) -> Stmt:
        """Simplify each statement, dropping empty ones."""
        parts = [self.visit_stmt(s) for s in op.seq]
        if all(a is b for a, b in zip(parts, op.seq, strict=True)):
            return op
        kept = [p for p in parts if not (isinstance(p, SeqStmt) and not p.seq)]
        return seq(kept) if kept else SeqStmt(())

    # -- expressions ------------------------------------------------------------------
    def visit_expr(self, e: PrimExpr) -> PrimExpr:
        """Simplify children first, then apply the rules to the node."""
        e = super().visit_expr(e)
        if isinstance(e, BinaryOp):
            return self._binary(e)
        if isinstance(e, CmpOp):
            return self._compare(e)
        if isinstance(e, And | Or | Not | Select | Cast):
            return self._logic(e)
        if isinstance(e, Call) and e.op == "pow" and e.kind == "intrin":
            return _small_power(e)
        return e

    def _binary(self, e: BinaryOp) -> PrimExpr:
        op, a, b = type(e), e.a, e.b
        if isinstance(a, IntImm) and isinstance(b, IntImm) and dt.is_integral(e.dtype):
            v = _fold_int(op, a.value, b.value)
            if v is not None:
                return IntImm(e.dtype, v)
        if isinstance(a, FloatImm) and isinstance(b, FloatImm):
            f = _fold_float(op, a.value, b.value)
            if f is not None and math.isfinite(f):
                return FloatImm(e.dtype, f)
        if dt.is_float(e.dtype):
            if op is Mul and isinstance(b, FloatImm) and b.value == 1.0:
                return a
            if op is Mul and isinstance(a, FloatImm) and a.value == 1.0:
                return b
            if op is Div and isinstance(b, FloatImm) and b.value == 1.0:
                return a
            return e
        if not dt.is_integral(e.dtype):
            return e
        if op in (Add, Sub, Mul):
            return self._linear(e)
        if op in (FloorDiv, FloorMod) and isinstance(b, IntImm) and b.value > 0:
            return self._divmod(op, a, b.value, e.dtype) or e
        if op in (Div, Mod) and isinstance(b, IntImm) and b.value > 0 and self.bound(a)[0] >= 0:
            return self._divmod(FloorDiv if op is Div else FloorMod, a, b.value, e.dtype) or e
        if op in (Min, Max):
            (a0, a1), (b0, b1) = self.bound(a), self.bound(b)
            if (op is Min and a1 <= b0) or (op is Max and a0 >= b1):
                return a
            if (op is Min and b1 <= a0) or (op is Max and b0 >= a1):
                return b
        return e

    def _divmod(self, op: type, a: PrimExpr, c: int, dtype: str) -> PrimExpr | None:
        if c == 1:
            return a if op is FloorDiv else IntImm(dtype, 0)
        terms, k = _collect(a)
        if terms is None:
            return None
        outer: dict[Any, int] = {}
        inner: dict[Any, int] = {}
        for t, coef in terms.items():
            if coef % c == 0:
                outer[t] = coef // c
            else:
                inner[t] = coef
        outer_k, inner_k = k // c, k % c
        rest = _build(inner, inner_k, dtype)
        lo, hi = self.bound(rest)
        changed = bool(outer) or inner_k != k
        if op is FloorMod:
            if lo >= 0 and hi < c:
                return rest
            return FloorMod(rest, IntImm(dtype, c)) if changed else None
        if lo >= 0 and hi < c:
            return _build(outer, outer_k, dtype)
        if not outer and outer_k == 0:
            return None
        return self._linear(Add(_build(outer, outer_k, dtype), FloorDiv(rest, IntImm(dtype, c))))

    def _linear(self, e: PrimExpr) -> PrimExpr:
        terms, k = _collect(e)
        if terms is None:
            return e
        k += _merge_div_mod(terms)
        return _build(terms, k, e.dtype)

    def _compare(self, e: CmpOp) -> PrimExpr:
        a, b = e.a, e.b
        if isinstance(a, IntImm | FloatImm) and isinstance(b, IntImm | FloatImm):
            return IntImm("bool", int(_CMP[type(e)](a.value, b.value)))
        if dt.is_integral(a.dtype):
            diff = self._linear(Sub(a, b))
            lo, hi = self.bound(diff)
            verdict: bool | None = None
            if isinstance(e, LT):
                verdict = True if hi < 0 else False if lo >= 0 else None
            elif isinstance(e, LE):
                verdict = True if hi <= 0 else False if lo > 0 else None
            elif isinstance(e, GT):
                verdict = True if lo > 0 else False if hi <= 0 else None
            elif isinstance(e, GE):
                verdict = True if lo >= 0 else False if hi < 0 else None
            elif isinstance(e, EQ) and (lo > 0 or hi < 0):
                verdict = False
            elif isinstance(e, NE) and (lo > 0 or hi < 0):
                verdict = True
            if verdict is not None:
                return IntImm("bool", int(verdict))
        return e

    def _logic(self, e: PrimExpr) -> PrimExpr:
        if isinstance(e, And) and not _is_int_const(e.a) and not _is_int_const(e.b):
            parts: list[PrimExpr] = []
            for c in conjuncts(e):
                if not any(c == p for p in parts):
                    parts.append(c)
            out = parts[0]
            for c in parts[1:]:
                out = And(out, c)
            return out
        if isinstance(e, And):
            if _is_int_const(e.a):
                return e.b if e.a.value else e.a  # type: ignore[attr-defined]
            if _is_int_const(e.b):
                return e.a if e.b.value else e.b  # type: ignore[attr-defined]
        if isinstance(e, Or):
            if _is_int_const(e.a):
                return e.a if e.a.value else e.b  # type: ignore[attr-defined]
            if _is_int_const(e.b):
                return e.b if e.b.value else e.a  # type: ignore[attr-defined]
        if isinstance(e, Not) and _is_int_const(e.a):
            return IntImm("bool", int(not e.a.value))  # type: ignore[attr-defined]
        if isinstance(e, Select) and _is_int_const(e.condition):
            return e.true_value if e.condition.value else e.false_value  # type: ignore[attr-defined]
        if isinstance(e, Cast):
            v = e.value
            if v.dtype == e.dtype:
                return v
            if (
                isinstance(v, Cast)
                and v.value.dtype == e.dtype
                and dt.is_integral(e.dtype)
                and dt.is_integral(v.dtype)
                and _widens(e.dtype, v.dtype)
            ):
                return v.value  # int32 -> int64 -> int32 loses nothing
            if isinstance(v, IntImm) and dt.is_integral(e.dtype):
                bits = dt.bits_of(e.dtype)
                if -(1 << (bits - 1)) <= v.value < (1 << (bits - 1)):
                    return IntImm(e.dtype, v.value)
            if isinstance(v, IntImm | FloatImm) and dt.is_float(e.dtype):
                return FloatImm(e.dtype, float(v.value))
        return e


#: the exponents whose powers become products (x**4 as (x*x)*(x*x)).
SMALL_POWERS = (1.0, 2.0, 3.0, 4.0)


def _small_power(e: Call) -> PrimExpr:
    """``pow(x, n)`` for a float constant n in :data:`SMALL_POWERS` as multiplications."""
    x, n = e.args
    if not (isinstance(n, FloatImm) and n.value in SMALL_POWERS and dt.is_float(e.dtype)):
        return e
    if n.value == 1.0:
        return x
    if n.value == 4.0:
        square = Mul(x, x)
        return Mul(square, square)
    product = Mul(x, x)
    return Mul(product, x) if n.value == 3.0 else product


def conjuncts(e: PrimExpr) -> list[PrimExpr]:
    """The operands of a chain of ``and``s, left to right (``e`` itself when it is none)."""
    if isinstance(e, And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def _widens(small: str, big: str) -> bool:
    """True if every value of integer type ``small`` is representable in ``big``."""
    if dt.is_int(small) == dt.is_int(big):
        return dt.bits_of(big) >= dt.bits_of(small)
    return dt.is_uint(small) and dt.bits_of(big) > dt.bits_of(small)


def _clamp(v: int) -> int:
    return max(-_INF, min(_INF, v))


def _collect(e: PrimExpr) -> tuple[dict[Any, int] | None, int]:
    """Decompose an integer expression into {term: coefficient} and a constant."""
    terms: dict[Any, int] = {}
    const = 0

    def walk(x: PrimExpr, scale: int) -> bool:
        nonlocal const
        if isinstance(x, IntImm):
            const += scale * x.value
            return True
        if isinstance(x, Add):
            return walk(x.a, scale) and walk(x.b, scale)
        if isinstance(x, Sub):
            return walk(x.a, scale) and walk(x.b, -scale)
        if isinstance(x, Mul):
            if isinstance(x.b, IntImm):
                return walk(x.a, scale * x.b.value)
            if isinstance(x.a, IntImm):
                return walk(x.b, scale * x.a.value)
        terms[x] = terms.get(x, 0) + scale
        return True

    if not walk(e, 1):
        return None, 0
    return {t: c for t, c in terms.items() if c != 0}, const


def _merge_div_mod(terms: dict[Any, int]) -> int:
    """Rewrite ``(x // c) * (c * m) + (x % c) * m`` into ``x * m`` in place; return constant."""
    extra = 0
    changed = True
    while changed:
        changed = False
        for t in list(terms):
            if not (isinstance(t, FloorDiv) and isinstance(t.b, IntImm) and t.b.value > 0):
                continue
            mod = FloorMod(t.a, t.b)
            m = terms.get(mod)
            if m is None or t not in terms or terms[t] != m * t.b.value:
                continue
            del terms[t]
            del terms[mod]
            inner, k = _collect(t.a)
            if inner is None:  # pragma: no cover - _collect always decomposes
                terms[t.a] = terms.get(t.a, 0) + m
            else:
                for x, c in inner.items():
                    terms[x] = terms.get(x, 0) + c * m
                extra += k * m
            for x in [x for x, c in terms.items() if c == 0]:
                del terms[x]
            changed = True
            break
    return extra


def _build(terms: dict[Any, int], const: int, dtype: str) -> PrimExpr:
    """Rebuild ``sum(coef * term) + const`` with positive terms first, readable signs."""
    out: PrimExpr | None = None
    ordered = [(t, c) for t, c in terms.items() if c > 0] + [
        (t, c) for t, c in terms.items() if c < 0
    ]
    for t, c in ordered:
        mag = abs(c)
        piece: PrimExpr = t if mag == 1 else Mul(t, IntImm(dtype, mag))
        if out is None:
            out = piece if c > 0 else Mul(t, IntImm(dtype, c))
        else:
            out = Add(out, piece) if c > 0 else Sub(out, piece)
    if out is None:
        return IntImm(dtype, const)
    if const > 0:
        return Add(out, IntImm(dtype, const))
    if const < 0:
        return Sub(out, IntImm(dtype, -const))
    return out


def simplify(node: Any, ranges: dict[Var, Bound] | None = None) -> Any:
    """Simplify an expression or statement; ``ranges`` gives known variable bounds."""
    s = Simplifier(ranges)
    if isinstance(node, PrimExpr):
        return s.visit_expr(node)
    return s.visit_stmt(node)


def const_int(e: PrimExpr) -> int | None:
    """The value of ``e`` if it simplifies to an integer constant, else None."""
    v = simplify(e)
    return v.value if isinstance(v, IntImm) else None


def _cast_bound(dtype: str, inner: Bound | None) -> Bound:
    """The bounds of a cast to integer ``dtype``: the value's own (``inner``, an integer's)
    when the type holds them, else the type's range (a narrowing cast wraps; a float's
    conversion lands in the type), unbounded for 64-bit types."""
    bits = dt.bits_of(dtype)
    if bits >= 64:
        return inner if inner is not None else (-_INF, _INF)
    if dt.is_bool(dtype):
        lo, hi = 0, 1
    elif dt.is_uint(dtype):
        lo, hi = 0, (1 << bits) - 1
    else:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if inner is not None and lo <= inner[0] and inner[1] <= hi:
        return inner
    return (lo, hi)
