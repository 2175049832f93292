"""Reference evaluator: values, input conventions, function calls, errors, deep graphs."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
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
    evaluate,
    evaluate_expr,
)
from ember.ir.op import Attrs

T = TensorType((2, 3), "float32")


def _mod() -> IRModule:
    x, w = Var("x", T), Var("w", T)
    y = call("add", call("multiply", x, w), const(np.float32(1.0)))
    return IRModule.from_expr(Function((x, w), Tuple((y, call("relu", x)))))


def test_values_match_numpy_and_outputs_are_flattened() -> None:
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    out = evaluate(_mod(), [x, w])
    assert len(out) == 2
    np.testing.assert_allclose(out[0], x * w + 1, rtol=1e-6)
    np.testing.assert_array_equal(out[1], np.maximum(x, 0))
    by_name = evaluate(_mod(), {"x": x, "w": w})
    np.testing.assert_array_equal(by_name[0], out[0])
    with_params = evaluate(_mod(), [x], params={"w": w})
    np.testing.assert_array_equal(with_params[0], out[0])
    np.testing.assert_array_equal(evaluate(_mod().main, [x, w])[1], out[1])


def test_input_errors_name_the_input() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(IRError, match=r"expected 2 inputs \(\['x', 'w'\]\), got 1"):
        evaluate(_mod(), [x])
    with pytest.raises(IRError, match=r"missing values for inputs \['w'\]"):
        evaluate(_mod(), {"x": x})
    with pytest.raises(IRError, match=r"input 'w' expects float32\[2, 3\], got float64\[2, 3\]"):
        evaluate(_mod(), {"x": x, "w": np.zeros((2, 3))})
    with pytest.raises(IRError, match="no value bound for variable %x"):
        evaluate_expr(call("relu", Var("x", T)), {})


def test_calls_of_functions_and_tuple_items() -> None:
    p, q = Var("p", T), Var("q", T)
    inner = Function((p, q), Tuple((call("subtract", p, q), call("add", p, q))), Attrs({"P": 1}))
    x = Var("x", T)
    pair = Call(inner, (x, call("exp", x)))
    mod = IRModule.from_expr(Function((x,), TupleGetItem(pair, 1)))
    v = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    np.testing.assert_allclose(evaluate(mod, [v])[0], v + np.exp(v), rtol=1e-6)


def test_reference_disagreeing_with_type_rule_is_reported() -> None:
    from ember.ir.op import OpDef, OpPattern

    bad = OpDef(
        "test.bad_ref",
        1,
        infer_type=lambda types, attrs: types[0],
        reference=lambda xs, attrs: xs[0].astype(np.float64),
        pattern=OpPattern.ELEMWISE,
    )
    x = Var("x", T)
    expr = Call(bad, (x,), name="n1")
    with pytest.raises(IRError, match=r"test.bad_ref' \(node 'n1'\).*float64\[2, 3\].*float32"):
        evaluate_expr(expr, {x: np.zeros((2, 3), np.float32)})


def test_deep_graph_evaluates_without_recursion() -> None:
    x = Var("x", TensorType((4,), "float32"))
    y = x
    for _ in range(20000):
        y = call("negative", y)
    out = evaluate(Function((x,), y), [np.arange(4, dtype=np.float32)])
    np.testing.assert_array_equal(out[0], np.arange(4, dtype=np.float32))
