"""If with a condition known at build time folds into the taken branch."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.errors import FrontendError, OpNotSupportedError
from ember.frontend.onnx import from_onnx
from ember.testing import run_onnx_compiled

from .conftest import make_model


def _branch(name: str, op: str, out: str = "r") -> object:
    node = helper.make_node(op, ["x"], [out], name=f"{name}_{op}")
    return helper.make_graph(
        [node], name, [], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)]
    )


def _if_model(cond_nodes: list, cond_inits: dict, then_op: str = "Relu", else_op: str = "Neg"):
    node = helper.make_node(
        "If",
        ["c"],
        ["y"],
        name="the_if",
        then_branch=_branch("then", then_op),
        else_branch=_branch("else", else_op),
    )
    return make_model([*cond_nodes, node], {"x": ("float32", (2, 3))}, ["y"], cond_inits, opset=17)


X = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)


@pytest.mark.parametrize(("cond", "want"), [(True, np.maximum(X, 0)), (False, -X)])
def test_constant_condition_takes_its_branch(cond, want, run_ember):
    model = _if_model([], {"c": np.array(cond)})
    np.testing.assert_array_equal(run_ember(model, {"x": X})[0], want)


def test_condition_from_shapes_folds(run_ember):
    # c = Shape(x)[0] == 2, known once the input shape is: the then branch is taken.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
        helper.make_node("Equal", ["s", "two"], ["c1"]),
        helper.make_node("Squeeze", ["c1", "ax"], ["c"]),
    ]
    inits = {"two": np.array([2], np.int64), "ax": np.array([0], np.int64)}
    model = _if_model(nodes, inits)
    np.testing.assert_array_equal(run_ember(model, {"x": X})[0], np.maximum(X, 0))
    mod, _ = from_onnx(model)
    assert "negative" not in str(mod) and "relu" in str(mod)


def test_data_dependent_condition_names_the_node():
    node = helper.make_node(
        "If", ["c"], ["y"], name="the_if",
        then_branch=_branch("then", "Relu"), else_branch=_branch("else", "Neg"),
    )  # fmt: skip
    model = make_model([node], {"x": ("float32", (2, 3)), "c": ("bool", ())}, ["y"], opset=17)
    with pytest.raises(FrontendError, match="the_if.*If condition must be constant"):
        from_onnx(model)


def test_unsupported_op_in_either_branch_is_reported_up_front():
    model = _if_model([], {"c": np.array(True)}, else_op="ImageDecoder")
    with pytest.raises(OpNotSupportedError, match="ImageDecoder"):
        from_onnx(model)


@pytest.mark.cc
def test_folded_if_compiles():
    model = _if_model([], {"c": np.array(False)})
    np.testing.assert_array_equal(run_onnx_compiled(model, {"x": X})[0], -X)
