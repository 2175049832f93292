"""The reference interpreter: run a PrimFunc on numpy arrays, no C compiler needed.

``interpret(func, args)`` translates the loop IR into a Python function (nested ``for``
loops over flat Python lists) and runs it; buffers are copied in and written back, so the
outputs land in the caller's arrays. Arithmetic is done in Python ints and float64, which is
at least as accurate as the C kernels; integer stores wrap to the buffer's width.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ember.errors import CompileError, EmberTypeError, EmberValueError
from ember.support.dtypes import numpy_dtype as _np_dtype
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
from ember.tir.op import CHECK_KIND, REINTERPRET_KIND
from ember.tir.printer import NameTable
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
)


def _safe(fn: Callable[..., float], ieee: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (fast, from math) with C's IEEE results where math raises (``ieee``, numpy)."""

    def run(*xs: Any) -> Any:
        if any(isinstance(x, np.ndarray) for x in xs):
            with np.errstate(all="ignore"):
                return np.vectorize(run)(*xs)
        try:
            return fn(*(float(x) for x in xs))
        except (OverflowError, ValueError, ZeroDivisionError):
            with np.errstate(all="ignore"):
                return float(ieee(*(np.float64(x) for x in xs)))

    return run


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _np_sigmoid(x: np.float64) -> np.float64:
    return np.float64(1.0) / (np.float64(1.0) + np.exp(-x))


def _exact(fn: Callable[[float], float]) -> Callable[[float], float]:
    """floor/ceil/trunc as floats, infinities and NaN unchanged."""
    return lambda x: float(fn(x)) if math.isfinite(x) else x


MATH: dict[str, Callable[..., Any]] = {
    "exp": _safe(math.exp, np.exp),
    "log": _safe(math.log, np.log),
    "sqrt": _safe(math.sqrt, np.sqrt),
    "rsqrt": _safe(lambda x: 1.0 / math.sqrt(x), lambda x: 1.0 / np.sqrt(x)),
    "tanh": _safe(math.tanh, np.tanh),
    "sigmoid": _safe(_sigmoid, _np_sigmoid),
    "erf": _safe(math.erf, math.erf),
    "fabs": _safe(math.fabs, np.fabs),
    "floor": _safe(_exact(math.floor), np.floor),
    "ceil": _safe(_exact(math.ceil), np.ceil),
    "round": _safe(lambda x: float(np.rint(x)), np.rint),
    "trunc": _safe(_exact(math.trunc), np.trunc),
    "sin": _safe(math.sin, np.sin),
    "cos": _safe(math.cos, np.cos),
    "tan": _safe(math.tan, np.tan),
    "asin": _safe(math.asin, np.arcsin),
    "acos": _safe(math.acos, np.arccos),
    "atan": _safe(math.atan, np.arctan),
    "sinh": _safe(math.sinh, np.sinh),
    "cosh": _safe(math.cosh, np.cosh),
    "asinh": _safe(math.asinh, np.arcsinh),
    "acosh": _safe(math.acosh, np.arccosh),
    "atanh": _safe(math.atanh, np.arctanh),
    "expm1": _safe(math.expm1, np.expm1),
    "log1p": _safe(math.log1p, np.log1p),
    "pow": _safe(math.pow, np.power),
    "fmod": _safe(math.fmod, np.fmod),
}


