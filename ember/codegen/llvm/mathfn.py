"""Math intrinsics in LLVM IR: fast float32 exp/tanh/erf/sigmoid as our own polynomials.

The float32 versions of exp, tanh, erf and sigmoid are ``alwaysinline`` internal
functions written here in IR, for scalars and for every vector width the code uses, so
the loop vectorizer turns a loop calling them into straight vector code (no libm call
per element). exp is Cephes' range reduction and degree-5 polynomial (results below
FLT_MIN flush to 0, as the C back end's vector exp does); tanh is Cephes' odd polynomial
under |x| < 0.625 and ``1 - 2 / (exp(2|x|) + 1)`` above; erf the rational approximation
on [-4, 4] that Eigen and XLA use; sigmoid ``(x >= 0 ? 1 : t) / (1 + t)``, ``t =
exp(-|x|)``. float64 uses LLVM's intrinsics or libm; functions without an LLVM
intrinsic are libm calls, lane by lane on vectors.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.codegen.llvm.ir_text import FunctionWriter, ModuleContext, Val, float_literal, splat
from ember.errors import CompileError
from ember.tir import dtype as dt

#: intrinsic -> LLVM intrinsic stem (vector-capable).
LLVM_INTRINSICS = {
    "sqrt": "sqrt",
    "fabs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "round": "rint",
    "trunc": "trunc",
    "exp": "exp",
    "log": "log",
    "sin": "sin",
    "cos": "cos",
    "pow": "pow",
}
#: intrinsics that are plain libm calls (double names; float adds ``f``).
LIBM = [
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "expm1",
    "log1p",
    "tanh",
    "erf",
]
#: intrinsics written here as polynomials for float32.
POLYNOMIAL = ("exp", "tanh", "erf", "sigmoid")

_PURE = "nounwind willreturn memory(none)"


def _suffix(ty: str) -> str:
    """The intrinsic type suffix: float -> f32, <8 x float> -> v8f32."""
    base = {"float": "f32", "double": "f64"}
    if ty.startswith("<"):
        lanes, elem = ty[1:-1].split(" x ")
        return f"v{lanes}{base[elem]}"
    return base[ty]


def intrinsic(ctx: ModuleContext, stem: str, ty: str, arity: int = 1) -> str:
    """Declare ``llvm.<stem>.<suffix>`` for ``ty`` and return its name."""
    name = f"llvm.{stem}.{_suffix(ty)}"
    params = ", ".join([ty] * arity)
    ctx.declare(name, f"declare {ty} @{name}({params})")
    return name


class _Poly:
    """Builds one polynomial helper's body for type ``ty`` (scalar or vector float)."""

    def __init__(self, ctx: ModuleContext, ty: str) -> None:
        self.ctx = ctx
        self.ty = ty
        self.w = FunctionWriter(ctx)
        self.w.lines.append("entry:")
        vec = ty.startswith("<")
        self.ity = ty.replace("float", "i32") if vec else "i32"
        self.bty = ty.replace("float", "i1") if vec else "i1"

    def c(self, value: float) -> str:
        """A float constant of the helper's type."""
        lit = float_literal(value, "float32")
        return splat(self.ty, lit) if self.ty.startswith("<") else lit

    def ic(self, value: int) -> str:
        """An i32 constant of the helper's integer type."""
        return splat(self.ity, str(value)) if self.ity.startswith("<") else str(value)

    def f(self, op: str, a: str, b: str) -> str:
        """A float binary op."""
        return self.w.inst(self.ty, f"{op} {self.ty} {a}, {b}").ref

    def cmp(self, pred: str, a: str, b: str) -> str:
        """A float comparison."""
        return self.w.inst(self.bty, f"fcmp {pred} {self.ty} {a}, {b}").ref

    def sel(self, c: str, a: str, b: str) -> str:
        """select c ? a : b."""
        return self.w.inst(self.ty, f"select {self.bty} {c}, {self.ty} {a}, {self.ty} {b}").ref

    def call(self, stem: str, a: str) -> str:
        """An LLVM intrinsic of one argument."""
        name = intrinsic(self.ctx, stem, self.ty)
        return self.w.inst(self.ty, f"call {self.ty} @{name}({self.ty} {a})").ref

    def muladd(self, a: str, b: str, c: str) -> str:
        """``a * b + c`` as ``llvm.fmuladd``: one FMA where the target has it."""
        name = intrinsic(self.ctx, "fmuladd", self.ty, 3)
        t = self.ty
        return self.w.inst(t, f"call {t} @{name}({t} {a}, {t} {b}, {t} {c})").ref

    def horner(self, x: str, coeffs: list[float]) -> str:
        """coeffs[0] * x^n + ... + coeffs[n] by Horner's rule, one multiply-add a step."""
        acc = self.c(coeffs[0])
        for k in coeffs[1:]:
            acc = self.muladd(acc, x, self.c(k))
        return acc

    def finish(self, name: str, result: str) -> str:
        """The helper's definition text."""
        self.w.op(f"ret {self.ty} {result}")
        return (
            f"define internal {self.ty} @{name}({self.ty} %x) alwaysinline nounwind {{\n"
            f"{self.w.body()}\n}}"
        )


