"""Verifier: well-formed IR passes; stray variables, bad types, cycles, bad calls fail."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import Call, Function, IRModule, TensorType, Var, call, const, verify
from ember.ir.op import Attrs
from ember.transform import fuse_ops

T = TensorType((2, 3), "float32")


def _mod() -> IRModule:
    x = Var("x", T)
    return IRModule.from_expr(Function((x,), call("relu", call("add", x, const(np.ones(3, "f"))))))


def test_well_formed_modules_pass() -> None:
    verify(_mod())
    verify(fuse_ops(_mod()))
    verify(_mod().main)


def test_variable_that_is_not_a_parameter() -> None:
    x, y = Var("x", T), Var("y", T)
    mod = IRModule.from_expr(Function((x,), call("add", x, y, name="sum1")))
    with pytest.raises(IRError, match=r"function 'main' uses %y, which is not one of its"):
        verify(mod)


def test_nested_function_must_be_closed() -> None:
    x = Var("x", T)
    p = Var("p", T)
    inner = Function((p,), call("add", p, x), Attrs({"Primitive": 1}))
    mod = IRModule.from_expr(Function((x,), Call(inner, (x,))))
    with pytest.raises(IRError, match="uses %x.*closed"):
        verify(mod)


def test_parameter_listed_twice_or_shared_between_functions() -> None:
    x = Var("x", T)
    with pytest.raises(IRError, match="lists a parameter twice"):
        verify(IRModule.from_expr(Function((x, x), call("relu", x))))
    inner = Function((x,), call("relu", x), Attrs({"Primitive": 1}))
    with pytest.raises(IRError, match="parameter of two functions"):
        verify(IRModule.from_expr(Function((x,), Call(inner, (x,)))))


def test_recorded_type_that_the_rule_disagrees_with() -> None:
    mod = _mod()
    relu = mod.main.body
    object.__setattr__(relu, "type", TensorType((3, 2), "float32"))
    object.__setattr__(mod.main, "type", relu.type)
    with pytest.raises(IRError, match="call to 'relu'.*recorded type.*type rule gives"):
        verify(mod)


def test_attributes_outside_the_schema() -> None:
    x = Var("x", T)
    bad = call("leaky_relu", x, alpha=0.5)
    object.__setattr__(bad, "attrs", Attrs({"alpha": 0.5, "beta": 1}))
    with pytest.raises(IRError, match="leaky_relu.*unknown attributes"):
        verify(IRModule.from_expr(Function((x,), bad)))


def test_cycle_is_found() -> None:
    x = Var("x", T)
    a = call("relu", x)
    b = call("exp", a, name="loop")
    object.__setattr__(a, "args", (b,))
    with pytest.raises(IRError, match="cycle through call to 'exp' \\(node 'loop'\\)"):
        verify(IRModule.from_expr(Function((x,), b)))


def test_function_call_with_wrong_argument_type() -> None:
    x = Var("x", T)
    p = Var("p", T)
    inner = Function((p,), call("relu", p), Attrs({"Primitive": 1}))
    c = Call(inner, (x,))
    y = Var("y", TensorType((3,), "float32"))
    object.__setattr__(c, "args", (y,))
    with pytest.raises(IRError, match="argument 0 has type Tensor\\[\\(3\\), float32\\]"):
        verify(IRModule.from_expr(Function((y,), c)))


def test_function_as_a_value_is_refused() -> None:
    p = Var("p", T)
    inner = Function((p,), call("relu", p))
    with pytest.raises(IRError, match="Function used as a value"):
        verify(IRModule.from_expr(Function((), inner)))
