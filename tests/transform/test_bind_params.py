"""bind_params: named parameters become constants; wrong names and types are refused."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import Constant, Function, IRModule, TensorType, Var, call, evaluate
from ember.transform import bind_params


def _mod() -> IRModule:
    x = Var("x", TensorType((2, 3), "float32"))
    w = Var("w", TensorType((2, 3), "float32"))
    return IRModule.from_expr(Function((x, w), call("multiply", x, w)))


def test_binding_replaces_and_removes_params() -> None:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    mod = _mod()
    out = bind_params(mod, {"w": w})
    assert [p.name for p in out.main.params] == ["x"]
    assert isinstance(out.main.body.args[1], Constant)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(evaluate(out, [x])[0], evaluate(mod, [x, w])[0])
    assert [p.name for p in mod.main.params] == ["x", "w"]  # input untouched
    assert bind_params(mod, {}) is mod


def test_bad_names_and_values_are_refused() -> None:
    with pytest.raises(IRError, match=r"\['v'\] are not parameters.*\['w', 'x'\]"):
        bind_params(_mod(), {"v": np.zeros((2, 3), np.float32)})
    with pytest.raises(IRError, match="parameter 'w' has type .*float64\\[2, 3\\]"):
        bind_params(_mod(), {"w": np.zeros((2, 3))})
    with pytest.raises(IRError, match="parameter 'w'"):
        bind_params(_mod(), {"w": np.zeros((3, 2), np.float32)})
