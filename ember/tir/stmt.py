"""Statements of the loop IR: loops, stores, lets, branches, allocations, sequences.

Loops carry a ``ForKind`` (serial, parallel, vectorized, unrolled); allocations carry a
``StorageKind`` saying where the memory lives (C stack, runtime heap workspace, or a fixed
offset into a static workspace pool as planned by a later memory planner).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.errors import IRError
from ember.tir.buffer import Buffer
from ember.tir.expr import ExprLike, PrimExpr, Var, convert


class Stmt:
    """Base class of every statement."""

    def __str__(self) -> str:
        from ember.tir.printer import stmt_to_str

        return stmt_to_str(self)


class ForKind(enum.Enum):
    """How a loop's iterations are executed."""

    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"


class StorageKind(enum.Enum):
    """Where an Allocate's memory lives."""

    STACK = "stack"
    HEAP = "heap"
    STATIC = "static"


@dataclass(frozen=True)
class For(Stmt):
    """for (loop_var = min; loop_var < min + extent; ++loop_var) body."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    annotations: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class BufferStore(Stmt):
    """buffer[indices] = value."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]


@dataclass(frozen=True)
class LetStmt(Stmt):
    """Bind var to value within body."""

    var: Var
    value: PrimExpr
    body: Stmt


@dataclass(frozen=True)
class IfThenElse(Stmt):
    """if (condition) then_case else else_case."""

    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True)
class Allocate(Stmt):
    """Memory for ``buffer`` (scope local) valid inside body.

    ``storage`` says where it lives; for STATIC, ``pool`` names the workspace pool and
    ``offset`` is the byte offset inside it (assigned by static memory planning).
    """

    buffer: Buffer
    body: Stmt
    storage: StorageKind = StorageKind.STACK
    pool: str = ""
    offset: int = 0


@dataclass(frozen=True)
class SeqStmt(Stmt):
    """Statements executed in order."""

    seq: tuple[Stmt, ...]


@dataclass(frozen=True)
class Evaluate(Stmt):
    """Evaluate an expression for its side effect (e.g. a call_extern)."""

    value: PrimExpr


@dataclass(frozen=True)
class AssertStmt(Stmt):
    """Fail the kernel with ``message`` (return -1) unless condition holds, then run body.

    An empty message keeps the error a failed callee already reported, so
    ``AssertStmt(eq(call_extern("int32", "f_unpacked", ...), 0), "", rest)`` checks a call.
    """

    condition: PrimExpr
    message: str
    body: Stmt


def seq(*stmts: Stmt | Sequence[Stmt]) -> Stmt:
    """A flattened SeqStmt of the given statements (the single one if only one)."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        elif isinstance(s, Stmt):
            flat.append(s)
        else:
            for t in s:
                flat.extend(t.seq if isinstance(t, SeqStmt) else (t,))
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))


def store(buffer: Buffer, value: ExprLike, *indices: ExprLike) -> BufferStore:
    """buffer[indices] = value, converting the value to the buffer's dtype if it is a literal."""
    if len(indices) != len(buffer.shape):
        raise IRError(
            f"store to {buffer.name}: {len(indices)} indices for {len(buffer.shape)} dims"
        )
    val = value if isinstance(value, PrimExpr) else convert(value).astype(buffer.dtype)
    return BufferStore(buffer, val, tuple(convert(i) for i in indices))


def for_range(
    var: Var, extent: ExprLike, body: Stmt, kind: ForKind = ForKind.SERIAL, start: ExprLike = 0
) -> For:
    """A loop of ``var`` over [start, start + extent)."""
    return For(var, convert(start), convert(extent), kind, body)


@dataclass(frozen=True)
class PrimFunc:
    """A kernel: parameters (buffers and scalar vars), a body and attributes.

    ``attrs`` is free-form (e.g. ``{"workspace_pools": {...}}``); it does not take part in
    hashing.
    """

    name: str
    params: tuple[Buffer | Var, ...]
    body: Stmt
    attrs: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise IRError(f"PrimFunc name {self.name!r} is not a valid identifier")

    def buffer_params(self) -> list[Buffer]:
        """The buffer parameters in order."""
        return [p for p in self.params if isinstance(p, Buffer)]

    def with_body(self, body: Stmt) -> PrimFunc:
        """A copy with a new body."""
        return PrimFunc(self.name, self.params, body, dict(self.attrs))

    def __str__(self) -> str:
        from ember.tir.printer import func_to_str

        return func_to_str(self)
