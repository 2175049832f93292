"""Expression builders of the loop IR: min/max, select, casts, math intrinsics, call_extern.

Example::

    from ember import tir
    x = tir.Var("x", "float32")
    y = tir.exp(tir.max(x, 0.0))            # Call("exp", [Max(x, 0.0)])
    z = tir.call_extern("int32", "my_kernel", buf.data, 16)
"""

from __future__ import annotations

from ember.errors import IRError
from ember.tir import dtype as dt
from ember.tir.expr import (
    EQ,
    NE,
    And,
    Call,
    Div,
    ExprLike,
    IntImm,
    Max,
    Min,
    Mod,
    Not,
    Or,
    PrimExpr,
    Select,
    StringImm,
    _pair,
    convert,
)

# Math intrinsics with their arity; codegen maps each to <math.h>, the interpreter to numpy.
MATH_INTRINSICS: dict[str, int] = {
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "rsqrt": 1,
    "tanh": 1,
    "sigmoid": 1,
    "erf": 1,
    "fabs": 1,
    "floor": 1,
    "ceil": 1,
    "round": 1,
    "trunc": 1,
    "sin": 1,
    "cos": 1,
    "tan": 1,
    "asin": 1,
    "acos": 1,
    "atan": 1,
    "sinh": 1,
    "cosh": 1,
    "asinh": 1,
    "acosh": 1,
    "atanh": 1,
    "expm1": 1,
    "log1p": 1,
    "pow": 2,
    "fmod": 2,
}


def min(a: ExprLike, b: ExprLike) -> PrimExpr:  # noqa: A001 - TVM's name
    """The smaller of a and b."""
    return Min(*_pair(a, b))


def max(a: ExprLike, b: ExprLike) -> PrimExpr:  # noqa: A001 - TVM's name
    """The larger of a and b."""
    return Max(*_pair(a, b))


def eq(a: ExprLike, b: ExprLike) -> PrimExpr:
    """a == b as a loop-IR comparison."""
    return EQ(*_pair(a, b))


def ne(a: ExprLike, b: ExprLike) -> PrimExpr:
    """a != b as a loop-IR comparison."""
    return NE(*_pair(a, b))


def logical_and(*conds: ExprLike) -> PrimExpr:
    """The conjunction of one or more bool expressions."""
    if not conds:
        raise IRError("logical_and needs at least one condition")
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = And(out, _as_bool(c))
    return out


def logical_or(*conds: ExprLike) -> PrimExpr:
    """The disjunction of one or more bool expressions."""
    if not conds:
        raise IRError("logical_or needs at least one condition")
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = Or(out, _as_bool(c))
    return out


def logical_not(a: ExprLike) -> PrimExpr:
    """The negation of a bool expression."""
    return Not(_as_bool(a))


def _as_bool(a: ExprLike) -> PrimExpr:
    e = convert(a)
    if not dt.is_bool(e.dtype):
        raise IRError(f"expected a bool condition, got {e} of dtype {e.dtype}; compare it first")
    return e


def if_then_else(cond: ExprLike, t: ExprLike, f: ExprLike) -> PrimExpr:
    """cond ? t : f (TVM's if_then_else; lowered to a C conditional expression)."""
    tv, fv = _pair(t, f)
    return Select(_as_bool(cond), tv, fv)


select = if_then_else


def cast(dtype: str, value: ExprLike) -> PrimExpr:
    """value converted to dtype."""
    dt.check_dtype(dtype)
    return convert(value).astype(dtype)


def truncdiv(a: ExprLike, b: ExprLike) -> PrimExpr:
    """Integer division rounding toward zero (C's ``/``)."""
    return Div(*_pair(a, b))


def truncmod(a: ExprLike, b: ExprLike) -> PrimExpr:
    """Integer remainder with C's ``%`` semantics."""
    return Mod(*_pair(a, b))


def call_intrin(dtype: str, name: str, *args: ExprLike) -> PrimExpr:
    """A call to a math intrinsic listed in MATH_INTRINSICS."""
    if name not in MATH_INTRINSICS:
        raise IRError(
            f"unknown math intrinsic {name!r}; known: {', '.join(sorted(MATH_INTRINSICS))}"
        )
    if len(args) != MATH_INTRINSICS[name]:
        raise IRError(
            f"intrinsic {name} takes {MATH_INTRINSICS[name]} argument(s), got {len(args)}"
        )
    exprs = tuple(convert(a).astype(dtype) for a in args)
    return Call(dtype, name, exprs, "intrin")


def call_extern(dtype: str, name: str, *args: ExprLike | str) -> PrimExpr:
    """A call to the C function ``name`` (declared by the caller's library), returning dtype."""
    if not name.isidentifier():
        raise IRError(f"call_extern needs a C identifier as function name, got {name!r}")
    exprs = tuple(StringImm(a) if isinstance(a, str) else convert(a) for a in args)
    return Call(dt.check_dtype(dtype), name, exprs, "extern")


