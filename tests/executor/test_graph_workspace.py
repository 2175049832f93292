"""The graph executor's one workspace: the static planner's placement, computed at load.

On a real model the executor holds exactly the AOT build's workspace, every intermediate
and every kernel's scratch at the AOT build's offset; over hand-written graphs (storage ids
as a file may have them: in place, reused, shared with an input) entries sharing a storage
id share memory and the results are right.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from executor_kernels import op

import ember
from ember.errors import ExecutorError
from ember.examples.models import make_model
from ember.executor import GraphExecutor
from ember.formats.graph_json import SCRATCH_ATTR, GraphJSON, Node, NodeEntry, OpAttrs
from ember.formats.graph_json import dump_graph_json as dump
from ember.formats.graph_memory import kept_storages
from ember.runtime import PythonModule, cpu
from ember.runtime.module import Module
from ember.runtime.ndarray import NDArray

pytestmark = pytest.mark.cc

DEV = cpu(0)


def test_graph_executor_holds_the_aot_workspace_of_a_real_model() -> None:
    """resnet8's graph build: one workspace of the AOT plan's size, each intermediate and
    each node's scratch at the AOT plan's offset; storages only for inputs and outputs (the
    parameters live in the factory's arrays); the outputs are the AOT executor's bits."""
    case = make_model("resnet8")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    aot = ember.lower(mod, "c", params, executor="aot").aot
    assert aot is not None
    ge = ember.GraphExecutor(
        ember.load_artifacts(ember.build(mod, "c", params), DEV)["default"](DEV)
    )
    plan = ge.module.plan
    base = plan.workspace.data_ptr
    assert plan.workspace.nbytes == aot.memory.size == aot.memory.lower_bound
    placed = {int(name[1:]) for name in aot.memory.offsets if name.startswith("e")}
    assert set(plan.memory.entry_offsets) == placed
    for eid in placed:
        assert plan.entries[eid].data_ptr - base == aot.memory.offsets[f"e{eid}"]
    assert plan.scratch, "resnet8 no longer has kernels with scratch: pick another model"
    for nid, scratch in plan.scratch.items():
        assert scratch.data_ptr - base == aot.memory.offsets[f"s{nid}"]
    assert set(plan.storage) <= kept_storages(ge.module.graph)
    ge.run(**case.inputs)
    factory = ember.load_artifacts(ember.build(mod, "c", params, executor="aot"), DEV)
    ax = ember.AotExecutor(factory["default"](DEV))
    ax.run(**case.inputs)
    for i in range(ge.get_num_outputs()):
        assert ge.get_output(i).numpy().tobytes() == ax.get_output(i).numpy().tobytes()


def _chain(storage: list[int]) -> GraphJSON:
    """out = relu(relu(relu(x))) + x over float32[8], with the given storage ids."""
    nodes = [
        Node("null", "x"),
        op("relu0", "k_relu", [NodeEntry(0)]),
        op("relu1", "k_relu", [NodeEntry(1)]),
        op("relu2", "k_relu", [NodeEntry(2)]),
        op("add0", "k_add", [NodeEntry(3), NodeEntry(0)]),
    ]
    return GraphJSON.create(nodes, [NodeEntry(4)], [[8]] * 5, ["float32"] * 5, storage)


X = np.linspace(-2, 2, 8, dtype=np.float32)
WANT = np.maximum(X, 0) + X


@pytest.mark.parametrize(
    "storage",
    [
        [0, 1, 2, 3, 4],  # every entry its own
        [0, 1, 1, 1, 4],  # relu1 and relu2 in place (TVM's meaning: one memory)
        [0, 1, 2, 1, 4],  # storage 1 reused once relu0's output is dead
        [0, 0, 0, 0, 4],  # every relu in the input's storage (hand-written in-place)
    ],
)
def test_storage_ids_from_a_file_share_memory_and_compute_right(
    kernel_lib: Module, storage: list[int]
) -> None:
    g = GraphExecutor(dump(_chain(storage)), kernel_lib, DEV)
    plan = g.module.plan
    for a in range(5):
        for b in range(a + 1, 5):
            live_together = b == a + 1 or (a == 0 and b == 4)
            if storage[a] == storage[b] and live_together:
                assert plan.entries[a].data_ptr == plan.entries[b].data_ptr
    g.run(x=X)
    # in the input's storage, the relus overwrite x before add0 reads it: relu(x) twice
    want = 2 * np.maximum(X, 0) if storage[1] == 0 else WANT
    np.testing.assert_array_equal(g.get_output(0).numpy(), want)
    np.testing.assert_array_equal(g.debug_get_output("relu0").numpy(), np.maximum(X, 0))
    if storage[1] == 0:
        assert not plan.memory.entry_offsets  # all in the input's storage
        with pytest.raises(ExecutorError, match="shares storage"):
            g.set_input_zero_copy("x", ember.nd.array(X))


def test_each_node_gets_its_own_scratch_bytes_of_the_workspace() -> None:
    """A node's scratch is exactly its ``scratch_bytes``, inside the workspace, clear of the
    entries live at its step (a Python kernel sees the same NDArray as a C one's pointer)."""
    seen: dict[str, tuple[int, int]] = {}

    def kernel(name: str) -> Any:
        def run(x: NDArray, y: NDArray, scratch: NDArray) -> None:
            seen[name] = (scratch.data_ptr, scratch.nbytes)
            scratch.copyfrom(np.full(scratch.nbytes, 0xFF, np.uint8))  # hurts nobody
            y.copyfrom(x.numpy() + 1)

        return run

    def node(name: str, src: int, nbytes: int) -> Node:
        attrs = OpAttrs(name, 1, 1, 0, ((SCRATCH_ATTR, str(nbytes)),))
        return Node("tvm_op", name, (NodeEntry(src),), attrs)

    nodes = [Node("null", "x"), node("a", 0, 100), node("b", 1, 3000), node("c", 2, 10)]
    graph = GraphJSON.create(nodes, [NodeEntry(3)], [[16]] * 4, ["float32"] * 4)
    lib = PythonModule({n: kernel(n) for n in "abc"})
    g = GraphExecutor(dump(graph), lib, DEV)
    g.run(x=np.zeros(16, np.float32))
    np.testing.assert_array_equal(g.get_output(0).numpy(), np.full(16, 3, np.float32))
    plan = g.module.plan
    base, end = plan.workspace.data_ptr, plan.workspace.data_ptr + plan.workspace.nbytes
    assert {k: v[1] for k, v in seen.items()} == {"a": 100, "b": 3000, "c": 10}
    for ptr, nbytes in seen.values():
        assert base <= ptr and ptr + nbytes <= end and (ptr - base) % 64 == 0
    entry1, (b_scratch, b_bytes) = plan.entries[1].data_ptr, seen["b"]
    assert b_scratch + b_bytes <= entry1 or entry1 + 64 <= b_scratch  # b reads entry 1
