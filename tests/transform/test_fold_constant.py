"""fold_constant: constant sub-graphs become constants, results stay equal, big results stay."""

from __future__ import annotations

import numpy as np

from ember.ir import (
    Call,
    Constant,
    Function,
    IRModule,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    call,
    const,
    post_order,
)
from ember.ir.printer import astext
from ember.transform import fold_constant
from ember.transform.fold_constant import MAX_FOLD_ELEMENTS


def _calls(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def test_folds_constant_chain_and_keeps_variable_part(same_results) -> None:
    x = Var("x", TensorType((2, 3), "float32"))
    a = const(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = const(np.full((2, 3), 0.5, dtype=np.float32))
    c = call("exp", call("multiply", a, b))
    mod = IRModule.from_expr(Function((x,), call("add", x, c)))
    out = fold_constant(mod)
    assert _calls(out) == ["add"]
    folded = out.main.body.args[1]
    assert isinstance(folded, Constant)
    np.testing.assert_allclose(folded.data, np.exp(np.arange(6).reshape(2, 3) * 0.5), rtol=1e-6)
    same_results(mod, out)


def test_input_module_is_not_changed() -> None:
    x = Var("x", TensorType((3,), "float32"))
    body = call("add", x, call("negative", const(np.ones(3, np.float32))))
    mod = IRModule.from_expr(Function((x,), body))
    text = astext(mod)
    fold_constant(mod)
    assert astext(mod) == text


def test_tuple_results_fold_to_constant_fields(same_results) -> None:
    x = Var("x", TensorType((2,), "int64"))
    parts = call("split", const(np.arange(4, dtype=np.int64)), sizes=[2, 2], axis=0)
    body = call("add", x, TupleGetItem(parts, 1))
    mod = IRModule.from_expr(Function((x,), body))
    out = fold_constant(mod)
    assert _calls(out) == ["add"]
    assert isinstance(out.main.body.args[1], Constant)
    np.testing.assert_array_equal(out.main.body.args[1].data, [2, 3])
    same_results(mod, out)


def test_tuple_get_item_of_tuple_is_resolved() -> None:
    x = Var("x", TensorType((2,), "float32"))
    y = Var("y", TensorType((2,), "float32"))
    body = call("relu", TupleGetItem(Tuple((x, y)), 1))
    out = fold_constant(IRModule.from_expr(Function((x, y), body)))
    assert out.main.body.args[0] is y


def test_large_expanding_results_are_not_folded() -> None:
    x = Var("x", TensorType((1000, 1001), "float32"))
    big = call("broadcast_to", const(np.float32(2.0)), shape=[1000, 1001])
    mod = IRModule.from_expr(Function((x,), call("multiply", x, big)))
    assert MAX_FOLD_ELEMENTS < 1000 * 1001
    out = fold_constant(mod)
    assert _calls(out) == ["broadcast_to", "multiply"]


def test_large_results_from_equally_large_constants_are_folded() -> None:
    x = Var("x", TensorType((1001, 1000), "float32"))
    w = const(np.ones((1000, 1001), np.float32))
    mod = IRModule.from_expr(Function((x,), call("add", x, call("transpose", w, axes=[1, 0]))))
    out = fold_constant(mod)
    assert _calls(out) == ["add"]
    assert out.main.body.args[1].type == TensorType((1001, 1000), "float32")


def test_unchanged_module_is_returned_as_is() -> None:
    x = Var("x", TensorType((2,), "float32"))
    mod = IRModule.from_expr(Function((x,), call("relu", x)))
    assert fold_constant(mod) is mod
