"""einsum lowered to loop IR, run by the loop-IR interpreter and compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group


def run_einsum(equation: str, shapes: list[tuple[int, ...]], dtype: str = "float32") -> str:
    rng = np.random.default_rng(0)
    params = [Var(f"x{k}", TensorType(s, dtype)) for k, s in enumerate(shapes)]
    if dtype.startswith("float"):
        xs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    else:
        xs = [rng.integers(-4, 5, s).astype(dtype) for s in shapes]
    func = Function(
        tuple(params), call("einsum", *params, equation=equation), Attrs({"Primitive": 1})
    )
    ref = evaluate(Function(func.params, func.body), xs)[0]
    np.testing.assert_allclose(ref, np.einsum(equation, *xs), rtol=1e-5, atol=1e-5)
    prim = lower_group(func, "kernel")
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [*xs, out])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    return str(prim)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
        ("ij->ji", [(3, 5)]),
        ("ii->i", [(4, 4)]),
        ("ii", [(4, 4)]),
        ("i,i", [(6,), (6,)]),
        ("i,j->ij", [(3,), (4,)]),
        ("ij,kj", [(3, 4), (5, 4)]),
        ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
        ("...i,...i->...", [(2, 3, 5), (3, 5)]),
        ("...ij->...ji", [(2, 3, 4)]),
        ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
        ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
        ("i,ij,j->", [(3,), (3, 4), (4,)]),
        ("b i d , b j d -> b i j", [(2, 3, 4), (2, 5, 4)]),
    ],
)
def test_einsum_matches_numpy(equation, shapes):
    run_einsum(equation, shapes)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_einsum_dtypes(dtype):
    run_einsum("ij,jk->ik", [(3, 4), (4, 2)], dtype)


def test_einsum_batched_matmul_schedule_vectorises_rows():
    text = run_einsum("bij,bjk->bik", [(4, 16, 8), (4, 8, 16)])
    assert "parallel" in text and "vectorized" in text
