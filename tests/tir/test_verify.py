"""The verifier rejects ill-scoped and ill-typed loop IR with IRError."""

from __future__ import annotations

import pytest

from ember import tir
from ember.errors import IRError


def _bufs() -> tuple[tir.Buffer, tir.Buffer]:
    return tir.decl_buffer((4,), "float32", "A"), tir.decl_buffer((4,), "float32", "B")


def test_valid_function_passes() -> None:
    a, b = _bufs()
    i = tir.Var("i")
    f = tir.PrimFunc("ok", (a, b), tir.for_range(i, 4, tir.store(b, a[i] + 1.0, i)))
    assert tir.verify(f) is f


def test_undefined_variable() -> None:
    a, b = _bufs()
    i, j = tir.Var("i"), tir.Var("j")
    f = tir.PrimFunc("bad", (a, b), tir.for_range(i, 4, tir.store(b, a[j], i)))
    with pytest.raises(IRError, match="'j' is used outside"):
        tir.verify(f)


def test_buffer_not_in_scope() -> None:
    a, b = _bufs()
    c = tir.decl_buffer((4,), "float32", "C")
    i = tir.Var("i")
    f = tir.PrimFunc("bad", (a, b), tir.for_range(i, 4, tir.store(c, a[i], i)))
    with pytest.raises(IRError, match="buffer 'C' is used"):
        tir.verify(f)


def test_store_to_non_buffer() -> None:
    a, b = _bufs()
    i = tir.Var("i")
    bad = tir.BufferStore(i, a[i], (i,))  # type: ignore[arg-type]
    f = tir.PrimFunc("bad", (a, b), tir.for_range(i, 4, bad))
    with pytest.raises(IRError, match="not a Buffer"):
        tir.verify(f)


def test_dtype_mismatch_in_store_and_binary() -> None:
    a, b = _bufs()
    i = tir.Var("i")
    f = tir.PrimFunc("bad", (a, b), tir.for_range(i, 4, tir.BufferStore(b, i, (i,))))
    with pytest.raises(IRError, match="store of a int32 value"):
        tir.verify(f)
    mixed = tir.Add(a[i], i)
    g = tir.PrimFunc("bad2", (a, b), tir.for_range(i, 4, tir.BufferStore(b, mixed, (i,))))
    with pytest.raises(IRError, match="different dtypes"):
        tir.verify(g)


def test_non_integer_index_and_bool_condition() -> None:
    a, b = _bufs()
    i = tir.Var("i")
    x = tir.Var("x", "float32")
    f = tir.PrimFunc("bad", (a, b, x), tir.store(b, 1.0, x))
    with pytest.raises(IRError, match="must be an integer"):
        tir.verify(f)
    g = tir.PrimFunc("bad", (a, b), tir.for_range(i, 4, tir.IfThenElse(i, tir.store(b, 1.0, i))))
    with pytest.raises(IRError, match="must be bool"):
        tir.verify(g)


def test_nested_redefinition() -> None:
    a, b = _bufs()
    i = tir.Var("i")
    f = tir.PrimFunc("bad", (a, b), tir.for_range(i, 4, tir.for_range(i, 4, tir.store(b, a[i], i))))
    with pytest.raises(IRError, match="defined twice"):
        tir.verify(f)


def test_error_names_function_and_statement() -> None:
    a, b = _bufs()
    i, j = tir.Var("i"), tir.Var("j")
    f = tir.PrimFunc("kern", (a, b), tir.for_range(i, 4, tir.store(b, a[j], i)))
    with pytest.raises(IRError) as info:
        tir.verify(f)
    assert "'kern'" in str(info.value) and "B[i] = A[j]" in str(info.value)
