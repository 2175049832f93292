"""A readable, deterministic text form of the loop IR (Python-like, TVMScript in spirit).

Variables with the same name but different identity get suffixes (``i``, ``i_1``) in the
order they are first printed, so the output depends only on the IR's structure.
"""

from __future__ import annotations

from typing import Any

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
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    StorageKind,
)


class NameTable:
    """Gives each distinct object a unique, deterministic identifier derived from its name."""

    def __init__(self, reserved: tuple[str, ...] = ()) -> None:
        self._names: dict[int, str] = {}
        self._used: set[str] = set(reserved)
        self._keep: list[Any] = []

    def get(self, obj: Any, hint: str) -> str:
        """The name of ``obj``, creating one from ``hint`` on first use."""
        key = id(obj)
        if key in self._names:
            return self._names[key]
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "v" + base
        name = base
        n = 1
        while name in self._used:
            name = f"{base}_{n}"
            n += 1
        self._used.add(name)
        self._names[key] = name
        self._keep.append(obj)  # keep ids stable while the table lives
        return name

    def alias(self, obj: Any, other: Any) -> None:
        """Make ``obj`` print with the (already assigned) name of ``other``."""
        self._names[id(obj)] = self._names[id(other)]
        self._keep.append(obj)


_BIN: dict[type, tuple[str, int]] = {
    Add: ("+", 5),
    Sub: ("-", 5),
    Mul: ("*", 6),
    Div: ("/", 6),
    Mod: ("%", 6),
}
_BIN.update({FloorDiv: ("//", 6), FloorMod: ("%%", 6)})
_CMPS = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}


