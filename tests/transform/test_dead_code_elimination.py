"""dead_code_elimination: tuples built only to be taken apart vanish; params are kept."""

from __future__ import annotations

from ember.ir import (
    Call,
    Function,
    IRModule,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    call,
    post_order,
)
from ember.transform import dead_code_elimination

T = TensorType((2, 4), "float32")


def test_item_of_built_tuple_becomes_the_field(same_results) -> None:
    x, y = Var("x", T), Var("y", T)
    dead = call("exp", y)
    body = call("relu", TupleGetItem(Tuple((dead, x)), 1))
    mod = IRModule.from_expr(Function((x, y), body))
    out = dead_code_elimination(mod)
    assert out.main.body.args[0] is x
    assert [n.op_name for n in post_order(out.main.body) if isinstance(n, Call)] == ["relu"]
    assert out.main.params == mod.main.params  # the unused %y stays a parameter
    same_results(mod, out)


def test_rebuilt_tuple_of_all_items_becomes_the_source(same_results) -> None:
    x = Var("x", T)
    parts = call("split", x, sizes=[1, 3], axis=1)
    body = Tuple((TupleGetItem(parts, 0), TupleGetItem(parts, 1)))
    mod = IRModule.from_expr(Function((x,), body))
    out = dead_code_elimination(mod)
    assert out.main.body is parts
    same_results(mod, out)


def test_partial_or_reordered_tuples_are_kept() -> None:
    x = Var("x", T)
    parts = call("split", x, sizes=[1, 3], axis=1)
    swapped = Tuple((TupleGetItem(parts, 1), TupleGetItem(parts, 0)))
    mod = IRModule.from_expr(Function((x,), swapped))
    assert dead_code_elimination(mod) is mod
    first = Tuple((TupleGetItem(parts, 0),))
    mod2 = IRModule.from_expr(Function((x,), first))
    assert dead_code_elimination(mod2) is mod2


def test_every_function_of_the_module_is_cleaned() -> None:
    x = Var("x", T)
    y = Var("y", T)
    f = Function((y,), TupleGetItem(Tuple((y,)), 0))
    mod = IRModule({"main": Function((x,), call("relu", x)), "helper": f})
    out = dead_code_elimination(mod)
    assert out["helper"].body is y
    assert out["main"] is mod["main"]
