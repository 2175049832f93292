"""Contraction in C: reduction updates ``acc = acc + a * b`` become one fused multiply-add
(``EMBER_FMA_F32``); every other a*b+c stays two roundings (codegen/c/contract.py)."""

from __future__ import annotations

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.codegen.c import generate_source
from ember.tir import te


def _dense_then_axpy(dtype: str = "float32") -> tir.PrimFunc:
    """D = X @ W.T (a reduction), then Y = D * S + B (elementwise: must not contract)."""
    x = te.placeholder((5, 7), dtype, "X")
    w = te.placeholder((3, 7), dtype, "W")
    s = te.placeholder((3,), dtype, "S")
    b = te.placeholder((3,), dtype, "B")
    k = te.reduce_axis(7, "k")
    d = te.compute((5, 3), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), "dense")
    y = te.compute((5, 3), lambda i, j: d[i, j] * s[j] + b[j], "axpy")
    sch = te.create_schedule(y)
    return te.lower(sch, [x, w, s, b, y], name=f"dense_axpy_{dtype}")


def test_only_the_reduction_update_is_contracted():
    text = generate_source([_dense_then_axpy()])
    assert "#define EMBER_FMA_F32(a, b, c) fmaf((a), (b), (c))" in text
    assert "dense[i * 3 + j] = EMBER_FMA_F32(X[i * 7 + k], W[j * 7 + k], dense[i * 3 + j]);" in text
    assert text.count("EMBER_FMA_F32(") == 3  # two macro definitions and the one update
    assert "axpy[i_1 * 3 + j_1] = dense[i_1 * 3 + j_1] * S[j_1] + B[j_1];" in text


def test_double_and_integer_reductions():
    assert "EMBER_FMA_F64(X[" in generate_source([_dense_then_axpy("float64")])
    assert "EMBER_FMA" not in generate_source([_dense_then_axpy("int32")])  # no macro at all


def test_a_product_into_another_element_is_not_contracted():
    a = te.placeholder((8,), "float32", "A")
    k = te.reduce_axis(8, "k")
    # a reduction whose update reads its accumulator at the same index only: a shifted
    # read of the output buffer is not an accumulator
    r = te.compute((1,), lambda i: te.sum(a[k] * a[k], axis=k), "sq")
    text = generate_source([te.lower(te.create_schedule(r), [a, r], name="sumsq")])
    assert "sq[0] = EMBER_FMA_F32(A[k], A[k], sq[0]);" in text


@pytest.mark.cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_contracted_kernel_runs_and_matches_numpy(build, dtype):
    lib = build([_dense_then_axpy(dtype)])
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((5, 7)).astype(dtype), rng.standard_normal((3, 7)).astype(dtype)
    s, b = rng.standard_normal(3).astype(dtype), rng.standard_normal(3).astype(dtype)
    y = rt.array(np.zeros((5, 3), dtype))
    args = [rt.array(t) for t in (x, w, s, b)]
    lib[f"ember_dense_axpy_{dtype}"](*args, y)
    tol = 1e-5 if dtype == "float32" else 1e-12
    np.testing.assert_allclose(y.numpy(), (x @ w.T) * s + b, rtol=tol, atol=tol)
