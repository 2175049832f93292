"""Graph builds plan kernel scratch: one shared buffer of the executor, no heap block per call."""

from typing import Any

import numpy as np
import pytest

import ember
import ember.driver.pipeline as pipeline
from ember.examples.models import make_model
from ember.formats.graph_json import SCRATCH_ATTR
from ember.formats.graph_memory import plan_graph_memory, scratch_size
from ember.formats.metadata import ModelMetadata, graph_metadata
from ember.lowering.aot import HELPER_ATTR
from ember.lowering.aot_scratch import SCRATCH_PARAM
from ember.tir.functor import IRVisitor
from ember.tir.stmt import Allocate, For, ForKind, StorageKind

pytestmark = pytest.mark.cc

DEV = ember.cpu(0)


class _TopLevelHeap(IRVisitor):
    """Heap allocations outside parallel loops (what a call would allocate per run)."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.parallel = 0

    def visit_For(self, op: For) -> None:  # noqa: N802 - the visitor's dispatch name
        self.parallel += op.kind is ForKind.PARALLEL
        self.generic_visit(op)
        self.parallel -= op.kind is ForKind.PARALLEL

    def visit_Allocate(self, op: Allocate) -> None:  # noqa: N802
        if op.storage is StorageKind.HEAP and not self.parallel:
            self.found.append(op.buffer.name)
        self.generic_visit(op)


@pytest.fixture(scope="module")
def resnet8() -> tuple[Any, Any, Any]:
    case = make_model("resnet8")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    return case, mod, params


def _executor(arts: Any, aot: bool = False) -> Any:
    factory = ember.load_artifacts(arts, DEV)["default"](DEV)
    return ember.AotExecutor(factory) if aot else ember.GraphExecutor(factory)


def _outputs(ex: Any, inputs: dict[str, np.ndarray]) -> list[bytes]:
    ex.set_input(**inputs)
    ex.run()
    return [ex.get_output(i).numpy().tobytes() for i in range(ex.get_num_outputs())]


def test_graph_build_kernels_allocate_nothing_per_call(resnet8: Any) -> None:
    _, mod, params = resnet8
    lowered = ember.lower(mod, "c", params)
    with_scratch = {
        n.attrs.func_name: int(dict(n.attrs.extra)[SCRATCH_ATTR])
        for n in lowered.plan.graph.nodes
        if n.attrs is not None and SCRATCH_ATTR in dict(n.attrs.extra)
    }
    assert with_scratch, "resnet8 no longer has kernels with scratch: pick another model"
    for func in lowered.prim_funcs:
        if func.attrs.get(HELPER_ATTR):
            continue
        heap = _TopLevelHeap()
        heap.visit(func.body)
        assert not heap.found, f"{func.name} allocates {heap.found} per call"
        takes = func.params[-1].name == SCRATCH_PARAM
        assert takes == (func.name in with_scratch), func.name
    # the workspace of the graph build is the AOT build's: intermediates and every node's
    # scratch at the static planner's offsets
    md = graph_metadata(lowered.plan.graph, lowered.plan.params)
    aot = ember.lower(mod, "c", params, executor="aot").aot
    assert aot is not None
    assert md.functions[0].workspace_size_bytes == aot.memory.size
    no_scratch = graph_metadata(pipeline.plan_graph(lowered.ir).graph, lowered.plan.params)
    assert no_scratch.functions[0].workspace_size_bytes < aot.memory.size


def test_graph_build_with_planned_scratch_gives_the_same_bits(
    resnet8: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The planned build, the per-call heap build before it and the AOT build agree bitwise;
    each node with scratch gets its own bytes of the executor's one workspace."""
    case, mod, params = resnet8
    arts = ember.build(mod, "c", params)
    aot = ember.build(mod, "c", params, executor="aot")
    with monkeypatch.context() as m:
        m.setattr(pipeline, "plan_graph_scratch", lambda g, funcs, a: (g, tuple(funcs)))
        heap = ember.build(mod, "c", params)
    ge = _executor(arts)
    got = _outputs(ge, case.inputs)
    assert got == _outputs(_executor(heap), case.inputs)
    assert got == _outputs(_executor(aot, aot=True), case.inputs)
    plan = ge.module.plan
    nodes = [
        nid
        for nid, n in enumerate(plan.graph.nodes)
        if n.attrs and SCRATCH_ATTR in dict(n.attrs.extra)
    ]
    assert sorted(plan.scratch) == nodes and len(nodes) > 1
    memory = plan_graph_memory(plan.graph)
    base, end = plan.workspace.data_ptr, plan.workspace.data_ptr + plan.workspace.nbytes
    for call in plan.calls:
        if call.node_id in plan.scratch:
            scratch = plan.scratch[call.node_id]
            assert any(k is scratch for k in call.keepalive)
            assert scratch.nbytes == int(
                dict(plan.graph.nodes[call.node_id].attrs.extra)[SCRATCH_ATTR]
            )
            assert scratch.data_ptr == base + memory.scratch[call.node_id][0]
            assert base <= scratch.data_ptr and scratch.data_ptr + scratch.nbytes <= end
    assert max(s.nbytes for s in plan.scratch.values()) == scratch_size(plan.graph)


def test_planned_scratch_through_debug_profile_zero_copy_and_shared_params(resnet8: Any) -> None:
    case, mod, params = resnet8
    arts = ember.build(mod, "c", params)
    want = _outputs(_executor(arts), case.inputs)
    factory = ember.load_artifacts(arts, DEV)["default"](DEV)
    dbg = ember.GraphExecutor(factory, debug=True)
    dbg.set_input(**case.inputs)
    out_node = dbg.module.graph.heads[0].node_id
    assert dbg.debug_get_output(out_node).numpy().tobytes() == want[0]
    assert len(dbg.profile(2, clock="thread").rows) > 0
    dbg.run()
    assert dbg.get_output(0).numpy().tobytes() == want[0]
    ge = _executor(arts)
    ge.module.share_params({k: np.asarray(v) for k, v in params.items()})
    (name, value), *_ = case.inputs.items()
    ge.set_input_zero_copy(name, ember.nd.array(np.ascontiguousarray(value)))
    ge.set_input(**{k: v for k, v in case.inputs.items() if k != name})
    ge.run()
    assert ge.get_output(0).numpy().tobytes() == want[0]


def test_graph_build_with_scratch_is_deterministic(resnet8: Any) -> None:
    _, mod, params = resnet8
    files = [{a.file_name: a.content for a in ember.build(mod, "c", params)} for _ in range(2)]
    assert files[0] == files[1]
    md = ModelMetadata.from_json(files[0]["metadata.json"])
    assert md.functions[0].workspace_size_bytes > 0


def test_llvm_graph_build_plans_scratch_with_the_same_bits(
    resnet8: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The LLVM back end places the planned scratch too (its static pool from the parameter)."""
    pytest.importorskip("llvmlite")
    case, mod, params = resnet8
    arts = ember.build(mod, "llvm", params)
    with monkeypatch.context() as m:
        m.setattr(pipeline, "plan_graph_scratch", lambda g, funcs, a: (g, tuple(funcs)))
        heap = ember.build(mod, "llvm", params)
    ge = _executor(arts)
    assert scratch_size(ge.module.graph) > 0
    assert _outputs(ge, case.inputs) == _outputs(_executor(heap), case.inputs)
