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


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("bhqd,bhkd->bhqk", [(1, 2, 5, 4), (1, 2, 6, 4)]),  # attention's scores
        ("bhqk,bhkd->bqhd", [(1, 2, 5, 6), (1, 2, 6, 4)]),  # its context, heads merged
        ("ij,kj->ik", [(3, 8), (5, 8)]),
        ("bnc,cd->bdn", [(2, 3, 4), (4, 5)]),
        ("i,j->ij", [(3,), (4,)]),
        ("ij,ij->i", [(3, 4), (3, 4)]),
        ("abc,cbd->ad", [(2, 3, 4), (4, 3, 5)]),
    ],
)
def test_matrix_product_einsums_legalize_to_matmul(equation, shapes):
    """Regression: ``bhqd,bhkd->bhqk`` ran as the generic compute, 29x slower than
    onnxruntime; a two-operand einsum whose letters are batch, contracted or free becomes
    transposes, reshapes and one nn.matmul with numpy's result."""
    from ember.ir.expr import post_order
    from ember.ops.registry import find_legalizer

    rng = np.random.default_rng(1)
    params = [Var(f"x{k}", TensorType(s, "float32")) for k, s in enumerate(shapes)]
    node = call("einsum", *params, equation=equation, name="e")
    out = find_legalizer("einsum")(node)
    ops = [n.op.name for n in post_order(out) if hasattr(n, "op") and hasattr(n.op, "name")]
    assert ops.count("nn.matmul") == 1 and "einsum" not in ops, ops
    xs = [rng.standard_normal(s).astype("float32") for s in shapes]
    got = evaluate(Function(tuple(params), out), xs)[0]
    np.testing.assert_allclose(got, np.einsum(equation, *xs), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ii->i", [(4, 4)]),
        ("ij,jk", [(3, 4), (4, 5)]),
        ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
        ("ij,jk->i", [(3, 4), (4, 5)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ],
)
def test_other_einsums_keep_the_generic_compute(equation, shapes):
    """Diagonals, ellipses, letters summed over one operand alone and three operands stay
    einsum (implicit outputs without an ellipsis legalize)."""
    from ember.ops.registry import find_legalizer

    params = [Var(f"x{k}", TensorType(s, "float32")) for k, s in enumerate(shapes)]
    node = call("einsum", *params, equation=equation)
    out = find_legalizer("einsum")(node)
    assert (out is node) == (equation != "ij,jk")
