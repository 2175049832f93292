"""Building loop-IR expressions: operators, dtype promotion, intrinsics, buffers."""

from __future__ import annotations

import pytest

from ember import tir
from ember.errors import IRError


def test_operators_build_typed_nodes() -> None:
    i = tir.Var("i")
    e = i * 4 + 1
    assert isinstance(e, tir.Add) and isinstance(e.a, tir.Mul)
    assert e.dtype == "int32"
    assert isinstance(i // 2, tir.FloorDiv) and isinstance(i % 2, tir.FloorMod)
    assert (i < 3).dtype == "bool"
    assert isinstance(-i, tir.Sub)


def test_constants_adopt_the_other_side_and_ints_widen() -> None:
    x = tir.Var("x", "float32")
    e = x + 1
    assert isinstance(e.b, tir.FloatImm) and e.b.dtype == "float32"
    n = tir.Var("n", "int64")
    m = tir.Var("m", "int32")
    s = n + m
    assert s.dtype == "int64" and isinstance(s.b, tir.Cast)
    f = x * tir.Var("k", "int32")
    assert f.dtype == "float32"


def test_integer_true_division_is_rejected() -> None:
    with pytest.raises(IRError, match="floor division"):
        _ = tir.Var("i") / 2


def test_comparison_has_no_python_truth_value() -> None:
    with pytest.raises(IRError, match="truth value"):
        bool(tir.Var("i") < 3)


def test_vars_compare_by_identity_other_nodes_by_fields() -> None:
    a, b = tir.Var("i"), tir.Var("i")
    assert a != b and a == a
    assert (a + 1) == (a + 1)
    assert (a + 1) != (b + 1)
    assert hash(a + 1) == hash(a + 1)
    assert len({a + 1, a + 1, b + 1}) == 2


def test_intrinsics_and_extern_calls() -> None:
    x = tir.Var("x", "float32")
    e = tir.exp(x)
    assert isinstance(e, tir.Call) and e.op == "exp" and e.kind == "intrin"
    assert tir.sqrt(tir.Var("k")).dtype == "float32"
    p = tir.pow(x, 2)
    assert p.args[1] == tir.FloatImm("float32", 2.0)
    buf = tir.decl_buffer((4,), "float32", "A")
    c = tir.call_extern("int32", "my_fn", buf.data, 4, "tag")
    assert c.kind == "extern" and isinstance(c.args[2], tir.StringImm)
    with pytest.raises(IRError, match="unknown math intrinsic"):
        tir.call_intrin("float32", "frobnicate", x)
    with pytest.raises(IRError, match="C identifier"):
        tir.call_extern("int32", "not valid", x)


def test_select_cast_logic() -> None:
    i = tir.Var("i")
    s = tir.if_then_else(i < 2, 1.0, 0.0)
    assert s.dtype == "float32"
    assert tir.cast("float32", i).dtype == "float32"
    assert tir.logical_and(i < 2, i > 0, i != 1 if False else i < 9).dtype == "bool"
    with pytest.raises(IRError, match="bool condition"):
        tir.logical_and(i, i < 2)


def test_buffer_indexing_and_offsets() -> None:
    buf = tir.decl_buffer((3, 4), "float32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    load = buf[i, j]
    assert isinstance(load, tir.BufferLoad) and load.dtype == "float32"
    assert str(buf.offset_of((i, j))) == "i * 4 + j"
    strided = tir.decl_buffer((3, 4), "float32", "S", strides=(8, 1))
    assert str(strided.offset_of((i, j))) == "i * 8 + j"
    with pytest.raises(IRError, match="2 dims"):
        buf[i]
    with pytest.raises(IRError, match="unknown scope"):
        tir.decl_buffer((3,), "float32", "B", scope="shared")
    with pytest.raises(IRError, match="unknown dtype"):
        tir.decl_buffer((3,), "float33", "B")


def test_vector_dtypes() -> None:
    r = tir.Ramp(tir.const(0), tir.const(1), 8)
    assert r.dtype == "int32x8"
    buf = tir.decl_buffer((16,), "float32", "A")
    assert tir.BufferLoad(buf, (r,)).dtype == "float32x8"
    assert tir.Broadcast(tir.const(1.0), 4).dtype == "float32x4"
