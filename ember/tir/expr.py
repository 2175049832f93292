"""Scalar expressions of the loop IR: immutable, typed, structurally comparable.

Every node is a frozen dataclass with a ``dtype``. ``==`` on two nodes compares them field
by field (variables by identity: two ``Var("i")`` are different variables); use
``ember.tir.structural_equal`` for equality up to renaming of bound variables. Python
operators build nodes: ``i * 4 + j``, ``a < b``, ``a // 4`` (floor division), ``a % 4``
(floor modulo); ``==``/``!=`` stay Python equality, so use ``tir.eq``/``tir.ne`` for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Union

from ember.errors import IRError
from ember.tir import dtype as dt

if TYPE_CHECKING:
    from ember.tir.buffer import Buffer

ExprLike = Union["PrimExpr", int, float, bool]


class PrimExpr:
    """Base class of every scalar expression; Python operators build new nodes."""

    dtype: str

    def __add__(self, other: ExprLike) -> PrimExpr:
        return Add(*_pair(self, other))

    def __radd__(self, other: ExprLike) -> PrimExpr:
        return Add(*_pair(other, self))

    def __sub__(self, other: ExprLike) -> PrimExpr:
        return Sub(*_pair(self, other))

    def __rsub__(self, other: ExprLike) -> PrimExpr:
        return Sub(*_pair(other, self))

    def __mul__(self, other: ExprLike) -> PrimExpr:
        return Mul(*_pair(self, other))

    def __rmul__(self, other: ExprLike) -> PrimExpr:
        return Mul(*_pair(other, self))

    def __truediv__(self, other: ExprLike) -> PrimExpr:
        return _true_div(*_pair(self, other))

    def __rtruediv__(self, other: ExprLike) -> PrimExpr:
        return _true_div(*_pair(other, self))

    def __floordiv__(self, other: ExprLike) -> PrimExpr:
        return FloorDiv(*_pair(self, other))

    def __rfloordiv__(self, other: ExprLike) -> PrimExpr:
        return FloorDiv(*_pair(other, self))

    def __mod__(self, other: ExprLike) -> PrimExpr:
        return FloorMod(*_pair(self, other))

    def __rmod__(self, other: ExprLike) -> PrimExpr:
        return FloorMod(*_pair(other, self))

    def __neg__(self) -> PrimExpr:
        return Sub(const(0, self.dtype), self)

    def __lt__(self, other: ExprLike) -> PrimExpr:
        return LT(*_pair(self, other))

    def __le__(self, other: ExprLike) -> PrimExpr:
        return LE(*_pair(self, other))

    def __gt__(self, other: ExprLike) -> PrimExpr:
        return GT(*_pair(self, other))

    def __ge__(self, other: ExprLike) -> PrimExpr:
        return GE(*_pair(self, other))

    def __and__(self, other: ExprLike) -> PrimExpr:
        return And(*_pair(self, other))

    def __or__(self, other: ExprLike) -> PrimExpr:
        return Or(*_pair(self, other))

    def __invert__(self) -> PrimExpr:
        return Not(self)

    def astype(self, dtype: str) -> PrimExpr:
        """This expression cast to ``dtype`` (no node if it already has that type)."""
        return self if self.dtype == dtype else Cast(dtype, self)

    def __str__(self) -> str:
        from ember.tir.printer import expr_to_str

        return expr_to_str(self)


def const(value: int | float | bool, dtype: str | None = None) -> PrimExpr:
    """A constant of ``dtype`` (int32 for Python ints, float32 for floats by default)."""
    if isinstance(value, PrimExpr):
        return value
    if dtype is None:
        dtype = (
            "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
        )
    dt.check_dtype(dtype)
    if dt.lanes_of(dtype) > 1:  # a constant of vector type is a broadcast scalar
        return Broadcast(const(value, dt.element_of(dtype)), dt.lanes_of(dtype))
    if dt.is_float(dtype):
        return FloatImm(dtype, float(value))
    if isinstance(value, float) and not value.is_integer():
        raise IRError(f"constant {value!r} cannot be represented as {dtype}; cast it explicitly")
    return IntImm(dtype, int(value))


def convert(value: ExprLike) -> PrimExpr:
    """Turn a Python number into a constant; return expressions unchanged."""
    if isinstance(value, PrimExpr):
        return value
    as_expr = getattr(value, "as_expr", None)
    if as_expr is not None:
        return as_expr()  # type: ignore[no-any-return]
    if isinstance(value, bool | int | float):
        return const(value)
    raise IRError(f"cannot use {value!r} (a {type(value).__name__}) as a loop-IR expression")


def _pair(a: ExprLike, b: ExprLike) -> tuple[PrimExpr, PrimExpr]:
    """Bring two operands to one dtype: constants adopt the other side, ints widen."""
    if hasattr(a, "as_expr"):
        a = a.as_expr()  # type: ignore[union-attr]
    if hasattr(b, "as_expr"):
        b = b.as_expr()  # type: ignore[union-attr]
    if not isinstance(a, PrimExpr) and isinstance(b, PrimExpr):
        return const(a, b.dtype if not dt.is_bool(b.dtype) else None), b
    if isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        return a, const(b, a.dtype if not dt.is_bool(a.dtype) else None)
    x, y = convert(a), convert(b)
    if x.dtype == y.dtype:
        return x, y
    return x.astype(_promote(x.dtype, y.dtype)), y.astype(_promote(x.dtype, y.dtype))


def _promote(a: str, b: str) -> str:
    """The common dtype of two operand types (float beats int, wider beats narrower)."""
    if dt.is_float(a) != dt.is_float(b):
        return a if dt.is_float(a) else b
    return a if dt.bits_of(a) >= dt.bits_of(b) else b


def _true_div(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if not dt.is_float(a.dtype):
        raise IRError(
            f"'/' on integer expressions ({a} / {b}) is ambiguous; use '//' (floor division) "
            "or tir.truncdiv (C division)"
        )
    return Div(a, b)


@dataclass(frozen=True, eq=False)
class Var(PrimExpr):
    """A scalar variable (loop variable, let-bound value, scalar or pointer parameter)."""

    name: str
    dtype: str = "int32"

    def __post_init__(self) -> None:
        dt.check_dtype(self.dtype)

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.dtype!r})"


@dataclass(frozen=True)
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    dtype: str
    value: int


@dataclass(frozen=True)
class FloatImm(PrimExpr):
    """A floating-point constant."""

    dtype: str
    value: float


@dataclass(frozen=True)
class StringImm(PrimExpr):
    """A string constant, used only as an argument of ``call_extern``."""

    value: str
    dtype: str = "handle"


@dataclass(frozen=True)
class BinaryOp(PrimExpr):
    """Base of two-operand arithmetic nodes; dtype is the operands' dtype."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.a.dtype)


