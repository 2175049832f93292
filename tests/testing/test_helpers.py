"""ember.testing: the shared model builder, seeded inputs and the three runners."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.errors import EmberError
from ember.testing import (
    ORT_MAX_IR_VERSION,
    build_model,
    elem_type,
    node,
    random_input,
    run_onnx_reference,
    run_onnxruntime,
)


def test_build_model_types_inputs_outputs_and_initializers() -> None:
    x = np.zeros((2, 3), "float32")
    nodes = [helper.make_node("Add", ["x", "b"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    model = build_model(
        nodes, {"x": x, "s": ("int64", ("n", None))}, {"z": "float32"}, {"b": np.ones(3, "f4")}
    )
    assert model.ir_version <= ORT_MAX_IR_VERSION
    assert model.opset_import[0].version == 17 and model.graph.name == "test_graph"
    x_type = model.graph.input[0].type.tensor_type
    assert x_type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in x_type.shape.dim] == [2, 3]
    s_dims = model.graph.input[1].type.tensor_type.shape.dim
    assert s_dims[0].dim_param == "n" and not s_dims[1].HasField("dim_value")
    assert model.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert [i.name for i in model.graph.initializer] == ["b"]
    untyped = build_model(nodes, {"x": x}, ["z"], {"b": np.ones(3, "f4")}, opset=14)
    assert not untyped.graph.output[0].type.HasField("tensor_type")
    assert untyped.opset_import[0].version == 14


def test_random_input_is_seeded_and_typed() -> None:
    a = random_input((3, 4), "float32", seed=5, scale=2.0)
    np.testing.assert_array_equal(a, random_input((3, 4), "float32", seed=5, scale=2.0))
    assert a.dtype == np.float32 and a.shape == (3, 4)
    u = random_input((100,), "uint8", seed=1, int_range=(-20, 20))
    assert u.dtype == np.uint8 and u.min() >= 0 and u.max() < 20
    i = random_input((100,), "int32", seed=1, int_range=(-20, 20))
    assert i.min() >= -20 and i.max() < 20 and i.min() < 0
    assert random_input((4,), "bool").dtype == np.bool_
    assert elem_type("float64") == TensorProto.DOUBLE


def test_reference_and_onnxruntime_runners_agree() -> None:
    x = random_input((2, 5), seed=0)
    model = build_model([helper.make_node("Sigmoid", ["x"], ["y"])], {"x": x}, ["y"])
    (ours,) = run_onnx_reference(model, {"x": x})
    (theirs,) = run_onnxruntime(model, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


def test_missing_onnxruntime_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    x = random_input((2,), seed=0)
    model = build_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"])
    with pytest.raises(EmberError, match="pip install onnxruntime"):
        run_onnxruntime(model, {"x": x})


def test_node_has_one_output_named_like_it() -> None:
    n = node("Conv", ["x", "w"], "y", strides=[2, 2])
    assert list(n.input) == ["x", "w"] and list(n.output) == ["y"] and n.name == "y"
    assert n.attribute[0].name == "strides" and list(n.attribute[0].ints) == [2, 2]
