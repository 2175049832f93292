"""The loop-IR printer: readable, deterministic, disambiguating names."""

from __future__ import annotations

from ember import tir


def _func() -> tir.PrimFunc:
    a = tir.decl_buffer((8,), "float32", "A")
    b = tir.decl_buffer((8,), "float32", "B")
    i = tir.Var("i")
    body = tir.for_range(i, 8, tir.store(b, tir.exp(a[i]) * 2.0 + 1.0, i), tir.ForKind.PARALLEL)
    return tir.PrimFunc("f", (a, b), body)


def test_function_text() -> None:
    text = str(_func())
    assert text == (
        "@prim_func\n"
        'def f(A: Buffer((8,), "float32"), B: Buffer((8,), "float32")):\n'
        "  for i in parallel(8):\n"
        "    B[i] = exp(A[i]) * 2.0f + 1.0f\n"
    )


def test_printing_is_deterministic() -> None:
    assert str(_func()) == str(_func())


def test_same_named_vars_get_suffixes() -> None:
    a = tir.decl_buffer((4, 4), "int32", "A")
    i1, i2 = tir.Var("i"), tir.Var("i")
    body = tir.for_range(i1, 4, tir.for_range(i2, 4, tir.store(a, i1 - i2, i1, i2)))
    text = str(tir.PrimFunc("g", (a,), body))
    assert "for i_1 in range(4):" in text
    assert "A[i, i_1] = i - i_1" in text


def test_precedence_and_special_nodes() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    assert str((i + j) * 2) == "(i + j) * 2"
    assert str(i - (j - 1)) == "i - (j - 1)"
    assert str(tir.truncdiv(i, 2)) == "truncdiv(i, 2)"
    assert str(tir.Cast("float32", i)) == "float32(i)"
    assert str(tir.logical_and(i < 2, j >= 1)) == "i < 2 and j >= 1"
    assert str(tir.const(3, "int64")) == "int64(3)"


def test_statement_forms() -> None:
    buf = tir.decl_buffer((4,), "float32", "T", scope="local")
    x = tir.Var("x")
    body = tir.Allocate(
        buf,
        tir.LetStmt(x, tir.const(1), tir.IfThenElse(x > 0, tir.store(buf, 1.0, x), None)),
        tir.StorageKind.STATIC,
        pool="ws",
        offset=64,
    )
    text = str(body)
    assert "T = allocate(" in text and "static, pool='ws', offset=64" in text
    assert "x: int32 = 1" in text and "if x > 0:" in text
