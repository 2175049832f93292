"""IRBuilder: imperative construction of loop IR."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.tir.ir_builder import create


def test_loops_stores_if_else_allocate_let() -> None:
    buf = tir.decl_buffer((6,), "float32", "X")
    ib = create()
    x = ib.buffer(buf)
    acc = ib.allocate("float32", (1,), "acc")
    acc[0] = 0.0
    with ib.for_range(1, 6, name="i") as i:
        x[i] = x[i - 1] + x[i]
    total = ib.let("total", x[5])
    with ib.if_scope(total > 10.0):
        x[0] = -1.0
    with ib.else_scope():
        x[0] = -2.0
    f = tir.PrimFunc("prefix", (buf,), ib.get())
    tir.verify(f)
    text = str(f)
    assert "for i in range(1, 6):" in text and "else:" in text
    assert "acc = allocate(" in text and "total: float32 = X[5]" in text
    a = np.arange(6, dtype="float32")
    tir.interpret(f, [a])
    assert a.tolist() == [-1.0, 1.0, 3.0, 6.0, 10.0, 15.0]


def test_parallel_kind_and_emit_expression() -> None:
    buf = tir.decl_buffer((4,), "int32", "Y")
    ib = create()
    with ib.for_range(0, 4, name="j", kind="parallel") as j:
        ib.buffer(buf)[j] = j * 2
    ib.emit(tir.call_extern("int32", "notify", buf.data))
    stmt = ib.get()
    assert isinstance(stmt, tir.SeqStmt)
    assert stmt.seq[0].kind is tir.ForKind.PARALLEL  # type: ignore[attr-defined]
    seen: list[int] = []
    y = np.zeros(4, "int32")
    tir.interpret(
        tir.PrimFunc("p", (buf,), stmt), [y], externs={"notify": lambda b: seen.append(len(b))}
    )
    assert y.tolist() == [0, 2, 4, 6] and seen == [4]


def test_misuse() -> None:
    ib = create()
    with pytest.raises(IRError, match="directly follow an if_scope"), ib.else_scope():
        pass
    with pytest.raises(IRError, match="statement or expression"):
        ib.emit(3)  # type: ignore[arg-type]