def _exp_reduced(p: _Poly, xc: str) -> tuple[str, str]:
    """``(y, n)``: ``exp(xc) = y * 2^n``, ``xc`` in [-87.34, 88.73] (Cephes' reduction)."""
    n = p.call("floor", p.f("fadd", p.f("fmul", xc, p.c(1.4426950408889634)), p.c(0.5)))
    r = p.f("fsub", xc, p.f("fmul", n, p.c(0.693359375)))
    r = p.f("fsub", r, p.f("fmul", n, p.c(-2.12194440e-4)))
    z = p.f("fmul", r, r)
    poly = p.horner(
        r, [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1]
    )
    poly = p.muladd(poly, r, p.c(5.0000001201e-1))
    return p.f("fadd", p.muladd(poly, z, r), p.c(1.0)), n


def _scaled(p: _Poly, y: str, exponent: str) -> str:
    """``y * 2^exponent`` for an integer ``exponent`` of a normal float (-126..127)."""
    w, ity = p.w, p.ity
    biased = w.inst(ity, f"add {ity} {exponent}, {p.ic(127)}").ref
    bits = w.inst(ity, f"shl {ity} {biased}, {p.ic(23)}").ref
    return p.f("fmul", y, w.inst(p.ty, f"bitcast {ity} {bits} to {p.ty}").ref)


def _exp(p: _Poly, x: str) -> str:
    nan = p.cmp("uno", x, x)
    xs = p.sel(nan, p.c(0.0), x)
    hi = p.cmp("ogt", xs, p.c(88.72283))
    lo = p.cmp("olt", xs, p.c(-87.33654))
    xc = p.sel(lo, p.c(-87.33654), p.sel(hi, p.c(88.72283), xs))
    y, n = _exp_reduced(p, xc)
    w, ity = p.w, p.ity
    ni = w.inst(ity, f"fptosi {p.ty} {n} to {ity}").ref
    half = w.inst(ity, f"ashr {ity} {ni}, {p.ic(1)}").ref
    rest = w.inst(ity, f"sub {ity} {ni}, {half}").ref
    y = _scaled(p, _scaled(p, y, half), rest)
    y = p.sel(hi, p.c(float("inf")), y)
    y = p.sel(lo, p.c(0.0), y)
    return p.sel(nan, x, y)


def _exp_nonpositive(p: _Poly, x: str) -> str:
    """``exp(x)`` for ``x <= 0`` or NaN (sigmoid's ``exp(-|x|)``), equal to ``_exp`` there
    with fewer steps: no upper clamp, and ``2^n`` (n in -126..0) is one normal scale, so
    ``y * 2^n`` rounds as ``y * 2^half * 2^rest`` does (the first product is exact)."""
    lo = p.cmp("ult", x, p.c(-87.33654))  # below the range, or NaN
    y, n = _exp_reduced(p, p.sel(lo, p.c(-87.33654), x))
    ni = p.w.inst(p.ity, f"fptosi {p.ty} {n} to {p.ity}").ref
    y = p.sel(lo, p.c(0.0), _scaled(p, y, ni))
    return p.sel(p.cmp("uno", x, x), x, y)


def _tanh(p: _Poly, x: str, exp_name: str) -> str:
    ax = p.call("fabs", x)
    z = p.f("fmul", x, x)
    poly = p.horner(z, [-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1])
    poly = p.f("fadd", p.f("fmul", poly, z), p.c(-3.33332819422e-1))
    small = p.f("fadd", p.f("fmul", p.f("fmul", poly, z), x), x)
    e = p.w.inst(p.ty, f"call {p.ty} @{exp_name}({p.ty} {p.f('fmul', ax, p.c(2.0))})").ref
    large = p.f("fsub", p.c(1.0), p.f("fdiv", p.c(2.0), p.f("fadd", e, p.c(1.0))))
    sign = intrinsic(p.ctx, "copysign", p.ty, 2)
    large = p.w.inst(p.ty, f"call {p.ty} @{sign}({p.ty} {large}, {p.ty} {x})").ref
    return p.sel(p.cmp("olt", ax, p.c(0.625)), small, large)


