"""The graph view's memory map: the graph executor's workspace as it places it."""

from __future__ import annotations

from ember.formats.graph_json import (
    SCRATCH_ATTR,
    GraphJSON,
    Node,
    NodeEntry,
    OpAttrs,
    dump_graph_json,
    load_graph_json,
)
from ember.formats.graph_memory import plan_graph_memory
from ember.tools.inspectors.graph_view import graph_memory_map


def _op(name: str, inputs: list[NodeEntry], scratch: int = 0) -> Node:
    extra = ((SCRATCH_ATTR, str(scratch)),) if scratch else ()
    return Node("tvm_op", name, tuple(inputs), OpAttrs("k", len(inputs), 1, 0, extra))


def _from_file(graph: GraphJSON) -> GraphJSON:
    return load_graph_json(dump_graph_json(graph))


def test_the_inspectors_memory_map_draws_the_executors_workspace() -> None:
    """``ember inspect --memory-svg`` of a graph build: the same offsets as the executor."""
    nodes = [
        Node("null", "x"),
        _op("a", [NodeEntry(0)], scratch=100),
        _op("b", [NodeEntry(1)]),
        _op("c", [NodeEntry(2)]),
    ]
    graph = _from_file(
        GraphJSON.create(nodes, [NodeEntry(3)], [[16]] * 4, ["float32"] * 4, [0, 1, 2, 3])
    )
    memory = plan_graph_memory(graph)
    mm = graph_memory_map(graph)
    assert mm.workspace_size_bytes == memory.workspace_size
    rows = {(r.entry, r.node): (r.offset, r.size, r.first_step, r.last_step) for r in mm.buffers}
    assert rows == {
        (1, "a"): (memory.entry_offsets[1], 64, 0, 1),
        (2, "b"): (memory.entry_offsets[2], 64, 1, 2),
        (1, "a scratch"): (memory.scratch[1][0], 100, 0, 0),
    }