class Add(BinaryOp):
    """a + b."""


class Sub(BinaryOp):
    """a - b."""


class Mul(BinaryOp):
    """a * b."""


class Div(BinaryOp):
    """a / b: true division for floats, C (truncating) division for integers."""


class Mod(BinaryOp):
    """a % b with C semantics (truncating; sign follows a)."""


class FloorDiv(BinaryOp):
    """floor(a / b) for integers."""


class FloorMod(BinaryOp):
    """a - floor(a / b) * b for integers (sign follows b)."""


class Min(BinaryOp):
    """min(a, b)."""


class Max(BinaryOp):
    """max(a, b)."""


@dataclass(frozen=True)
class CmpOp(PrimExpr):
    """Base of comparisons; the result is bool."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = "bool"

    def __post_init__(self) -> None:
        _bool_lanes(self, self.a)

    def __bool__(self) -> bool:
        raise IRError(
            f"the truth value of the loop-IR comparison {self} is unknown in Python; "
            "use tir.if_then_else / tir.Select or compare constants before building the IR"
        )


class EQ(CmpOp):
    """a == b."""


class NE(CmpOp):
    """a != b."""


class LT(CmpOp):
    """a < b."""


class LE(CmpOp):
    """a <= b."""


class GT(CmpOp):
    """a > b."""


class GE(CmpOp):
    """a >= b."""


@dataclass(frozen=True)
class And(PrimExpr):
    """Logical a && b of two bools."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = "bool"

    def __post_init__(self) -> None:
        _bool_lanes(self, self.a)


@dataclass(frozen=True)
class Or(PrimExpr):
    """Logical a || b of two bools."""

    a: PrimExpr
    b: PrimExpr
    dtype: str = "bool"

    def __post_init__(self) -> None:
        _bool_lanes(self, self.a)


@dataclass(frozen=True)
class Not(PrimExpr):
    """Logical !a of a bool."""

    a: PrimExpr
    dtype: str = "bool"

    def __post_init__(self) -> None:
        _bool_lanes(self, self.a)


def _bool_lanes(node: PrimExpr, operand: PrimExpr) -> None:
    """A comparison or logical op of vector operands is a vector of bools."""
    lanes = dt.lanes_of(operand.dtype)
    if node.dtype == "bool" and lanes > 1:
        object.__setattr__(node, "dtype", dt.with_lanes("bool", lanes))


@dataclass(frozen=True)
class Select(PrimExpr):
    """condition ? true_value : false_value (both sides may be evaluated)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.true_value.dtype)


@dataclass(frozen=True)
class Cast(PrimExpr):
    """value converted to dtype (C conversion rules)."""

    dtype: str
    value: PrimExpr


@dataclass(frozen=True)
class Call(PrimExpr):
    """A call: ``kind="intrin"`` for math intrinsics (exp, sqrt, ...), ``"extern"`` for C."""

    dtype: str
    op: str
    args: tuple[PrimExpr, ...]
    kind: str = "intrin"


@dataclass(frozen=True)
class BufferLoad(PrimExpr):
    """buffer[indices]: one element (or a vector when an index is a Ramp)."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:
            lanes = max((dt.lanes_of(i.dtype) for i in self.indices), default=1)
            object.__setattr__(self, "dtype", dt.with_lanes(self.buffer.dtype, lanes))


@dataclass(frozen=True)
class Ramp(PrimExpr):
    """The vector base, base+stride, ..., base+(lanes-1)*stride (explicit vector code)."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", dt.with_lanes(self.base.dtype, self.lanes))


@dataclass(frozen=True)
class Broadcast(PrimExpr):
    """The scalar value repeated in ``lanes`` vector lanes."""

    value: PrimExpr
    lanes: int
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", dt.with_lanes(self.value.dtype, self.lanes))


@dataclass(frozen=True)
class Let(PrimExpr):
    """``let var = value in body`` as an expression."""

    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str = field(default="")

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.body.dtype)
