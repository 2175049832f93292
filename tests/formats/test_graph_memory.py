"""Graph memory: the graph executor's placement, computed from graph JSON alone.

Every graph here goes through ``dump_graph_json``/``load_graph_json`` first: the placement
must hold for any graph a file may hold, storage ids as TVM means them included.
"""

from __future__ import annotations

import random

from ember.formats.graph_json import (
    SCRATCH_ATTR,
    GraphJSON,
    Node,
    NodeEntry,
    OpAttrs,
    dump_graph_json,
    load_graph_json,
)
from ember.formats.graph_memory import (
    entry_nbytes,
    graph_buffers,
    kept_storages,
    kernel_steps,
    node_scratch,
    plan_graph_memory,
)
from ember.support import memory_plan


def _op(name: str, inputs: list[NodeEntry], outputs: int = 1, scratch: int = 0) -> Node:
    extra = ((SCRATCH_ATTR, str(scratch)),) if scratch else ()
    return Node("tvm_op", name, tuple(inputs), OpAttrs("k", len(inputs), outputs, 0, extra))


def _from_file(graph: GraphJSON) -> GraphJSON:
    return load_graph_json(dump_graph_json(graph))


def _live(graph: GraphJSON) -> dict[int, tuple[int, int]]:
    """Entry -> (first, last) step, outputs live to the end (for the checks only)."""
    steps = kernel_steps(graph)
    end = len(steps)
    span: dict[int, tuple[int, int]] = {}
    for nid, step in steps.items():
        for eid in range(graph.node_row_ptr[nid], graph.node_row_ptr[nid + 1]):
            span[eid] = (step, step)
    for nid, node in enumerate(graph.nodes):
        for e in node.inputs:
            eid = graph.entry_id(e)
            if eid in span:
                span[eid] = (span[eid][0], max(span[eid][1], steps[nid]))
    for eid in graph.output_entry_ids():
        if eid in span:
            span[eid] = (span[eid][0], end)
    return span


def check_placement(graph: GraphJSON) -> None:
    """Every entry and scratch inside its allocation and aligned; entries of one storage id
    live at a common step share their offset; nothing else live at a common step overlaps."""
    memory = plan_graph_memory(graph)
    size = memory.workspace_size
    kept = kept_storages(graph)
    span = _live(graph)
    placed: list[tuple[int, int, int, int, tuple[str, int]]] = []  # lo, hi, first, last, who
    for eid, sid in enumerate(graph.storage_id):
        nbytes = entry_nbytes(graph, eid)
        if sid in kept:
            assert eid not in memory.entry_offsets
            assert nbytes <= memory.storages[sid]
            continue
        offset = memory.entry_offsets[eid]
        assert offset % 64 == 0 and offset >= 0 and offset + nbytes <= size
        placed.append((offset, offset + max(nbytes, 1), *span[eid], ("sid", sid)))
    steps = kernel_steps(graph)
    for nid, (offset, nbytes) in memory.scratch.items():
        assert offset % 64 == 0 and offset + nbytes <= size
        placed.append((offset, offset + nbytes, steps[nid], steps[nid], ("scratch", nid)))
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            together = a[2] <= b[3] and b[2] <= a[3]
            if not together:
                continue
            if a[4] == b[4] and a[4][0] == "sid":
                assert a[0] == b[0], f"storage {a[4][1]} split while live"
            else:
                assert a[1] <= b[0] or b[1] <= a[0], f"{a[4]} and {b[4]} overlap while live"


def test_inputs_params_outputs_keep_their_storage_intermediates_share_one_workspace() -> None:
    nodes = [
        Node("null", "x"),
        Node("null", "w"),
        _op("add0", [NodeEntry(0), NodeEntry(1)]),
        _op("relu0", [NodeEntry(2)]),
        _op("relu1", [NodeEntry(3)]),
    ]
    graph = _from_file(
        GraphJSON.create(nodes, [NodeEntry(4)], [[2, 3]] * 5, ["float32"] * 5, [0, 1, 2, 3, 4])
    )
    memory = plan_graph_memory(graph)
    assert dict(memory.storages) == {0: 64, 1: 64, 4: 64}
    assert dict(memory.entry_offsets) == {2: 0, 3: 64}  # live together at relu0's step
    assert memory.workspace_size == 128 and not memory.scratch
    check_placement(graph)


def test_in_place_storage_sharing_is_one_offset() -> None:
    """Entry 3 (relu0's output) shares storage 2 with its input: written in place, so one
    offset, sized by the larger (TVM's meaning of a shared storage id)."""
    nodes = [
        Node("null", "x"),
        _op("k0", [NodeEntry(0)]),
        _op("relu0", [NodeEntry(1)]),
        _op("k2", [NodeEntry(2)]),
    ]
    graph = _from_file(
        GraphJSON.create(
            nodes, [NodeEntry(3)], [[4], [16], [8], [4]], ["float32"] * 4, [0, 1, 1, 3]
        )
    )
    memory = plan_graph_memory(graph)
    assert memory.entry_offsets[1] == memory.entry_offsets[2]
    assert memory.workspace_size == 64  # one group of max(64, 32) bytes
    check_placement(graph)


