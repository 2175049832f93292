"""LLVM IR as text: types of loop-IR dtypes, literals, and a small function/module writer.

The LLVM back end writes textual IR (not an object builder): every line is under its
control (``nsw``, ``noalias``, loop metadata, access groups) and the text of equal
inputs is equal, which keeps objects byte-identical. A value is a ``Val(type, ref)``;
``FunctionWriter`` numbers temporaries and blocks, ``ModuleContext`` collects what the
functions of one module share (declarations, string constants, pools, metadata).

Example::

    ctx = ModuleContext()
    w = FunctionWriter(ctx)
    s = w.inst("i32", "add nsw i32 %a, 1")     # Val("i32", "%t1")
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from ember.codegen.c.half import HALF_TAGS
from ember.errors import CompileError
from ember.tir import dtype as dt

_SCALAR = {
    "bool": "i1",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "i8",
    "uint16": "i16",
    "uint32": "i32",
    "uint64": "i64",
    "int4": "i8",  # the sub-byte integers: one byte each (memory.sub_byte_value)
    "int2": "i8",
    "uint4": "i8",
    "uint2": "i8",
    "float32": "float",
    "float64": "double",
    "handle": "ptr",
    # ember's string record (EmberString {const char* data; int64_t size}, docs/strings.md):
    # loaded, stored, selected and passed to the runtime's string functions whole (an
    # aggregate of two integer words goes in two registers, as the C ABI passes the struct)
    "string": "{ ptr, i64 }",
}
_SCALAR.update(dict.fromkeys(HALF_TAGS, "float"))  # narrow floats: float values (narrow.py)


class Val(NamedTuple):
    """An LLVM value: its type text and its reference (``%t3``, ``7``, ``0x3FF0...``)."""

    ty: str
    ref: str

    def typed(self) -> str:
        """``<type> <ref>`` as an instruction operand."""
        return f"{self.ty} {self.ref}"


def scalar_type(dtype: str, where: str = "") -> str:
    """The LLVM type of one lane of ``dtype`` as a value (bool is i1)."""
    base = dt.element_of(dtype)
    ty = _SCALAR.get(base)
    if ty is None:
        raise CompileError(
            f"LLVM codegen{where}: dtype {base} is not supported by the LLVM back end; "
            "compile the model for the 'c' target, or cast to a supported type before the kernel"
        )
    return ty


def value_type(dtype: str, where: str = "") -> str:
    """The LLVM type of a value of ``dtype`` (vectors as ``<8 x float>``)."""
    lanes = dt.lanes_of(dtype)
    ty = scalar_type(dtype, where)
    return ty if lanes == 1 else f"<{lanes} x {ty}>"


def memory_type(dtype: str, where: str = "") -> str:
    """The LLVM type of ``dtype`` in memory (bool is stored as i8)."""
    lanes = dt.lanes_of(dtype)
    ty = "i8" if dt.is_bool(dtype) else scalar_type(dtype, where)
    if dt.element_of(dtype) in HALF_TAGS:  # their bits
        ty = "i16" if dt.element_of(dtype) in ("float16", "bfloat16") else "i8"
    return ty if lanes == 1 else f"<{lanes} x {ty}>"


def int_literal(value: int, bits: int) -> str:
    """An integer literal of ``bits`` bits (unsigned values in two's complement)."""
    value &= (1 << bits) - 1
    if value >= 1 << (bits - 1):
        value -= 1 << bits
    return str(value)


def float_literal(value: float, dtype: str) -> str:
    """A float literal exactly as LLVM wants it: the hex bits of a double (rounded to
    float32 first for ``float``, so the double is exactly representable)."""
    if dt.element_of(dtype) == "float32" and math.isfinite(value):
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            value = math.copysign(math.inf, value)
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return f"0x{bits:016X}"


def splat(ty: str, scalar: str) -> str:
    """A constant vector of ``ty`` (``<n x T>``) holding ``scalar`` in every lane."""
    lanes, elem = ty[1:-1].split(" x ")
    return "<" + ", ".join(f"{elem} {scalar}" for _ in range(int(lanes))) + ">"


def c_bytes(text: str) -> tuple[str, int]:
    """``text`` NUL-terminated as an LLVM ``c"..."`` body and its length in bytes."""
    data = text.encode() + b"\0"
    out = []
    for b in data:
        ch = chr(b)
        out.append(ch if 32 <= b < 127 and ch not in '"\\' else f"\\{b:02X}")
    return "".join(out), len(data)


@dataclass
class ModuleContext:
    """What the functions of one LLVM module share, emitted in a deterministic order."""

    declarations: dict[str, str] = field(default_factory=dict)
    strings: dict[str, str] = field(default_factory=dict)
    pools: dict[str, int] = field(default_factory=dict)
    helpers: dict[str, str] = field(default_factory=dict)
    metadata: list[str] = field(default_factory=list)
    #: functions defined in this module, name -> signature "i32 (ptr, i32)"
    defined: dict[str, str] = field(default_factory=dict)
    #: the integer type of C's size_t on the target
    size_t: str = "i64"

    def declare(self, name: str, line: str) -> None:
        """Declare an external function once (a different signature is an error)."""
        old = self.declarations.get(name)
        if old is not None and old != line:
            raise CompileError(
                f"LLVM codegen: function '{name}' is used with two signatures:\n  {old}\n"
                f"  {line}\ncast the arguments so every call agrees"
            )
        self.declarations[name] = line

    def string(self, text: str) -> str:
        """The global name of a NUL-terminated string constant (shared by equal texts)."""
        name = self.strings.get(text)
        if name is None:
            name = f"@.str.{len(self.strings)}"
            self.strings[text] = name
        return name

    def node(self, body: str, distinct: bool = False) -> str:
        """A new metadata node ``!N`` with ``body`` (``{...}``); ``$self`` names itself."""
        ref = f"!{len(self.metadata)}"
        text = body.replace("$self", ref)
        self.metadata.append(f"{ref} = {'distinct ' if distinct else ''}{text}")
        return ref

    def text(self, functions: list[str]) -> str:
        """The whole module: globals, declarations, helpers, functions, metadata."""
        parts: list[str] = []
        for text, name in self.strings.items():
            body, size = c_bytes(text)
            parts.append(f'{name} = private unnamed_addr constant [{size} x i8] c"{body}", align 1')
        for pool in sorted(self.pools):
            parts.append(
                f"@ember_pool_{pool} = internal global [{self.pools[pool]} x i8] "
                "zeroinitializer, align 64"
            )
        parts += [self.declarations[n] for n in sorted(self.declarations)]
        parts += [self.helpers[n] for n in sorted(self.helpers)]
        parts += functions
        parts += self.metadata
        return "\n".join(parts) + "\n"


class FunctionWriter:
    """Numbered temporaries and blocks of one function body, appended line by line."""

    def __init__(self, ctx: ModuleContext) -> None:
        self.ctx = ctx
        self.lines: list[str] = []
        self.allocas: list[str] = []
        self.count = 0
        self.block = "entry"

    def fresh(self, hint: str = "t") -> str:
        """A new local name (``%t7``)."""
        self.count += 1
        return f"%{hint}{self.count}"

    def label(self, hint: str) -> str:
        """A new block label (without ``%``)."""
        self.count += 1
        return f"{hint}{self.count}"

    def inst(self, ty: str, text: str) -> Val:
        """Emit ``%tN = text`` and return it as a value of type ``ty``."""
        name = self.fresh()
        self.lines.append(f"  {name} = {text}")
        return Val(ty, name)

    def op(self, text: str) -> None:
        """Emit an instruction without a result."""
        self.lines.append(f"  {text}")

    def start(self, label: str) -> None:
        """Begin block ``label``."""
        self.lines.append(f"{label}:")
        self.block = label

    def br(self, label: str) -> None:
        """Unconditional branch."""
        self.op(f"br label %{label}")

    def cond_br(self, cond: Val, yes: str, no: str) -> None:
        """Conditional branch on an i1."""
        self.op(f"br i1 {cond.ref}, label %{yes}, label %{no}")

    def alloca(self, ty: str, align: int) -> Val:
        """Stack memory in the entry block (so loops never grow the stack)."""
        name = self.fresh("a")
        self.allocas.append(f"  {name} = alloca {ty}, align {align}")
        return Val("ptr", name)

    def call(self, ret: str, name: str, args: list[Val], attrs: str = "") -> Val | None:
        """A call; returns its value unless ``ret`` is void."""
        listed = ", ".join(a.typed() for a in args)
        text = f"call {ret} @{name}({listed}){attrs}"
        if ret == "void":
            self.op(text)
            return None
        return self.inst(ret, text)

    def body(self) -> str:
        """The function body text: entry allocas first."""
        head = self.lines[:1] if self.lines and self.lines[0] == "entry:" else ["entry:"]
        rest = self.lines[1:] if head == self.lines[:1] else self.lines
        return "\n".join(head + self.allocas + rest)