#: the Call kind of run-time checks (``index_check``): not math, not a C function
#: the kind of a call to another kernel's packed symbol, linked into the same library.
CPACKED_KIND = "cpacked"


def call_cpacked(name: str, *args: ExprLike) -> PrimExpr:
    """A call of kernel ``name``'s packed entry (TVM's ``call_cpacked``): each buffer data
    argument is passed as a DLTensor, any other handle as an opaque handle; int32 status."""
    if not name.isidentifier():
        raise IRError(f"call_cpacked needs a C identifier as function name, got {name!r}")
    return Call("int32", name, tuple(convert(a) for a in args), CPACKED_KIND)


#: the kind of a call of a packed function found at run time through the module (by name).
PACKED_KIND = "packed"


def call_packed(name: str, *args: ExprLike) -> PrimExpr:
    """A call of the packed function ``name``, looked up once through the runtime
    (``EmberBackendGetFuncFromEnv``: the loading module and its imports, then the global
    registry; TVM's ``call_packed``); arguments as for :func:`call_cpacked`; int32 status."""
    if not name or not all(c.isalnum() or c in "_.-:/" for c in name) or not name.isascii():
        raise IRError(
            f"call_packed needs a function name of letters, digits and '_.-:/', got {name!r}"
        )
    return Call("int32", name, tuple(convert(a) for a in args), PACKED_KIND)


CHECK_KIND = "check"


def index_check(index: ExprLike, extent: ExprLike, what: str) -> PrimExpr:
    """``index`` into an axis of ``extent``, wrapped once if negative (ONNX), as int64.

    Checked at run time: outside ``[-extent, extent)`` the kernel fails with an error
    naming ``what`` (the C code reads position 0 meanwhile, never outside the tensor). A
    constant index is checked now and needs no run-time check; so does one whose range
    the code generator proves inside ``[0, extent)``.
    """
    i = convert(index)
    n = convert(extent)
    if isinstance(i, IntImm) and isinstance(n, IntImm):
        if not -n.value <= i.value < n.value:
            raise IRError(
                f"index {i.value} out of range [{-n.value}, {n.value}) in {what}; "
                "fix the constant index in the model"
            )
        return IntImm("int64", i.value + n.value if i.value < 0 else i.value)
    args = (i.astype("int64"), n.astype("int64"), StringImm(what))
    return Call("int64", "index_check", args, CHECK_KIND)


#: the kind of a bit reinterpretation: the value's bits read as another dtype of their width.
REINTERPRET_KIND = "reinterpret"


def reinterpret(dtype: str, value: ExprLike) -> PrimExpr:
    """The bits of scalar ``value`` read as ``dtype`` of the same width (ONNX BitCast)."""
    e = convert(value)
    dt.check_dtype(dtype)
    if dt.lanes_of(e.dtype) != 1 or dt.lanes_of(dtype) != 1:
        raise IRError(f"reinterpret takes scalars, got {e.dtype} -> {dtype}")
    if dt.bits_of(e.dtype) != dt.bits_of(dtype):
        raise IRError(
            f"reinterpret needs dtypes of one width, got {e.dtype} ({dt.bits_of(e.dtype)} bits) "
            f"-> {dtype} ({dt.bits_of(dtype)} bits)"
        )
    if e.dtype == dtype:
        return e
    return Call(dtype, "reinterpret", (e,), REINTERPRET_KIND)


def _unary(name: str):  # type: ignore[no-untyped-def]
    def fn(x: ExprLike) -> PrimExpr:
        e = convert(x)
        if not dt.is_float(e.dtype):
            e = e.astype("float32")
        return Call(e.dtype, name, (e,), "intrin")

    fn.__name__ = name
    fn.__doc__ = f"The math intrinsic {name}(x) (float; integer inputs are cast to float32)."
    return fn


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
erf = _unary("erf")
fabs = _unary("fabs")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")  # noqa: A001 - TVM's name
trunc = _unary("trunc")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
asin = _unary("asin")
acos = _unary("acos")
atan = _unary("atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
asinh = _unary("asinh")
acosh = _unary("acosh")
atanh = _unary("atanh")
expm1 = _unary("expm1")
log1p = _unary("log1p")


def pow(x: ExprLike, y: ExprLike) -> PrimExpr:  # noqa: A001 - TVM's name
    """x raised to y (float)."""
    a, b = _pair(x, y)
    if not dt.is_float(a.dtype):
        a, b = a.astype("float32"), b.astype("float32")
    return Call(a.dtype, "pow", (a, b), "intrin")


def abs(x: ExprLike) -> PrimExpr:  # noqa: A001 - TVM's name
    """|x| for floats (fabs) and integers (select)."""
    e = convert(x)
    if dt.is_float(e.dtype):
        return Call(e.dtype, "fabs", (e,), "intrin")
    return Select(e < 0, -e, e)