class Printer:
    """Prints expressions, statements and functions with one shared name table."""

    def __init__(self) -> None:
        self.names = NameTable()

    def var(self, v: Var) -> str:
        """The printed name of a variable."""
        return self.names.get(v, v.name)

    def buf(self, b: Buffer) -> str:
        """The printed name of a buffer (its data pointer prints the same)."""
        if not isinstance(b, Buffer):  # ill-formed IR still prints, for error messages
            return repr(b)
        name = self.names.get(b, b.name)
        self.names.alias(b.data, b)
        return name

    def expr(self, e: PrimExpr, prec: int = 0) -> str:
        """Print an expression, parenthesised if its precedence is below ``prec``."""
        text, own = self._expr(e)
        return f"({text})" if own < prec else text

    def _expr(self, e: PrimExpr) -> tuple[str, int]:
        if isinstance(e, Var):
            return self.var(e), 9
        if isinstance(e, IntImm):
            if e.dtype == "bool":
                return ("True" if e.value else "False"), 9
            if e.dtype == "int32":
                return str(e.value), 9 if e.value >= 0 else 7
            return f"{e.dtype}({e.value})", 9
        if isinstance(e, FloatImm):
            text = repr(e.value)
            return (f"{text}f" if e.dtype == "float32" else f"{e.dtype}({text})"), 9
        if isinstance(e, StringImm):
            return repr(e.value), 9
        if type(e) in _BIN:
            sym, p = _BIN[type(e)]
            sym = "%" if sym == "%%" else sym
            if isinstance(e, Mod | Div) and dt.is_integral(e.dtype):
                name = "truncmod" if isinstance(e, Mod) else "truncdiv"
                return f"{name}({self.expr(e.a)}, {self.expr(e.b)})", 9  # type: ignore[attr-defined]
            assert isinstance(e, BinaryOp)
            return f"{self.expr(e.a, p)} {sym} {self.expr(e.b, p + 1)}", p
        if isinstance(e, Min | Max):
            return f"{type(e).__name__.lower()}({self.expr(e.a)}, {self.expr(e.b)})", 9
        if isinstance(e, CmpOp):
            return f"{self.expr(e.a, 5)} {_CMPS[type(e)]} {self.expr(e.b, 5)}", 4
        if isinstance(e, And):
            return f"{self.expr(e.a, 2)} and {self.expr(e.b, 3)}", 2
        if isinstance(e, Or):
            return f"{self.expr(e.a, 1)} or {self.expr(e.b, 2)}", 1
        if isinstance(e, Not):
            return f"not {self.expr(e.a, 3)}", 3
        if isinstance(e, Select):
            parts = (self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value))
            return f"select({', '.join(parts)})", 9
        if isinstance(e, Cast):
            return f"{e.dtype}({self.expr(e.value)})", 9
        if isinstance(e, Call):
            args = ", ".join(self.expr(a) for a in e.args)
            if e.kind == "extern":
                return f'call_extern("{e.dtype}", "{e.op}", {args})'.replace(", )", ")"), 9
            return f"{e.op}({args})", 9
        if isinstance(e, BufferLoad):
            idx = ", ".join(self.expr(i) for i in e.indices) or "()"
            return f"{self.buf(e.buffer)}[{idx}]", 9
        if isinstance(e, Ramp):
            return f"ramp({self.expr(e.base)}, {self.expr(e.stride)}, {e.lanes})", 9
        if isinstance(e, Broadcast):
            return f"broadcast({self.expr(e.value)}, {e.lanes})", 9
        if isinstance(e, Let):
            return f"let({self.var(e.var)} = {self.expr(e.value)}, {self.expr(e.body)})", 9
        return f"<{type(e).__name__}>", 9

    def buffer_decl(self, b: Buffer) -> str:
        """``Buffer((shape), "dtype")`` with strides/scope when they are not the defaults."""
        shape = ", ".join(self.expr(s) for s in b.shape)
        shape = f"({shape},)" if len(b.shape) == 1 else f"({shape})"
        text = f'Buffer({shape}, "{b.dtype}"'
        if b.strides:
            text += f", strides=({', '.join(self.expr(s) for s in b.strides)})"
        if b.scope != "global":
            text += f', scope="{b.scope}"'
        return text + ")"

    def stmt(self, s: Stmt, indent: int = 0) -> list[str]:
        """Print a statement as lines."""
        pad = "  " * indent
        if isinstance(s, SeqStmt):
            out: list[str] = []
            for x in s.seq:
                out.extend(self.stmt(x, indent))
            return out or [pad + "pass"]
        if isinstance(s, For):
            from ember.tir.simplify import simplify

            end = simplify(s.min + s.extent)
            rng = (
                self.expr(s.extent) if _is_zero(s.min) else f"{self.expr(s.min)}, {self.expr(end)}"
            )
            fn = "range" if s.kind is ForKind.SERIAL else s.kind.value
            head = f"{pad}for {self.var(s.loop_var)} in {fn}({rng}):"
            if s.annotations:
                head += "  # " + ", ".join(f"{k}={v!r}" for k, v in s.annotations)
            return [head, *self.stmt(s.body, indent + 1)]
        if isinstance(s, BufferStore):
            idx = ", ".join(self.expr(i) for i in s.indices) or "()"
            return [f"{pad}{self.buf(s.buffer)}[{idx}] = {self.expr(s.value)}"]
        if isinstance(s, LetStmt):
            head = f"{pad}{self.var(s.var)}: {s.var.dtype} = {self.expr(s.value)}"
            return [head, *self.stmt(s.body, indent)]
        if isinstance(s, IfThenElse):
            out = [f"{pad}if {self.expr(s.condition)}:", *self.stmt(s.then_case, indent + 1)]
            if s.else_case is not None:
                out += [f"{pad}else:", *self.stmt(s.else_case, indent + 1)]
            return out
        if isinstance(s, Allocate):
            where = s.storage.value
            if s.storage is StorageKind.STATIC:
                where += f", pool={s.pool!r}, offset={s.offset}"
            head = f"{pad}{self.buf(s.buffer)} = allocate({self.buffer_decl(s.buffer)}, {where})"
            return [head, *self.stmt(s.body, indent)]
        if isinstance(s, Evaluate):
            return [f"{pad}{self.expr(s.value)}"]
        if isinstance(s, AssertStmt):
            head = f"{pad}assert {self.expr(s.condition)}, {s.message!r}"
            return [head, *self.stmt(s.body, indent)]
        return [f"{pad}<{type(s).__name__}>"]

    def func(self, f: PrimFunc) -> str:
        """Print a whole function."""
        params = []
        for p in f.params:
            if isinstance(p, Buffer):
                params.append(f"{self.buf(p)}: {self.buffer_decl(p)}")
            else:
                params.append(f"{self.var(p)}: {p.dtype}")
        lines = ["@prim_func", f"def {f.name}({', '.join(params)}):"]
        for k in sorted(f.attrs):
            lines.append(f"  # attr {k} = {f.attrs[k]!r}")
        lines.extend(self.stmt(f.body, 1))
        return "\n".join(lines) + "\n"


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def expr_to_str(e: PrimExpr) -> str:
    """Text of one expression."""
    return Printer().expr(e)


def stmt_to_str(s: Stmt) -> str:
    """Text of one statement."""
    return "\n".join(Printer().stmt(s)) + "\n"


def func_to_str(f: PrimFunc) -> str:
    """Text of one function."""
    return Printer().func(f)