def test_a_storage_id_shared_with_an_input_keeps_every_entry_in_that_storage() -> None:
    """A hand-written graph reusing the input's storage for an intermediate: the entry lives
    in the input's storage (sized for the larger), not in the workspace."""
    nodes = [Node("null", "x"), _op("k0", [NodeEntry(0)]), _op("k1", [NodeEntry(1)])]
    graph = _from_file(
        GraphJSON.create(nodes, [NodeEntry(2)], [[4], [64], [4]], ["float32"] * 3, [0, 0, 2])
    )
    memory = plan_graph_memory(graph)
    assert not memory.entry_offsets and memory.storages[0] == 256
    check_placement(graph)


def test_scratch_lives_for_its_node_only() -> None:
    nodes = [
        Node("null", "x"),
        _op("a", [NodeEntry(0)], scratch=100),
        _op("b", [NodeEntry(1)], scratch=1000),
        _op("c", [NodeEntry(2)]),
    ]
    graph = _from_file(
        GraphJSON.create(nodes, [NodeEntry(3)], [[16]] * 4, ["float32"] * 4, [0, 1, 2, 3])
    )
    memory = plan_graph_memory(graph)
    assert node_scratch(graph) == {1: 100, 2: 1000}
    assert {nid: n for nid, (_, n) in memory.scratch.items()} == {1: 100, 2: 1000}
    # a's scratch (128 B aligned) and b's (1024) are never live together: the workspace is
    # the largest step, b's: entries 1 and 2 (64 B each) and b's scratch
    assert memory.workspace_size == 64 + 64 + 1024
    check_placement(graph)


def test_same_buffers_as_the_liveness_of_an_ember_graph() -> None:
    """Storage ids given one per entry: the planner sees exactly graph_buffers (plus
    scratch), the AOT build's input."""
    nodes = [Node("null", "x"), _op("a", [NodeEntry(0)], outputs=2), _op("b", [NodeEntry(1, 1)])]
    graph = _from_file(
        GraphJSON.create(
            nodes, [NodeEntry(1, 0), NodeEntry(2)], [[8], [8], [8], [8]], ["float32"] * 4
        )
    )
    assert [b.name for b in graph_buffers(graph)] == ["e2"]
    assert plan_graph_memory(graph).plan.offsets == {"e2": 0}


def _random_graph(rng: random.Random) -> GraphJSON:
    """A random valid graph: shared storage ids of every kind, sizes, scratch, outputs."""
    nodes = [Node("null", f"in{i}") for i in range(rng.randint(1, 3))]
    entries = [NodeEntry(i) for i in range(len(nodes))]
    for k in range(rng.randint(1, 12)):
        picks = rng.sample(entries, rng.randint(1, min(3, len(entries))))
        outputs = rng.randint(1, 2)
        scratch = rng.choice([0, 0, 1, 200, 5000])
        nodes.append(_op(f"n{k}", picks, outputs, scratch))
        entries += [NodeEntry(len(nodes) - 1, i) for i in range(outputs)]
    heads = rng.sample(entries[-4:], rng.randint(1, min(2, len(entries[-4:]))))
    n = len(entries)
    sids = [rng.randrange(max(1, n // 2)) for _ in range(n)]
    shapes = [[rng.choice([0, 1, 3, 16, 100])] for _ in range(n)]
    dtypes = [rng.choice(["float32", "int8", "float64"]) for _ in range(n)]
    return _from_file(GraphJSON.create(nodes, heads, shapes, dtypes, sids))


def test_random_graphs_from_files_stay_inside_and_never_overlap_live_entries() -> None:
    rng = random.Random(9)
    for _ in range(300):
        check_placement(_random_graph(rng))


def test_a_graph_with_millions_of_live_pairs_is_placed_in_linear_work() -> None:
    """3000 kernels whose outputs all feed the last node: 4.5M pairs live together, above
    MAX_CONFLICTS, so the buffers are laid end to end instead of listing the pairs."""
    count = 3000
    nodes = [Node("null", "x")]
    nodes += [_op(f"k{i}", [NodeEntry(0)]) for i in range(count)]
    nodes.append(_op("concat", [NodeEntry(i + 1) for i in range(count)]))
    n = count + 2
    graph = _from_file(GraphJSON.create(nodes, [NodeEntry(count + 1)], [[16]] * n, ["int8"] * n))
    memory = plan_graph_memory(graph)
    assert memory.plan.algorithm == "sequential"
    assert memory.workspace_size == count * 64 == memory.plan.lower_bound
    assert sorted(memory.entry_offsets.values()) == [64 * i for i in range(count)]
    assert memory_plan.count_conflicts(graph_buffers(graph)) > memory_plan.MAX_CONFLICTS
