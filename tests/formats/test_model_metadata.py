"""metadata.json: derived from a graph, round trips, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ember.errors import SerializationError
from ember.formats.graph_json import GraphJSON, Node, NodeEntry, OpAttrs
from ember.formats.graph_memory import storage_sizes
from ember.formats.metadata import (
    METADATA_FORMAT_VERSION,
    FunctionInfo,
    ModelMetadata,
    ParameterInfo,
    graph_metadata,
)


def graph() -> GraphJSON:
    nodes = [
        Node("null", "x"),
        Node("null", "w"),
        Node("tvm_op", "add0", (NodeEntry(0), NodeEntry(1)), OpAttrs("add", 2)),
        Node("tvm_op", "relu0", (NodeEntry(2),), OpAttrs("relu", 1)),
        Node("tvm_op", "relu1", (NodeEntry(3),), OpAttrs("relu", 1)),
    ]
    return GraphJSON.create(
        nodes, [NodeEntry(4)], [[2, 3]] * 5, ["float32"] * 5, storage_id=[0, 1, 2, 3, 2]
    )


def test_graph_metadata_sizes_and_names() -> None:
    md = graph_metadata(graph(), {"w": np.zeros((2, 3), np.float32)})
    assert md.executor == "graph" and md.mod_name == "default"
    assert [p.name for p in md.inputs] == ["x"]
    assert [p.name for p in md.params] == ["w"]
    assert md.outputs[0].shape == (2, 3) and md.outputs[0].dtype == "float32"
    (main,) = md.functions
    assert main.function_name == "default_run_model"
    assert (main.num_inputs, main.num_outputs) == (1, 1)
    assert main.io_size_bytes == 48
    assert main.constant_size_bytes == 24
    # storages 0 (x), 1 (w), 2 (output, shared with add0) are not workspace; 3 is (64 B).
    assert main.workspace_size_bytes == 64
    assert storage_sizes(graph()) == {0: 64, 1: 64, 2: 64, 3: 64}


def test_round_trip_and_determinism() -> None:
    md = graph_metadata(graph(), {"w": np.zeros((2, 3), np.float32)}, mod_name="net")
    text = md.to_json()
    assert ModelMetadata.from_json(text) == md
    assert json.loads(text)["version"] == METADATA_FORMAT_VERSION
    assert text == graph_metadata(graph(), {"w": np.ones((2, 3), np.float32)}, "net").to_json()


def test_parameter_info_nbytes() -> None:
    assert ParameterInfo("a", (2, 5), "float16").nbytes == 20
    assert ParameterInfo("a", (), "int64").nbytes == 8


def good() -> dict:
    return json.loads(graph_metadata(graph(), {}).to_json())


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("version", 2, "reads version 1 only"),
        ("version", "1", "expected"),
        ("executor", "vm", "unknown"),
        ("interface_api", "rust", "unknown"),
        ("inputs", {}, "expected"),
        ("mod_name", 3, "expected"),
    ],
)
def test_refusals(key: str, value: object, message: str) -> None:
    obj = good()
    obj[key] = value
    with pytest.raises(SerializationError, match=message):
        ModelMetadata.from_json(json.dumps(obj))


def test_refuses_bad_parameter_and_function() -> None:
    obj = good()
    obj["inputs"][0]["shape"] = [2, -1]
    with pytest.raises(SerializationError, match="negative"):
        ModelMetadata.from_json(json.dumps(obj))
    obj = good()
    obj["inputs"][0]["dtype"] = "float8"
    with pytest.raises(SerializationError, match="unknown dtype"):
        ModelMetadata.from_json(json.dumps(obj))
    obj = good()
    obj["functions"][0]["num_inputs"] = 5
    with pytest.raises(SerializationError, match="num_inputs"):
        ModelMetadata.from_json(json.dumps(obj))
    with pytest.raises(SerializationError, match="not valid JSON"):
        ModelMetadata.from_json("{")
    with pytest.raises(SerializationError, match="missing key"):
        FunctionInfo.from_json({}, "f")


@pytest.mark.parametrize("value", [None, [1], "1", 1.5, -1, 1 << 40, True])
def test_refuses_a_device_type_that_is_not_a_small_integer(value: object) -> None:
    # regression: None or a list reached int() (a TypeError, not an ember error)
    obj = good()
    obj["outputs"][0]["device_type"] = value
    with pytest.raises(SerializationError, match=r"outputs\[0\]\.device_type"):
        ModelMetadata.from_json(json.dumps(obj))


def test_refuses_a_shape_over_the_tensor_bound() -> None:
    obj = good()
    obj["inputs"][0]["shape"] = [1 << 40, 1 << 40]  # its int64 byte count would wrap
    with pytest.raises(SerializationError, match=r"inputs\[0\]\.shape.*1 TiB"):
        ModelMetadata.from_json(json.dumps(obj))
    obj = good()
    obj["inputs"][0]["tir_name"] = 3
    with pytest.raises(SerializationError, match="tir_name"):
        ModelMetadata.from_json(json.dumps(obj))


def test_refuses_repeated_names() -> None:
    # an AOT executor keyed its arrays by name: a repeated input left one never set
    obj = good()
    obj["params"] = [dict(obj["inputs"][0])]
    with pytest.raises(SerializationError, match=r"inputs and params: names must be unique.*'x'"):
        ModelMetadata.from_json(json.dumps(obj))
    obj = good()
    obj["outputs"] = obj["outputs"] * 2
    with pytest.raises(SerializationError, match="outputs: names must be unique"):
        ModelMetadata.from_json(json.dumps(obj))
