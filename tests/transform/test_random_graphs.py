"""Every pass, and the whole pipeline plus fusion, keeps results equal on random DAGs that
mix elementwise, broadcast, injective, reduction, anchor, opaque and multi-output ops."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ir import Expr, Function, IRModule, TensorType, TupleGetItem, Var, call, const
from ember.ir.structural import structural_equal
from ember.transform import (
    dead_code_elimination,
    eliminate_common_subexpr,
    fold_constant,
    fuse_ops,
    optimize,
    simplify,
)

SHAPE = (2, 4, 3, 3)
F32 = "float32"


def _random_module(seed: int) -> IRModule:
    """A random graph over (2, 4, 3, 3) tensors; every op keeps that shape."""
    rng = np.random.default_rng(seed)
    x = Var("x", TensorType(SHAPE, F32))
    pool: list[Expr] = [x, const(rng.standard_normal(SHAPE).astype(F32))]

    def pick() -> Expr:
        return pool[int(rng.integers(len(pool)))]

    def weight(*shape: int) -> Expr:
        return const((rng.standard_normal(shape) * 0.3).astype(F32))

    for _ in range(int(rng.integers(8, 25))):
        kind = int(rng.integers(10))
        a = pick()
        if kind == 0:
            y = call(str(rng.choice(["relu", "tanh", "sigmoid", "negative"])), a)
        elif kind == 1:
            y = call(str(rng.choice(["add", "multiply", "subtract", "maximum"])), a, pick())
        elif kind == 2:
            y = call("add", a, weight(4, 1, 1))
        elif kind == 3:
            y = call("transpose", call("transpose", a, axes=[0, 2, 3, 1]), axes=[0, 3, 1, 2])
        elif kind == 4:
            y = call("reshape", call("reshape", a, newshape=[2, 36]), newshape=list(SHAPE))
        elif kind == 5:
            m = call("mean", a, axes=[1], keepdims=True)
            y = call("subtract", a, m)
        elif kind == 6:
            y = call(
                "nn.conv",
                a,
                weight(4, 4, 3, 3),
                strides=[1, 1],
                padding=[1, 1, 1, 1],
                dilation=[1, 1],
            )
        elif kind == 7:
            stats = [const((rng.random(4) + 0.5).astype(F32)) for _ in range(4)]
            y = call("nn.batch_norm", a, *stats, epsilon=1e-3)
        elif kind == 8:
            y = call("nn.softmax", a, axis=1)
        else:
            parts = call("split", a, sizes=[1, 3], axis=1)
            y = call("concatenate", TupleGetItem(parts, 1), TupleGetItem(parts, 0), axis=1)
        pool.append(y)
    # the result combines the last few values so that most of the graph is live
    out = pool[-1]
    for extra in pool[-4:-1]:
        out = call("add", out, extra)
    return IRModule.from_expr(Function((x,), out))


@pytest.mark.parametrize("seed", range(12))
def test_passes_keep_results_on_random_graphs(seed: int, same_results) -> None:
    mod = _random_module(seed)
    for p in (fold_constant, dead_code_elimination, eliminate_common_subexpr, simplify):
        same_results(mod, p(mod), seeds=(seed,), rtol=1e-4)
    opt = optimize(mod, debug=True)
    same_results(mod, opt, seeds=(seed,), rtol=1e-4)
    fused = fuse_ops(opt)
    same_results(mod, fused, seeds=(seed,), rtol=1e-4)
    assert structural_equal(fuse_ops(fused), fused)
    for depth in (1, 2, 5):
        same_results(mod, fuse_ops(opt, max_depth=depth), seeds=(seed,), rtol=1e-4)