def _fdiv(a: Any, b: Any) -> Any:
    """IEEE float division: x / 0 is a signed infinity or NaN, vectors lane by lane."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        with np.errstate(all="ignore"):
            return np.divide(a, b)
    if b != 0:
        return a / b
    return math.copysign(math.inf, a) * math.copysign(1.0, b) if a else math.nan


def _tdiv(a: int, b: int) -> int:
    if b == 0:  # as the C code generator defines it (numpy's result), never a trap
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _tmod(a: int, b: int) -> int:
    return a - b * _tdiv(a, b) if b != 0 else 0


def _wrap(bits: int, signed: bool) -> Callable[[Any], Any]:
    mask = (1 << bits) - 1
    half = 1 << (bits - 1)

    def fn(v: Any) -> Any:
        if isinstance(v, np.ndarray):
            return np.vectorize(fn)(v)
        i = int(v) & mask
        return i - (1 << bits) if signed and i >= half else i

    return fn


def _to_int(bits: int, signed: bool) -> Callable[[Any], Any]:
    wrap = _wrap(bits, signed)

    def fn(v: Any) -> Any:
        if isinstance(v, float):
            if not math.isfinite(v):
                return 0
            return wrap(math.trunc(v))
        return wrap(v)

    return fn


def _f32(v: Any) -> Any:
    return float(np.float32(v)) if not isinstance(v, np.ndarray) else v.astype(np.float32)


def _vload(lst: list[Any], offs: np.ndarray) -> np.ndarray:
    if offs.min() < 0 or offs.max() >= len(lst):
        raise EmberValueError(f"interpret: vector access at offsets {offs} is out of bounds")
    return np.array([lst[int(k)] for k in offs])


def _vstore(lst: list[Any], offs: np.ndarray, vals: Any) -> None:
    if offs.min() < 0 or offs.max() >= len(lst):
        raise EmberValueError(f"interpret: vector access at offsets {offs} is out of bounds")
    vals = np.broadcast_to(np.asarray(vals), offs.shape)
    for k, v in zip(offs, vals, strict=True):
        lst[int(k)] = v.item()


_CMPS: dict[type, str] = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}
_ARITH: dict[type, str] = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%"}


class _Translator:
    def __init__(self, func: PrimFunc, check_bounds: bool = True) -> None:
        self.func = func
        self.check_bounds = check_bounds
        self.names = NameTable(tuple(keyword.kwlist) + ("_rt", "_o"))
        self.lines: list[str] = []
        self.depth = 0

    def var(self, v: Var) -> str:
        return self.names.get(v, "v_" + v.name)

    def buf(self, b: Buffer) -> str:
        name = self.names.get(b, "b_" + b.name)
        self.names.alias(b.data, b)  # a buffer's data pointer is its list
        return name

    def emit(self, text: str) -> None:
        self.lines.append("    " * (self.depth + 1) + text)

    def expr(self, e: PrimExpr) -> str:
        vec = dt.lanes_of(e.dtype) > 1
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, IntImm):
            return ("True" if e.value else "False") if e.dtype == "bool" else repr(e.value)
        if isinstance(e, FloatImm):
            return repr(e.value) if math.isfinite(e.value) else f"float('{e.value}')"
        if isinstance(e, StringImm):
            return repr(e.value)
        if type(e) in _ARITH:
            if dt.is_float(e.dtype) and type(e) in (FloorDiv, FloorMod):
                fn = "ffloordiv" if isinstance(e, FloorDiv) else "ffloormod"
                return f"_rt['{fn}']({self.expr(e.a)}, {self.expr(e.b)})"  # type: ignore[attr-defined]
            return f"({self.expr(e.a)} {_ARITH[type(e)]} {self.expr(e.b)})"  # type: ignore[attr-defined]
        if isinstance(e, Div):
            if dt.is_float(e.dtype):
                return f"_rt['fdiv']({self.expr(e.a)}, {self.expr(e.b)})"
            return f"_rt['tdiv']({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, Mod):
            if dt.is_float(e.dtype):
                return f"_rt['fmod']({self.expr(e.a)}, {self.expr(e.b)})"
            return f"_rt['tmod']({self.expr(e.a)}, {self.expr(e.b)})"
        if isinstance(e, Min | Max):
            name = type(e).__name__.lower()
            fn = f"_np.{name}imum" if vec else name
            return f"{fn}({self.expr(e.a)}, {self.expr(e.b)})"
        if type(e) in _CMPS:
            return f"({self.expr(e.a)} {_CMPS[type(e)]} {self.expr(e.b)})"  # type: ignore[attr-defined]
        if isinstance(e, And):
            return f"({self.expr(e.a)} {'&' if vec else 'and'} {self.expr(e.b)})"
        if isinstance(e, Or):
            return f"({self.expr(e.a)} {'|' if vec else 'or'} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"(~{self.expr(e.a)})" if vec else f"(not {self.expr(e.a)})"
        if isinstance(e, Select):
            c, t, f = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            return f"_np.where({c}, {t}, {f})" if vec else f"({t} if {c} else {f})"
        if isinstance(e, Cast):
            return f"{self.converter(e.dtype)}({self.expr(e.value)})"
        if isinstance(e, Call):
            args = ", ".join(self.expr(a) for a in e.args)
            if e.kind == "extern":
                return f"_rt['extern']({e.op!r})({args})"
            if e.kind == CHECK_KIND:
                return f"_rt['check']({args})"
            if e.kind == REINTERPRET_KIND:
                src, dst = e.args[0].dtype, e.dtype
                return f"_rt['reinterpret']({args}, {src!r}, {dst!r})"
            return f"_rt['math'][{e.op!r}]({args})"
        if isinstance(e, BufferLoad):
            off = self.expr(e.buffer.offset_of(e.indices))
            if vec:
                return f"_rt['vload']({self.buf(e.buffer)}, {off})"
            return f"{self.buf(e.buffer)}[{self.checked(e.buffer, off)}]"
        if isinstance(e, Ramp):
            b, s = self.expr(e.base), self.expr(e.stride)
            return f"(_np.arange({e.lanes}) * {s} + {b})"
        if isinstance(e, Broadcast):
            return f"_np.full({e.lanes}, {self.expr(e.value)})"
        if isinstance(e, Let):
            return f"(lambda {self.var(e.var)}: {self.expr(e.body)})({self.expr(e.value)})"
        raise CompileError(
            f"interpreter: unsupported expression {type(e).__name__} in {self.func.name}"
        )

    def checked(self, b: Buffer, off: str) -> str:
        """An index expression that raises instead of wrapping around or overflowing."""
        if not self.check_bounds:
            return off
        name = self.buf(b)
        return f"_o if 0 <= (_o := {off}) < len({name}) else _rt['oob']({b.name!r}, _o)"

    def converter(self, dtype: str) -> str:
        if dt.is_bool(dtype):
            return "bool"
        if dt.is_float(dtype):
            return "_rt['f32']" if dt.element_of(dtype) == "float32" else "float"
        return f"_rt['int_{dt.element_of(dtype)}']"

    def stmt(self, s: Stmt) -> None:
        if self.depth > 18:
            raise CompileError(
                f"interpreter: '{self.func.name}' nests more than 18 blocks, beyond what "
                "Python compiles; fuse loops or test it through the C backend"
            )
        if isinstance(s, SeqStmt):
            if not s.seq:
                self.emit("pass")
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, For):
            lo = self.expr(s.min)
            self.emit(f"for {self.var(s.loop_var)} in range({lo}, {lo} + {self.expr(s.extent)}):")
            self.block(s.body)
        elif isinstance(s, BufferStore):
            b = s.buffer
            val = self.expr(s.value)
            if dt.is_integral(b.dtype):
                val = f"_rt['int_{dt.element_of(b.dtype)}']({val})"
            elif dt.is_bool(b.dtype):
                val = f"bool({val})" if dt.lanes_of(s.value.dtype) == 1 else val
            off = self.expr(b.offset_of(s.indices))
            if dt.lanes_of(s.value.dtype) > 1 or any(dt.lanes_of(i.dtype) > 1 for i in s.indices):
                self.emit(f"_rt['vstore']({self.buf(b)}, {off}, {val})")
            else:
                self.emit(f"{self.buf(b)}[{self.checked(b, off)}] = {val}")
        elif isinstance(s, LetStmt):
            self.emit(f"{self.var(s.var)} = {self.expr(s.value)}")
            self.stmt(s.body)
        elif isinstance(s, IfThenElse):
            self.emit(f"if {self.expr(s.condition)}:")
            self.block(s.then_case)
            if s.else_case is not None:
                self.emit("else:")
                self.block(s.else_case)
        elif isinstance(s, Allocate):
            zero = "0.0" if dt.is_float(s.buffer.dtype) else "0"
            size = self.expr(s.buffer.num_elements())
            self.emit(f"{self.buf(s.buffer)} = [{zero}] * ({size})")
            self.stmt(s.body)
        elif isinstance(s, Evaluate):
            self.emit(self.expr(s.value))
        elif isinstance(s, AssertStmt):
            self.emit(f"if not {self.expr(s.condition)}:")
            self.emit(f"    raise _rt['error']({s.message!r})")
            self.stmt(s.body)
        else:
            raise CompileError(f"interpreter: unsupported statement {type(s).__name__}")

    def block(self, s: Stmt) -> None:
        self.depth += 1
        self.stmt(s)
        self.depth -= 1


def _runtime(func: PrimFunc, externs: Mapping[str, Callable[..., Any]]) -> dict[str, Any]:
    def extern(name: str) -> Callable[..., Any]:
        if name not in externs:
            raise EmberValueError(
                f"interpreter: call_extern of '{name}' but no Python implementation was given; "
                f"pass externs={{'{name}': fn}}"
            )
        return externs[name]

    def oob(buffer: str, offset: int) -> Any:
        raise EmberValueError(
            f"interpret: '{func.name}' accesses buffer '{buffer}' at flat offset {offset}, "
            "outside the buffer; the loop IR indexes out of bounds"
        )

    def check(index: int, extent: int, what: str) -> int:
        if not -extent <= index < extent:
            raise EmberValueError(
                f"interpret: '{func.name}': index {index} out of range [{-extent}, {extent}) "
                f"in {what}"
            )
        return index + extent if index < 0 else index

    rt: dict[str, Any] = {
        "math": MATH,
        "check": check,
        "extern": extern,
        "tdiv": _tdiv,
        "tmod": _tmod,
        "fdiv": _fdiv,
        "fmod": MATH["fmod"],
        "ffloordiv": lambda a, b: float(math.floor(a / b)) if b != 0 else math.nan,
        "ffloormod": lambda a, b: a - math.floor(a / b) * b if b != 0 else math.nan,
        "f32": _f32,
        "vload": _vload,
        "vstore": _vstore,
        "error": EmberValueError,
        "oob": oob,
        "reinterpret": _reinterpret,
    }
    for name in dt.SCALAR_DTYPES:
        if dt.is_integral(name):
            rt[f"int_{name}"] = _to_int(dt.bits_of(name), dt.is_int(name))
    return rt


def _reinterpret(value: Any, src: str, dst: str) -> Any:
    """The bits of ``value`` (of dtype ``src``) read as ``dst``, as a Python scalar."""
    return np.asarray(value, _np_dtype(src)).view(_np_dtype(dst)).item()


def translate(func: PrimFunc, check_bounds: bool = True) -> str:
    """The Python source the interpreter runs for ``func`` (for debugging)."""
    tr = _Translator(func, check_bounds)
    params = []
    for p in func.params:
        params.append(tr.buf(p) if isinstance(p, Buffer) else tr.var(p))
    for p in func.params:  # symbolic extents are bound from the arrays by the caller
        if isinstance(p, Buffer):
            for e in p.shape:
                if isinstance(e, Var):
                    params.append(tr.var(e)) if tr.var(e) not in params else None
    tr.lines.append(f"def kernel({', '.join([*params, '_rt', '_np', 'math'])}):")
    tr.stmt(func.body)
    return "\n".join(tr.lines) + "\n"


def interpret(
    func: PrimFunc,
    args: Sequence[Any],
    externs: Mapping[str, Callable[..., Any]] | None = None,
    check_bounds: bool = True,
) -> None:
    """Run ``func`` on ``args`` (numpy arrays for buffers, numbers for scalar params).

    Outputs are written into the given arrays. ``externs`` maps call_extern names to
    Python callables (buffer data pointers are passed as the flat Python lists). Every
    access is bounds-checked unless ``check_bounds=False`` (about 1.5x faster).
    """
    if len(args) != len(func.params):
        raise EmberValueError(
            f"interpret: '{func.name}' takes {len(func.params)} arguments, got {len(args)}"
        )
    source = translate(func, check_bounds)
    scope: dict[str, Any] = {}
    try:
        exec(compile(source, f"<ember.tir.interpret {func.name}>", "exec"), scope)  # noqa: S102
    except SyntaxError as err:  # pragma: no cover - guarded by the depth check
        raise CompileError(f"interpreter: could not translate '{func.name}': {err}") from err
    flat: list[Any] = []
    arrays: list[tuple[np.ndarray, list[Any]]] = []
    sym: dict[Var, int] = {}
    for p, a in zip(func.params, args, strict=True):
        if isinstance(p, Buffer):
            flat.append(_bind_buffer(func, p, a, sym, arrays))
        else:
            if isinstance(a, np.ndarray | list):
                raise EmberTypeError(f"interpret: scalar parameter '{p.name}' got an array")
            flat.append(float(a) if dt.is_float(p.dtype) else int(a))
            sym.setdefault(p, flat[-1])
    tr_params = []
    for p in func.params:
        if isinstance(p, Buffer):
            for e in p.shape:
                if isinstance(e, Var) and e not in tr_params and e not in func.params:
                    tr_params.append(e)
    flat.extend(sym[v] for v in tr_params)
    scope["kernel"](*flat, _runtime(func, externs or {}), np, math)
    for arr, lst in arrays:
        arr.reshape(-1)[:] = np.asarray(lst, dtype=np.float64 if arr.dtype.kind == "f" else None)


def _bind_buffer(
    func: PrimFunc,
    p: Buffer,
    a: Any,
    sym: dict[Var, int],
    arrays: list[tuple[np.ndarray, list[Any]]],
) -> list[Any]:
    where = f"interpret: argument '{p.name}' of '{func.name}'"
    if not isinstance(a, np.ndarray):
        raise EmberTypeError(f"{where} must be a numpy array, got {type(a).__name__}")
    if a.dtype != _np_dtype(p.dtype):
        raise EmberTypeError(f"{where} must have dtype {p.dtype}, got {a.dtype}")
    if a.ndim != len(p.shape):
        raise EmberValueError(f"{where} must have {len(p.shape)} dims, got shape {a.shape}")
    if not a.flags.c_contiguous:
        raise EmberValueError(f"{where} must be C-contiguous; pass np.ascontiguousarray(...)")
    for axis, (want, got) in enumerate(zip(p.shape, a.shape, strict=True)):
        if isinstance(want, IntImm) and want.value != got:
            raise EmberValueError(f"{where}: dim {axis} must be {want.value}, got {got}")
        if isinstance(want, Var) and sym.setdefault(want, got) != got:
            raise EmberValueError(
                f"{where}: dim {axis} ({want.name}) is {got}, but {sym[want]} elsewhere"
            )
    lst: list[Any] = a.reshape(-1).tolist()
    arrays.append((a, lst))
    return lst
