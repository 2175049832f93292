"""Integer Div and Mod never trap: INT_MIN / -1 and division by zero are defined as numpy does.

``x / 0`` and ``x % 0`` give 0; ``INT_MIN / -1`` gives INT_MIN (two's complement wrap) and
``INT_MIN % -1`` gives 0. Before, both killed the process with SIGFPE.
"""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.codegen.c import generate_source
from ember.testing import compile_onnx, run_artifacts

onnx = pytest.importorskip("onnx")
helper = onnx.helper

ONNX_TYPE = {"int32": onnx.TensorProto.INT32, "int64": onnx.TensorProto.INT64}


def binary_model(op: str, dtype: str, n: int, **attrs: int) -> object:
    """y = op(a, b) on two int vectors of length n."""
    t = ONNX_TYPE[dtype]
    node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "div",
        [helper.make_tensor_value_info(k, t, [n]) for k in ("a", "b")],
        [helper.make_tensor_value_info("y", t, [n])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def expected(op: str, a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    """The documented results: C truncation (Div, fmod=1) or floor (fmod=0), traps defined."""
    out = np.zeros_like(a)
    for k, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        if y == 0:
            continue
        if op == "Div":
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            out[k] = np.array(q).astype(np.int64).astype(a.dtype)  # wraps INT_MIN / -1
        elif fmod:
            out[k] = int(np.fmod(x, y))
        else:
            out[k] = x % y
    return out


@pytest.mark.cc
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize(("op", "fmod"), [("Div", 0), ("Mod", 0), ("Mod", 1)])
def test_int_min_by_minus_one_and_zero(dtype: str, op: str, fmod: int) -> None:
    lo = np.iinfo(dtype).min
    a = np.array([lo, lo, 7, -7, 0, lo, 5, -9], dtype)
    b = np.array([-1, 0, 0, -1, -1, 1, 3, 2], dtype)
    attrs = {"fmod": fmod} if op == "Mod" else {}
    model = binary_model(op, dtype, len(a), **attrs)
    arts = compile_onnx(model, shape={"a": a.shape, "b": b.shape})
    ours = run_artifacts(arts, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(ours, expected(op, a, b, fmod))


def test_constant_divisor_needs_no_check() -> None:
    a = tir.decl_buffer((16,), "int32", "A")
    out = tir.decl_buffer((16,), "int32", "B")
    i = tir.Var("i")
    body = tir.for_range(i, 16, tir.store(out, tir.truncdiv(a[i], 7) + tir.truncmod(a[i], -3), i))
    text = generate_source([tir.PrimFunc("cdiv", (a, out), body)])
    assert "ember_div_" not in text and "ember_mod_" not in text
    assert "A[i] / 7" in text


def test_data_divisor_goes_through_the_checked_helper() -> None:
    a = tir.decl_buffer((16,), "int64", "A")
    d = tir.decl_buffer((16,), "int64", "D")
    out = tir.decl_buffer((16,), "int64", "B")
    i = tir.Var("i")
    value = tir.truncdiv(a[i], d[i]) + tir.truncmod(a[i], d[i]) + (a[i] // d[i])
    body = tir.for_range(i, 16, tir.store(out, value, i))
    text = generate_source([tir.PrimFunc("ddiv", (a, d, out), body)])
    for name in ("ember_div_i64", "ember_mod_i64", "ember_floordiv_checked_i64"):
        assert name in text
    assert "if (b == -1) return (int64_t)((uint64_t)0 - (uint64_t)a);" in text


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_interpreter_agrees(dtype: str) -> None:
    a = tir.decl_buffer((4,), dtype, "A")
    d = tir.decl_buffer((4,), dtype, "D")
    q = tir.decl_buffer((4,), dtype, "Q")
    r = tir.decl_buffer((4,), dtype, "R")
    i = tir.Var("i")
    body = tir.for_range(
        i,
        4,
        tir.seq(
            tir.store(q, tir.truncdiv(a[i], d[i]), i), tir.store(r, tir.truncmod(a[i], d[i]), i)
        ),
    )
    lo = np.iinfo(dtype).min
    av = np.array([lo, lo, 7, -7], dtype)
    dv = np.array([-1, 0, 0, 2], dtype)
    qv = np.zeros(4, dtype)
    rv = np.zeros(4, dtype)
    tir.interpret(tir.PrimFunc("qr", (a, d, q, r), body), [av, dv, qv, rv])
    np.testing.assert_array_equal(qv, [lo, 0, 0, -3])
    np.testing.assert_array_equal(rv, [0, 0, 0, -1])
