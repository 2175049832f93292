"""Structural equality and hashing: isomorphism, constants by value, variables by binding."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from ember.ir import (
    Call,
    Function,
    IRModule,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    call,
    const,
    structural_equal,
    structural_hash,
)
from ember.ir.op import Attrs
from ember.transform import fuse_ops

T = TensorType((2, 3), "float32")


def _build(alpha: float = 0.1, scale: float = 2.0, name: str = "x") -> Function:
    x = Var(name, T)
    c = const(np.full((2, 3), scale, np.float32))
    y = call("leaky_relu", call("multiply", x, c), alpha=alpha)
    parts = call("split", y, sizes=[1, 2], axis=1)
    return Function((x,), Tuple((TupleGetItem(parts, 0), TupleGetItem(parts, 1))))


def test_separately_built_graphs_are_equal_with_equal_hashes() -> None:
    a, b = _build(), _build(name="other")
    assert a is not b
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    ma, mb = IRModule.from_expr(a), IRModule.from_expr(b)
    assert structural_equal(ma, mb) and structural_hash(ma) == structural_hash(mb)


def test_differences_are_detected() -> None:
    base = _build()
    for other in (_build(alpha=0.2), _build(scale=3.0)):
        assert not structural_equal(base, other)
        assert structural_hash(base) != structural_hash(other)
    x = Var("x", T)
    assert not structural_equal(call("relu", x), call("exp", x))
    assert not structural_equal(call("relu", x), x)
    assert not structural_equal(IRModule.from_expr(base), base)
    assert not structural_equal(IRModule.from_expr(base), IRModule({"main": base, "f": _build()}))


def test_constants_compare_by_dtype_and_bits() -> None:
    x = Var("x", TensorType((3,), "float32"))
    a = call("add", x, const(np.array([1, 2, 3], np.float32)))
    b = call("add", x, const(np.array([1, 2, 3], np.float32)))
    c = call("add", x, const(np.array([1, 2, 4], np.float32)))
    assert structural_equal(a, b)
    assert not structural_equal(a, c)
    nan1 = call("add", x, const(np.array([np.nan, 0, 0], np.float32)))
    nan2 = call("add", x, const(np.array([np.nan, 0, 0], np.float32)))
    assert structural_equal(nan1, nan2)


def test_free_variables_need_identity_unless_mapped() -> None:
    x, y = Var("x", T), Var("y", T)
    assert structural_equal(call("relu", x), call("relu", x))
    assert not structural_equal(call("relu", x), call("relu", y))
    assert structural_equal(call("relu", x), call("relu", y), map_free_vars=True)
    # mapping must stay one-to-one
    assert not structural_equal(call("add", x, y), call("add", x, x), map_free_vars=True)


def test_parameters_match_by_position() -> None:
    x, y = Var("x", T), Var("y", T)
    f = Function((x, y), call("subtract", x, y))
    p, q = Var("p", T), Var("q", T)
    assert structural_equal(f, Function((p, q), call("subtract", p, q)))
    assert not structural_equal(f, Function((p, q), call("subtract", q, p)))
    assert structural_hash(f) != structural_hash(Function((p, q), call("subtract", q, p)))


def test_sharing_must_match() -> None:
    x = Var("x", T)
    r = call("relu", x)
    shared = call("add", r, r)
    separate = call("add", call("relu", x), call("relu", x))
    assert not structural_equal(shared, separate)
    assert not structural_equal(shared, call("add", call("relu", x), r))
    r2 = call("relu", x)
    assert structural_equal(shared, call("add", r2, r2))


def test_called_functions_compare_structurally() -> None:
    def fused() -> IRModule:
        x = Var("x", T)
        return fuse_ops(IRModule.from_expr(Function((x,), call("exp", call("relu", x)))))

    a, b = fused(), fused()
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    x = Var("x", T)
    p = Var("p", T)
    other = Function((p,), call("exp", call("relu", p)), Attrs({"Primitive": 2}))
    c = IRModule.from_expr(Function((x,), Call(other, (x,))))
    assert not structural_equal(a, c)


def test_hash_is_stable_across_processes() -> None:
    code = (
        "import numpy as np\n"
        "from ember.ir import Function, TensorType, Var, call, const, structural_hash\n"
        "x = Var('x', TensorType((2, 3), 'float32'))\n"
        "c = const(np.full((2, 3), 2.0, np.float32))\n"
        "print(structural_hash(Function((x,), call('leaky_relu', call('add', x, c), alpha=0.5))))\n"
    )
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        outs.add(res.stdout.strip())
    assert len(outs) == 1
    x = Var("x", T)
    c = const(np.full((2, 3), 2.0, np.float32))
    here = structural_hash(Function((x,), call("leaky_relu", call("add", x, c), alpha=0.5)))
    assert outs == {str(here)}


def test_deep_graphs_do_not_recurse() -> None:
    def chain() -> Function:
        x = Var("x", T)
        y = x
        for _ in range(20000):
            y = call("negative", y)
        return Function((x,), y)

    a, b = chain(), chain()
    assert structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
