"""Graph JSON: round trips, determinism and every refusal of the validating reader."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from ember.errors import SerializationError
from ember.formats.graph_json import (
    GraphJSON,
    Node,
    NodeEntry,
    OpAttrs,
    dump_graph_json,
    load_graph_json,
)


def three_node_graph() -> GraphJSON:
    """x -> relu -> add(., y) with storage reuse between the relu output and the add output."""
    nodes = [
        Node("null", "x"),
        Node("null", "y"),
        Node("tvm_op", "relu0", (NodeEntry(0),), OpAttrs("relu", 1, 1)),
        Node("tvm_op", "add0", (NodeEntry(2), NodeEntry(1)), OpAttrs("add", 2, 1)),
    ]
    return GraphJSON.create(
        nodes,
        heads=[NodeEntry(3)],
        shape=[[2, 3]] * 4,
        dltype=["float32"] * 4,
        storage_id=[0, 1, 2, 3],
    )


def obj() -> dict[str, Any]:
    return json.loads(three_node_graph().to_json())


def test_round_trip_and_tvm_layout() -> None:
    g = three_node_graph()
    text = dump_graph_json(g)
    o = json.loads(text)
    assert o["arg_nodes"] == [0, 1]
    assert o["node_row_ptr"] == [0, 1, 2, 3, 4]
    assert o["heads"] == [[3, 0, 0]]
    assert o["attrs"]["shape"][0] == "list_shape"
    assert o["attrs"]["storage_id"] == ["list_int", [0, 1, 2, 3]]
    assert o["attrs"]["dltype"] == ["list_str", ["float32"] * 4]
    assert o["nodes"][3]["attrs"] == {
        "func_name": "add",
        "num_inputs": "2",
        "num_outputs": "1",
        "flatten_data": "0",
    }
    back = load_graph_json(text)
    assert back == g
    assert back.to_json() == text
    assert GraphJSON.from_json(text.encode()) == g


def test_writer_is_deterministic() -> None:
    assert three_node_graph().to_json() == three_node_graph().to_json()
    text = three_node_graph().to_json()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


def test_helpers() -> None:
    g = three_node_graph()
    assert g.num_entries == 4
    assert g.input_names() == ["x", "y"]
    assert g.output_entry_ids() == [3]
    assert g.entry_id(NodeEntry(2, 0)) == 2


def test_multi_output_and_extra_attrs_round_trip() -> None:
    nodes = [
        Node("null", "x"),
        Node("tvm_op", "split0", (NodeEntry(0),), OpAttrs("split", 1, 2, 0, (("hash", "ab"),))),
    ]
    g = GraphJSON.create(
        nodes,
        heads=[NodeEntry(1, 1), NodeEntry(1, 0)],
        shape=[[4], [2], [2]],
        dltype=["int8", "int8", "int8"],
        device_index=[1, 1, 1],
    )
    assert g.node_row_ptr == (0, 1, 3)
    assert g.output_entry_ids() == [2, 1]
    back = load_graph_json(g.to_json())
    assert back == g
    assert back.nodes[1].attrs is not None and back.nodes[1].attrs.extra == (("hash", "ab"),)


def test_accepts_integer_attrs_and_two_element_entries() -> None:
    o = obj()
    o["nodes"][2]["attrs"]["num_inputs"] = 1
    o["nodes"][2]["inputs"] = [[0, 0]]
    g = load_graph_json(json.dumps(o))
    assert g.nodes[2].inputs == (NodeEntry(0, 0, 0),)


def mutate(fn: Any) -> str:
    o = copy.deepcopy(obj())
    fn(o)
    return json.dumps(o)


def _set(path: list[Any], value: Any) -> Any:
    def fn(o: dict[str, Any]) -> None:
        target = o
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return fn


REFUSALS = {
    "not json": ("{nodes", "not valid JSON"),
    "nan": ('{"nodes": NaN}', "not valid JSON"),
    "top-level list": ("[]", "expected an object"),
    "missing heads": (mutate(lambda o: o.pop("heads")), "missing key"),
    "unknown key": (mutate(_set(["extra"], 1)), "unknown key"),
    "unknown op": (mutate(_set(["nodes", 2, "op"], "conv")), "op 'conv' is unknown"),
    "forward ref": (mutate(_set(["nodes", 2, "inputs"], [[3, 0, 0]])), "not before it"),
    "self ref": (mutate(_set(["nodes", 2, "inputs"], [[2, 0, 0]])), "not before it"),
    "bad output index": (mutate(_set(["nodes", 2, "inputs"], [[0, 1, 0]])), "does not exist"),
    "negative index": (mutate(_set(["nodes", 2, "inputs"], [[-1, 0, 0]])), "out of range"),
    "bool as int": (mutate(_set(["nodes", 2, "inputs"], [[True, 0, 0]])), "expected an integer"),
    "num_inputs mismatch": (
        mutate(_set(["nodes", 3, "attrs", "num_inputs"], "3")),
        "num_inputs is 3",
    ),
    "no func_name": (mutate(_set(["nodes", 3, "attrs", "func_name"], "")), "no func_name"),
    "null with inputs": (mutate(_set(["nodes", 0, "inputs"], [[1, 0, 0]])), "not before it"),
    "empty name": (mutate(_set(["nodes", 0, "name"], "")), "non-empty string"),
    "duplicate input name": (mutate(_set(["nodes", 1, "name"], "x")), "unique"),
    "arg_nodes wrong": (mutate(_set(["arg_nodes"], [0])), "null nodes are"),
    "arg_nodes out of range": (mutate(_set(["arg_nodes"], [0, 9])), "out of range"),
    "row ptr": (mutate(_set(["node_row_ptr"], [0, 1, 2, 3, 5])), "node_row_ptr"),
    "head out of range": (mutate(_set(["heads"], [[7, 0, 0]])), "not before it"),
    "no heads": (mutate(_set(["heads"], [])), "at least one output"),
    "no nodes": (
        '{"nodes": [], "arg_nodes": [], "heads": [], "node_row_ptr": [0], "attrs": {}}',
        "at least one node",
    ),
    "short shape list": (
        mutate(_set(["attrs", "shape"], ["list_shape", [[2, 3]] * 3])),
        "has 3 items",
    ),
    "wrong tag": (mutate(_set(["attrs", "dltype"], ["list_int", ["float32"] * 4])), "list_str"),
    "negative dim": (
        mutate(_set(["attrs", "shape"], ["list_shape", [[2, -3]] + [[2, 3]] * 3])),
        "out of range",
    ),
    "huge tensor": (
        mutate(_set(["attrs", "shape"], ["list_shape", [[1 << 30, 1 << 30]] + [[2, 3]] * 3])),
        "bound is 1 TiB",
    ),
    "too many dims": (
        mutate(_set(["attrs", "shape"], ["list_shape", [[1] * 33] + [[2, 3]] * 3])),
        "at most 32",
    ),
    "unknown dtype": (
        mutate(_set(["attrs", "dltype"], ["list_str", ["float8"] + ["float32"] * 3])),
        "unknown dtype 'float8'",
    ),
    "storage out of range": (
        mutate(_set(["attrs", "storage_id"], ["list_int", [0, 1, 2, 99]])),
        "out of range",
    ),
    "unknown attrs key": (mutate(_set(["attrs", "layout"], ["list_str", []])), "unknown key"),
    "non-string extra attr": (mutate(_set(["nodes", 3, "attrs", "hash"], 5)), "must be a string"),
    "scratch not a number": (
        mutate(_set(["nodes", 3, "attrs", "scratch_bytes"], "lots")),
        "scratch_bytes: expected an integer",
    ),
    "negative scratch": (
        mutate(_set(["nodes", 3, "attrs", "scratch_bytes"], "-64")),
        "scratch_bytes: -64 is out of range",
    ),
    "huge scratch": (
        mutate(_set(["nodes", 3, "attrs", "scratch_bytes"], str(1 << 50))),
        "out of range",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusals(case: str) -> None:
    text, message = REFUSALS[case]
    with pytest.raises(SerializationError, match=message):
        load_graph_json(text)


def test_refuses_oversized_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import ember.formats.graph_json as gj

    monkeypatch.setattr(gj, "MAX_GRAPH_JSON_BYTES", 100)
    with pytest.raises(SerializationError, match="at most 100"):
        load_graph_json(three_node_graph().to_json())


def test_refuses_deep_nesting() -> None:
    with pytest.raises(SerializationError):
        load_graph_json("[" * 100000 + "]" * 100000)


def test_create_validates() -> None:
    nodes = [Node("null", "x"), Node("tvm_op", "f", (NodeEntry(1),), OpAttrs("f", 1))]
    with pytest.raises(SerializationError, match="not before it"):
        GraphJSON.create(nodes, [NodeEntry(1)], [[1], [1]], ["float32"] * 2)
