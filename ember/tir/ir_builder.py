"""IRBuilder: write loop IR imperatively, like TVM's ``tir.ir_builder``.

Example (an in-place prefix sum, e.g. as the body of ``te.extern``)::

    ib = IRBuilder()
    x = ib.buffer(buf)                     # a proxy: x[i] reads, x[i] = v stores
    with ib.for_range(1, n, name="i") as i:
        x[i] = x[i - 1] + x[i]
    with ib.if_scope(x[n - 1] < 0.0):
        ib.emit(tir.call_extern("int32", "report", buf.data))
    stmt = ib.get()
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ember.errors import IRError
from ember.tir.buffer import Buffer, decl_buffer
from ember.tir.expr import ExprLike, PrimExpr, Var, convert
from ember.tir.stmt import (
    Allocate,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    StorageKind,
    seq,
    store,
)


class BufferProxy:
    """Index a buffer through an IRBuilder: reads build loads, assignments emit stores."""

    def __init__(self, builder: IRBuilder, buffer: Buffer) -> None:
        self._builder = builder
        self.buffer = buffer

    def __getitem__(self, index: ExprLike | tuple[ExprLike, ...]) -> PrimExpr:
        return self.buffer[index]

    def __setitem__(self, index: ExprLike | tuple[ExprLike, ...], value: ExprLike) -> None:
        idx = index if isinstance(index, tuple) else (index,)
        self._builder.emit(store(self.buffer, value, *idx))


class IRBuilder:
    """Collects statements in nested scopes; ``get()`` returns the finished statement."""

    def __init__(self) -> None:
        # Each frame holds emitted statements; a statement may be a 'wrapper' placeholder
        # (Allocate/LetStmt) whose body is everything emitted after it in the same frame.
        self._frames: list[list[Any]] = [[]]
        self._last_if: IfThenElse | None = None

    def emit(self, stmt: Stmt | PrimExpr) -> None:
        """Append a statement (an expression becomes an Evaluate, e.g. a call_extern)."""
        if isinstance(stmt, PrimExpr):
            stmt = Evaluate(stmt)
        if not isinstance(stmt, Stmt):
            raise IRError(f"IRBuilder.emit expects a statement or expression, got {stmt!r}")
        self._frames[-1].append(stmt)
        self._last_if = None

    def buffer(self, buf: Buffer) -> BufferProxy:
        """A proxy to read ``buf[i]`` and write ``buf[i] = v`` in the current scope."""
        return BufferProxy(self, buf)

    def _close(self, frame: list[Any]) -> Stmt:
        body: Stmt = SeqStmt(())
        parts: list[Stmt] = []
        for item in reversed(frame):
            if isinstance(item, tuple):  # ("alloc"|"let", maker): wraps what follows
                body = item[1](seq(*reversed(parts)) if parts else SeqStmt(()))
                parts = [body]
            else:
                parts.append(item)
        return seq(*reversed(parts)) if parts else SeqStmt(())

    @contextmanager
    def for_range(
        self,
        begin: ExprLike,
        end: ExprLike,
        name: str = "i",
        kind: ForKind | str = ForKind.SERIAL,
        dtype: str | None = None,
    ) -> Iterator[Var]:
        """A loop over [begin, end); yields the loop variable."""
        lo, hi = convert(begin), convert(end)
        var = Var(name, dtype or lo.dtype)
        fkind = kind if isinstance(kind, ForKind) else ForKind(kind)
        self._frames.append([])
        yield var
        body = self._close(self._frames.pop())
        from ember.tir.simplify import simplify

        extent = simplify(hi - lo)
        self.emit(For(var, lo.astype(var.dtype), extent.astype(var.dtype), fkind, body))

    @contextmanager
    def if_scope(self, cond: ExprLike) -> Iterator[None]:
        """Statements emitted inside run only when ``cond`` holds."""
        self._frames.append([])
        yield
        body = self._close(self._frames.pop())
        node = IfThenElse(convert(cond), body)
        self.emit(node)
        self._last_if = node

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        """The else branch of the if_scope emitted just before."""
        last = self._last_if
        frame = self._frames[-1]
        if last is None or not frame or frame[-1] is not last:
            raise IRError("IRBuilder.else_scope must directly follow an if_scope")
        self._frames.append([])
        yield
        body = self._close(self._frames.pop())
        frame[-1] = IfThenElse(last.condition, last.then_case, body)
        self._last_if = None

    def allocate(
        self,
        dtype: str,
        shape: Sequence[ExprLike],
        name: str = "buf",
        storage: StorageKind | str = StorageKind.STACK,
    ) -> BufferProxy:
        """A local buffer valid for the rest of the current scope."""
        buf = decl_buffer(shape, dtype, name, scope="local")
        kind = storage if isinstance(storage, StorageKind) else StorageKind(storage)
        self._frames[-1].append(("alloc", lambda body: Allocate(buf, body, kind)))
        self._last_if = None
        return BufferProxy(self, buf)

    def let(self, name: str, value: ExprLike) -> Var:
        """Bind ``value`` to a new variable for the rest of the current scope."""
        val = convert(value)
        var = Var(name, val.dtype)
        self._frames[-1].append(("let", lambda body: LetStmt(var, val, body)))
        self._last_if = None
        return var

    def get(self) -> Stmt:
        """The statement built so far (the builder can still be used afterwards)."""
        if len(self._frames) != 1:
            raise IRError("IRBuilder.get called inside an open scope")
        return self._close(self._frames[0])


def create() -> IRBuilder:
    """A new IRBuilder (TVM's ``tir.ir_builder.create()``)."""
    return IRBuilder()
