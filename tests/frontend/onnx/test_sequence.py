"""Sequences and optionals inside a model resolve at import time (a sequence is a tuple of
tensors); as inputs or outputs of the whole model they are refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.errors import FrontendError
from ember.frontend.onnx import from_onnx
from ember.ir import evaluate
from ember.testing import run_onnx_compiled

from .conftest import ember_run, make_model, ort_run

X = np.arange(24, dtype=np.float32).reshape(4, 6) / 7.0


def _map_body() -> object:
    return helper.make_graph(
        [helper.make_node("Mul", ["e", "e"], ["sq"]), helper.make_node("Add", ["sq", "b"], ["o"])],
        "map_body",
        [
            helper.make_tensor_value_info("e", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, None),
        ],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)],
    )


def split_map_concat() -> object:
    """SplitToSequence -> SequenceMap (x*x + b) -> insert, erase, at -> ConcatFromSequence."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
        helper.make_node("SequenceMap", ["parts", "bias"], ["mapped"], body=_map_body()),
        helper.make_node("SequenceAt", ["mapped", "minus1"], ["last"]),
        helper.make_node("SequenceInsert", ["mapped", "last", "zero"], ["ins"]),
        helper.make_node("SequenceErase", ["ins", "one"], ["erased"]),
        helper.make_node("SequenceLength", ["erased"], ["n"]),
        helper.make_node("ConcatFromSequence", ["erased"], ["y"], axis=1),
        helper.make_node("ConcatFromSequence", ["erased"], ["stacked"], axis=0, new_axis=1),
    ]
    inits = {
        "sizes": np.array([2, 2, 2], np.int64),
        "bias": np.full((4, 2), 0.5, np.float32),
        "minus1": np.array(-1, np.int64),
        "zero": np.array(0, np.int64),
        "one": np.array(1, np.int64),
    }
    return make_model(nodes, {"x": ("float32", (4, 6))}, ["y", "stacked", "n"], inits, opset=17)


def test_sequence_ops_match_onnxruntime():
    model = split_map_concat()
    want = ort_run(model, {"x": X})
    for got, ref in zip(ember_run(model, {"x": X}), want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    mod, _ = from_onnx(model)
    assert "split" in str(mod) and "control" not in str(mod)  # no op of its own is left


@pytest.mark.cc
def test_sequence_ops_compile():
    model = split_map_concat()
    for got, ref in zip(run_onnx_compiled(model, {"x": X}), ort_run(model, {"x": X}), strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_split_to_sequence_without_split_squeezes():
    nodes = [
        helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
        helper.make_node("SequenceAt", ["s", "two"], ["y"]),
    ]
    model = make_model(nodes, {"x": ("float32", (4, 6))}, ["y"], {"two": np.array(2)}, opset=17)
    np.testing.assert_array_equal(ember_run(model, {"x": X})[0], X[2])


def test_optional_is_known_at_build_time():
    nodes = [
        helper.make_node("Optional", ["x"], ["some"]),
        helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(1, [4, 6])),
        helper.make_node("OptionalHasElement", ["some"], ["has"]),
        helper.make_node("OptionalHasElement", ["none"], ["has_not"]),
        helper.make_node("OptionalGetElement", ["some"], ["y"]),
    ]
    model = make_model(nodes, {"x": ("float32", (4, 6))}, ["y", "has", "has_not"], opset=18)
    y, has, has_not = ember_run(model, {"x": X})
    np.testing.assert_array_equal(y, X)
    assert bool(has) and not bool(has_not)


def test_element_of_an_empty_optional_is_an_error():
    nodes = [
        helper.make_node("Optional", [], ["none"], type=helper.make_tensor_type_proto(1, [2])),
        helper.make_node("OptionalGetElement", ["none"], ["y"], name="get"),
    ]
    model = make_model(nodes, {"x": ("float32", (2,))}, ["y"], opset=18)
    with pytest.raises(FrontendError, match="get.*optional is empty"):
        from_onnx(model)


def test_sequence_outputs_and_inputs_of_the_model_are_flattened():
    """A sequence input takes its elements' shapes at build time (inputs ``s.0``, ``s.1``);
    a sequence output gives one output per element."""
    nodes = [
        helper.make_node("SequenceInsert", ["s", "x"], ["longer"]),
        helper.make_node("SequenceLength", ["longer"], ["n"]),
    ]
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, None))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_value_info("s", seq), helper.make_tensor_value_info("x", 1, [2])],
        [helper.make_value_info("longer", seq), helper.make_tensor_value_info("n", 7, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FrontendError, match="input 's' is a sequence.*shape=.*'s': \\[\\(2, 3\\)"):
        from_onnx(model)
    mod, params = from_onnx(model, shape={"s": [(3,), (1, 2)]})
    assert [p.name for p in mod.main.params] == ["x", "s.0", "s.1"]
    assert mod.attrs["output_names"] == ["longer.0", "longer.1", "longer.2", "n"]
    feeds = {"x": np.ones(2, np.float32), "s.0": np.zeros(3, np.float32), "s.1": X[:1, :2]}
    *elements, n = evaluate(mod, feeds, params)
    assert [e.shape for e in elements] == [(3,), (1, 2), (2,)] and int(n) == 3


def test_an_empty_optional_output_is_refused():
    node = helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(1, [2]))
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(1, [2]))
    graph = helper.make_graph([node], "g", [], [helper.make_value_info("o", opt)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(FrontendError, match="output 'o' is an optional that is empty"):
        from_onnx(model)


def _append_body() -> object:
    """A Loop body appending x[:i+1] to a carried sequence (its length grows)."""
    return helper.make_graph(
        [
            helper.make_node("Add", ["i", "one"], ["end"]),
            helper.make_node("Unsqueeze", ["end", "axes"], ["end1"]),
            helper.make_node("Slice", ["v", "zero1", "end1"], ["part"]),
            helper.make_node("SequenceInsert", ["seq_in", "part"], ["seq_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_value_info(
                "seq_in", helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, None))
            ),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_value_info(
                "seq_out", helper.make_sequence_type_proto(helper.make_tensor_type_proto(1, None))
            ),
        ],
    )


def test_a_loop_carrying_a_sequence_resolves_at_build_time():
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "t", "empty"], ["parts"], body=_append_body()),
        helper.make_node("ConcatFromSequence", ["parts"], ["y"], axis=0),
    ]
    inits = {
        "n": np.array(3, np.int64),
        "t": np.array(True),
        "one": np.array(1, np.int64),
        "axes": np.array([0], np.int64),
        "zero1": np.array([0], np.int64),
    }
    model = make_model(nodes, {"v": ("float32", (5,))}, ["y"], inits, opset=17)
    v = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(ember_run(model, {"v": v})[0], ort_run(model, {"v": v})[0])


def test_a_loop_carrying_a_sequence_needs_a_constant_count():
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT),
        helper.make_node("Loop", ["n", "t", "empty"], ["parts"], name="grow", body=_append_body()),
        helper.make_node("ConcatFromSequence", ["parts"], ["y"], axis=0),
    ]
    inits = {
        "t": np.array(True),
        "one": np.array(1, np.int64),
        "axes": np.array([0], np.int64),
        "zero1": np.array([0], np.int64),
    }
    model = make_model(nodes, {"v": ("float32", (5,)), "n": ("int64", ())}, ["y"], inits, opset=17)
    with pytest.raises(FrontendError, match="grow.*carries a sequence.*must be constant"):
        from_onnx(model)
