"""If with a condition known at build time folds into the taken branch; a data-dependent
If, Loop and Scan import as control ops (checked here with the reference evaluator against
onnxruntime; tests/ops/test_control.py compiles them)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.errors import FrontendError, OpNotSupportedError
from ember.frontend.onnx import from_onnx
from ember.ir import evaluate
from ember.testing import run_onnx_compiled

from .conftest import make_model, ort_run


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


def test_data_dependent_condition_becomes_a_branch_op():
    node = helper.make_node(
        "If", ["c"], ["y"], name="the_if",
        then_branch=_branch("then", "Relu"), else_branch=_branch("else", "Neg"),
    )  # fmt: skip
    model = make_model([node], {"x": ("float32", (2, 3)), "c": ("bool", ())}, ["y"], opset=17)
    mod, params = from_onnx(model)
    assert "control.if" in str(mod)
    for cond in (True, False):
        feeds = {"x": X, "c": np.array(cond)}
        np.testing.assert_array_equal(evaluate(mod, feeds, params)[0], ort_run(model, feeds)[0])


def test_branches_of_different_shapes_are_refused():
    then_b = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"])], "then", [],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
    )  # fmt: skip
    else_b = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0)], "else", [],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
    )  # fmt: skip
    node = helper.make_node(
        "If", ["c"], ["y"], name="the_if", then_branch=then_b, else_branch=else_b
    )
    model = make_model([node], {"x": ("float32", (2, 3)), "c": ("bool", ())}, ["y"], opset=17)
    with pytest.raises(FrontendError, match="the_if.*branches return different types"):
        from_onnx(model)


def _loop_body(cond_out_from: str) -> object:
    return helper.make_graph(
        [
            helper.make_node("Add", ["v_in", "x"], ["v_out"]),
            helper.make_node("Identity", ["v_out"], ["row"]),
            helper.make_node("Identity", [cond_out_from], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("row", TensorProto.FLOAT, [3]),
        ],
    )


def test_loop_matches_onnxruntime_in_the_reference_evaluator():
    node = helper.make_node("Loop", ["n", "t", "v0"], ["v", "rows"], body=_loop_body("cond_in"))
    inits = {"n": np.array(4, np.int64), "t": np.array(True)}
    model = make_model(
        [node], {"v0": ("float32", (3,)), "x": ("float32", (3,))}, ["v", "rows"], inits, opset=17
    )
    feeds = {"v0": np.ones(3, np.float32), "x": np.arange(3, dtype=np.float32)}
    mod, params = from_onnx(model)
    for got, want in zip(evaluate(mod, feeds, params), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(got, want)


def test_loop_scan_outputs_need_a_static_count():
    # the condition is a model input: the number of rows is data-dependent
    node = helper.make_node(
        "Loop", ["n", "t", "v0"], ["v", "rows"], name="the_loop", body=_loop_body("cond_in")
    )
    model = make_model(
        [node],
        {"v0": ("float32", (3,)), "x": ("float32", (3,)), "t": ("bool", ())},
        ["v", "rows"],
        {"n": np.array(4, np.int64)},
        opset=17,
    )
    with pytest.raises(FrontendError, match="the_loop.*scan outputs.*must be constant"):
        from_onnx(model)


def test_scan_reference_matches_onnxruntime():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x_t"], ["s2"]), helper.make_node("Neg", ["s2"], ["y"])],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("s2", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]),
        ],
    )
    node = helper.make_node(
        "Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1,
        scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
    )  # fmt: skip
    model = make_model(
        [node], {"s0": ("float32", (2,)), "xs": ("float32", (2, 4))}, ["s", "ys"], opset=17
    )
    feeds = {"s0": np.ones(2, np.float32), "xs": np.arange(8, dtype=np.float32).reshape(2, 4)}
    mod, params = from_onnx(model)
    assert "control.scan" in str(mod)
    for got, want in zip(evaluate(mod, feeds, params), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(got, want)


def test_unsupported_op_in_either_branch_is_reported_up_front():
    model = _if_model([], {"c": np.array(True)}, else_op="ImageDecoder")
    with pytest.raises(OpNotSupportedError, match="ImageDecoder"):
        from_onnx(model)


@pytest.mark.cc
def test_folded_if_compiles():
    model = _if_model([], {"c": np.array(False)})
    np.testing.assert_array_equal(run_onnx_compiled(model, {"x": X})[0], -X)


@pytest.mark.cc
def test_a_body_reading_an_outer_sequence_captures_its_elements():
    # the Scan body reads element 1 of a sequence built outside from a model input
    body = helper.make_graph(
        [
            helper.make_node("SequenceAt", ["parts", "one"], ["second"]),
            helper.make_node("Add", ["s", "x_t"], ["s2"]),
            helper.make_node("Mul", ["s2", "second"], ["y"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [3]),
        ],
        [
            helper.make_tensor_value_info("s2", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
        ],
    )
    nodes = [
        helper.make_node("SplitToSequence", ["w"], ["parts"], axis=0, keepdims=0),
        helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1),
    ]
    model = make_model(
        nodes,
        {"s0": ("float32", (3,)), "xs": ("float32", (4, 3)), "w": ("float32", (2, 3))},
        ["s", "ys"],
        {"one": np.array(1, np.int64)},
        opset=17,
    )
    rng = np.random.default_rng(1)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in
             [("s0", (3,)), ("xs", (4, 3)), ("w", (2, 3))]}  # fmt: skip
    mod, params = from_onnx(model)
    for got, want in zip(evaluate(mod, feeds, params), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    for got, want in zip(run_onnx_compiled(model, feeds), ort_run(model, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def _slice_at_i_loop(trip_init: bool) -> object:
    """y += x[i:i+1] per iteration: the body slices at its iteration number."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["i", "one"], ["end"]),
            helper.make_node("Unsqueeze", ["i", "axes"], ["start1"]),
            helper.make_node("Unsqueeze", ["end", "axes"], ["end1"]),
            helper.make_node("Slice", ["x", "start1", "end1"], ["part"]),
            helper.make_node("Add", ["y_in", "part"], ["y_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [1]),
        ],
    )
    node = helper.make_node("Loop", ["n", "t", "y0"], ["y"], name="slicer", body=body)
    inits = {
        "t": np.array(True),
        "one": np.array(1, np.int64),
        "axes": np.array([0], np.int64),
        "x": np.arange(1, 6, dtype=np.float32),
    }
    inputs = {"y0": ("float32", (1,))}
    if trip_init:
        inits["n"] = np.array(4, np.int64)
    else:
        inputs["n"] = ("int64", ())
    return make_model([node], inputs, ["y"], inits, opset=17)


def test_a_body_slicing_at_its_iteration_converts_per_iteration_with_a_small_count():
    model = _slice_at_i_loop(trip_init=True)
    feeds = {"y0": np.zeros(1, np.float32)}
    mod, params = from_onnx(model)
    assert "control.loop" not in str(mod)
    np.testing.assert_array_equal(evaluate(mod, feeds, params)[0], ort_run(model, feeds)[0])


def test_a_body_slicing_at_its_iteration_needs_a_constant_count():
    with pytest.raises(FrontendError, match="must be constant"):
        from_onnx(_slice_at_i_loop(trip_init=False))
