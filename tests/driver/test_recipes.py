"""The two recipes of docs/architecture.md, done from a test file with public calls only:
adding a back end (a target kind with options, keys, a schedule and a tir_to_runtime
hook) and adding an op (IR definition, compute, ONNX handler)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import ember
from ember import tir
from ember.frontend.onnx.registry import HANDLERS, onnx_op
from ember.ir import Attr, OpDef, OpPattern, call
from ember.ir.op import OPS, register_op
from ember.ops import ScheduleContext, find_schedule, register_compute, register_schedule
from ember.ops.registry import COMPUTES, SCHEDULES
from ember.runtime.registry import remove_global_func
from ember.target import Target, TargetKind, TargetOption, register_target_kind
from ember.target.kind import TARGET_KINDS
from ember.testing import run_artifacts, run_onnxruntime
from ember.tir import te

pytestmark = pytest.mark.cc

BUILDS: list[str] = []
SCHEDULED: list[str] = []


def _toy_build(funcs, target):
    """tir_to_runtime of the toy back end: C at the optimisation level its option asks for."""
    BUILDS.append(str(target))
    c_target = Target.create(f"c -opt-level={target['level']}")
    return ember.get_global_func("target.build.c")(funcs, c_target)


def _toy_sum_schedule(ctx: ScheduleContext) -> None:
    """The toy's schedule for sum: records itself, then does what the CPU schedule does."""
    SCHEDULED.append("sum")
    cpu = find_schedule("sum", Target.create("c"))
    assert cpu is not None
    cpu(ctx)


@pytest.fixture()
def toy_backend():
    ember.register_func("target.build.toy", _toy_build)
    register_target_kind(
        TargetKind(
            "toy",
            options={"level": TargetOption(int, 1, "C optimisation level", None)},
            hooks={"tir_to_runtime": "target.build.toy"},
            keys=("toy",),
        )
    )
    register_schedule("sum", key="toy")(_toy_sum_schedule)
    BUILDS.clear()
    SCHEDULED.clear()
    yield "toy -level=2"
    SCHEDULES.unregister("toy/sum")
    TARGET_KINDS.unregister("toy")
    remove_global_func("target.build.toy")


def _reduce_model():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("ReduceSum", ["r", "axes"], ["y"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "toy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        initializer=[helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_recipe_adding_a_back_end(toy_backend):
    target = Target.create(toy_backend)
    assert target.keys[0] == "toy" and target["level"] == 2
    model = _reduce_model()
    mod, params = ember.frontend.from_onnx(model)
    arts = ember.build(mod, target=target, params=params)
    assert BUILDS == ["toy -level=2"] and SCHEDULED == ["sum"]
    assert all("-O2" in a.metadata["cflags"] for a in arts if a.file_name.endswith(".c"))
    x = np.random.default_rng(0).standard_normal((4, 32)).astype("float32")
    want = run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(run_artifacts(arts, {"x": x})[0], want, rtol=1e-5, atol=1e-6)


def _squareplus_type(types, attrs):
    return types[0]


def _squareplus_ref(inputs, attrs):
    x = inputs[0]
    return ((x + np.sqrt(x * x + attrs["b"])) / 2).astype(x.dtype)


def _squareplus_compute(inputs, attrs, out_type):
    x = inputs[0]
    b = tir.const(attrs["b"], x.dtype)
    two = tir.const(2.0, x.dtype)
    return te.compute(x.shape, lambda *i: (x[i] + tir.sqrt(x[i] * x[i] + b)) / two, "sqp")


@pytest.fixture()
def squareplus_op():
    register_op(
        OpDef(
            "toy.squareplus",
            1,
            _squareplus_type,
            _squareplus_ref,
            OpPattern.ELEMWISE,
            {"b": Attr("float", 4.0)},
        )
    )
    register_compute("toy.squareplus")(_squareplus_compute)
    onnx_op("SquarePlus", since=1, domain="toy.ops")(
        lambda ctx, node: call("toy.squareplus", node.inputs[0], b=node.attrs.get("b", 4.0))
    )
    yield
    HANDLERS.unregister("toy.ops::SquarePlus")
    COMPUTES.unregister("toy.squareplus")
    OPS.unregister("toy.squareplus")


def test_recipe_adding_an_op(squareplus_op):
    nodes = [
        helper.make_node("SquarePlus", ["x"], ["s"], domain="toy.ops", b=1.0),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "squareplus",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 40])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 40])],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("toy.ops", 1)],
    )
    mod, params = ember.frontend.from_onnx(model)
    lowered = ember.lower(mod, "c", params)
    assert "toy.squareplus" in lowered.as_text()
    x = np.random.default_rng(1).standard_normal((3, 40)).astype("float32")
    want = np.maximum((x + np.sqrt(x * x + 1.0)) / 2, 0)
    np.testing.assert_allclose(run_artifacts(lowered.compile(), {"x": x})[0], want, rtol=1e-5)
