"""eliminate_common_subexpr: equal calls and equal-valued constants are shared."""

from __future__ import annotations

import numpy as np

from ember.ir import (
    Call,
    Constant,
    Function,
    IRModule,
    TensorType,
    TupleGetItem,
    Var,
    call,
    const,
    post_order,
)
from ember.transform import eliminate_common_subexpr

T = TensorType((3, 4), "float32")


def _ops(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def test_identical_calls_are_shared(same_results) -> None:
    x = Var("x", T)
    a, b = call("exp", call("relu", x)), call("exp", call("relu", x))
    mod = IRModule.from_expr(Function((x,), call("add", a, b)))
    out = eliminate_common_subexpr(mod)
    assert _ops(out) == ["relu", "exp", "add"]
    assert out.main.body.args[0] is out.main.body.args[1]
    same_results(mod, out)


def test_different_attributes_or_arguments_are_not_shared() -> None:
    x, y = Var("x", T), Var("y", T)
    a = call("leaky_relu", x, alpha=0.1)
    b = call("leaky_relu", x, alpha=0.2)
    c = call("relu", y)
    mod = IRModule.from_expr(Function((x, y), call("add", call("add", a, b), call("relu", x))))
    out = eliminate_common_subexpr(IRModule.from_expr(Function((x, y), call("add", c, c))))
    assert _ops(out) == ["relu", "add"]
    assert eliminate_common_subexpr(mod) is mod


def test_constants_are_shared_by_value_and_dtype(same_results) -> None:
    x = Var("x", T)
    w1 = const(np.arange(12, dtype=np.float32).reshape(3, 4))
    w2 = const(np.arange(12, dtype=np.float32).reshape(3, 4))
    w3 = const(np.arange(12, dtype=np.float32).reshape(3, 4) + 1)
    body = call("add", call("add", call("multiply", x, w1), call("multiply", x, w2)), w3)
    mod = IRModule.from_expr(Function((x,), body))
    out = eliminate_common_subexpr(mod)
    consts = [n for n in post_order(out.main.body) if isinstance(n, Constant)]
    assert len(consts) == 2
    assert _ops(out) == ["multiply", "add", "add"]
    same_results(mod, out)
    i64 = const(np.arange(3, dtype=np.int64))
    i32 = const(np.arange(3, dtype=np.int32))
    xi = Var("xi", TensorType((3,), "int64"))
    cast = call("cast", i32, dtype="int64")
    mixed = IRModule.from_expr(Function((xi,), call("add", call("add", xi, i64), cast)))
    kept = eliminate_common_subexpr(mixed)
    assert len([n for n in post_order(kept.main.body) if isinstance(n, Constant)]) == 2


def test_tuple_items_are_shared(same_results) -> None:
    x = Var("x", T)
    parts = call("split", x, sizes=[2, 2], axis=1)
    body = call("add", call("exp", TupleGetItem(parts, 0)), call("exp", TupleGetItem(parts, 0)))
    mod = IRModule.from_expr(Function((x,), body))
    out = eliminate_common_subexpr(mod)
    assert _ops(out) == ["split", "exp", "add"]
    same_results(mod, out)


def test_long_duplicated_chains_collapse_without_recursion(same_results) -> None:
    x = Var("x", TensorType((2,), "float32"))
    a, b = x, x
    for _ in range(3000):
        a, b = call("negative", a), call("negative", b)
    mod = IRModule.from_expr(Function((x,), call("add", a, b)))
    out = eliminate_common_subexpr(mod)
    assert len(_ops(out)) == 3001
    same_results(mod, out, seeds=(0,))