_ERF_P = [
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
]
_ERF_Q = [
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
]


def _erf(p: _Poly, x: str) -> str:
    xc = p.sel(p.cmp("olt", x, p.c(-4.0)), p.c(-4.0), x)
    xc = p.sel(p.cmp("ogt", xc, p.c(4.0)), p.c(4.0), xc)
    z = p.f("fmul", xc, xc)
    num = p.f("fmul", xc, p.horner(z, _ERF_P))
    return p.f("fdiv", num, p.horner(z, _ERF_Q))


def _sigmoid(p: _Poly, x: str, exp_name: str) -> str:
    neg = p.f("fsub", p.c(-0.0), p.call("fabs", x))
    t = p.w.inst(p.ty, f"call {p.ty} @{exp_name}({p.ty} {neg})").ref
    top = p.sel(p.cmp("oge", x, p.c(0.0)), p.c(1.0), t)
    return p.f("fdiv", top, p.f("fadd", p.c(1.0), t))


def polynomial(ctx: ModuleContext, op: str, ty: str) -> str:
    """The name of the float32 helper ``op`` for type ``ty``, defining it on first use."""
    name = f"ember_llvm_{op}_{_suffix(ty)}"
    if name in ctx.helpers:
        return name
    p = _Poly(ctx, ty)
    builders: dict[str, Callable[[], str]] = {
        "exp": lambda: _exp(p, "%x"),
        "tanh": lambda: _tanh(p, "%x", polynomial(ctx, "exp", ty)),
        "erf": lambda: _erf(p, "%x"),
        "exp_nonpositive": lambda: _exp_nonpositive(p, "%x"),
        "sigmoid": lambda: _sigmoid(p, "%x", polynomial(ctx, "exp_nonpositive", ty)),
    }
    ctx.helpers[name] = p.finish(name, builders[op]())
    return name


def math_call(w: FunctionWriter, op: str, dtype: str, args: list[Val], where: str) -> Val:
    """The value of intrinsic ``op`` of ``dtype`` on ``args`` (scalars or vectors)."""
    if not dt.is_float(dtype):
        raise CompileError(f"LLVM codegen{where}: intrinsic {op} needs a float, got {dtype}")
    ty = args[0].ty
    f32 = dt.element_of(dtype) == "float32"
    listed = ", ".join(a.typed() for a in args)
    if op in POLYNOMIAL and f32:
        return w.inst(ty, f"call {ty} @{polynomial(w.ctx, op, ty)}({listed})")
    if op == "rsqrt":
        root = math_call(w, "sqrt", dtype, args, where)
        one = float_literal(1.0, dtype)
        return w.inst(ty, f"fdiv {ty} {splat(ty, one) if ty[0] == '<' else one}, {root.ref}")
    if op == "fmod":
        return w.inst(ty, f"frem {ty} {args[0].ref}, {args[1].ref}")
    if op == "sigmoid":  # float64
        neg = math_call(w, "exp", dtype, [w.inst(ty, f"fneg {ty} {args[0].ref}")], where)
        one = float_literal(1.0, dtype)
        one = splat(ty, one) if ty[0] == "<" else one
        return w.inst(ty, f"fdiv {ty} {one}, {w.inst(ty, f'fadd {ty} {one}, {neg.ref}').ref}")
    if op in LLVM_INTRINSICS:
        name = intrinsic(w.ctx, LLVM_INTRINSICS[op], ty, len(args))
        return w.inst(ty, f"call {ty} @{name}({listed})")
    if op not in LIBM:
        raise CompileError(f"LLVM codegen{where}: unknown intrinsic '{op}'")
    scalar = "float" if f32 else "double"
    name = op + ("f" if f32 else "")
    w.ctx.declare(name, f"declare {scalar} @{name}({scalar}) {_PURE}")
    if ty == scalar:
        return w.inst(ty, f"call {ty} @{name}({listed})")
    lanes = int(ty[1:].split(" x ")[0])
    acc = Val(ty, "poison")
    for k in range(lanes):
        lane = w.inst(scalar, f"extractelement {ty} {args[0].ref}, i32 {k}")
        res = w.inst(scalar, f"call {scalar} @{name}({lane.typed()})")
        acc = w.inst(ty, f"insertelement {ty} {acc.ref}, {res.typed()}, i32 {k}")
    return acc
