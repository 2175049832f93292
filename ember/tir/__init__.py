"""ember.tir: the loop IR (TVM's TIR in spirit), its compute DSL and a reference interpreter.

Build kernels directly (``decl_buffer``, ``For``, ``BufferStore``, ``PrimFunc``) or through
the DSL in ``ember.tir.te`` (``placeholder``, ``compute``, ``create_schedule``, ``lower``);
run them with ``interpret`` and check them with ``verify``.
"""

from __future__ import annotations

from ember.tir.buffer import Buffer, decl_buffer
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
    const,
    convert,
)
from ember.tir.functor import IRMutator, IRVisitor, post_order_visit, substitute
from ember.tir.interpreter import interpret
from ember.tir.ir_builder import IRBuilder
from ember.tir.op import (
    MATH_INTRINSICS,
    abs,
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atanh,
    call_extern,
    call_intrin,
    cast,
    ceil,
    cos,
    cosh,
    eq,
    erf,
    exp,
    expm1,
    fabs,
    floor,
    if_then_else,
    index_check,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    max,
    min,
    ne,
    pow,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    sinh,
    sqrt,
    tan,
    tanh,
    trunc,
    truncdiv,
    truncmod,
)
from ember.tir.printer import NameTable, Printer
from ember.tir.simplify import simplify
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
    for_range,
    seq,
    store,
)
from ember.tir.structural import structural_equal, structural_hash
from ember.tir.verify import verify

__all__ = [
    "EQ", "GE", "GT", "LE", "LT", "NE", "MATH_INTRINSICS",
    "Add", "Allocate", "And", "AssertStmt", "BinaryOp", "Broadcast", "Buffer", "BufferLoad",
    "BufferStore", "Call", "Cast", "CmpOp", "Div", "Evaluate", "FloatImm", "FloorDiv",
    "FloorMod", "For", "ForKind", "IRBuilder", "IRMutator", "IRVisitor", "IfThenElse", "IntImm",
    "Let",
    "LetStmt", "Max", "Min", "Mod", "Mul", "NameTable", "Not", "Or", "PrimExpr", "PrimFunc",
    "Printer", "Ramp", "Select", "SeqStmt", "Stmt", "StorageKind", "StringImm", "Sub", "Var",
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "call_extern", "call_intrin",
    "cast", "ceil", "const", "convert", "cos", "cosh", "decl_buffer", "eq", "erf", "exp",
    "expm1", "fabs", "floor", "for_range", "if_then_else", "index_check", "interpret", "log",
    "log1p",
    "logical_and", "logical_not", "logical_or", "max", "min", "ne", "post_order_visit", "pow",
    "round", "rsqrt", "select", "seq", "sigmoid", "simplify", "sin", "sinh", "sqrt", "store",
    "structural_equal", "structural_hash", "substitute", "tan", "tanh", "trunc", "truncdiv",
    "truncmod", "verify",
]  # fmt: skip
