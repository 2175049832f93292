"""ember.build end to end: ONNX -> artifacts -> loading process -> graph executor."""

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.errors import EmberValueError, OpNotSupportedError
from ember.testing import assert_matches_onnxruntime, compile_onnx, run_artifacts

pytestmark = pytest.mark.cc


def _conv_relu_model(seed: int = 0):
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype("float32"), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype("float32"), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "c"], ["y"], name="residual"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 12, 12])],
        initializer=[w, b],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _x(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 12, 12)).astype("float32")


def test_conv_relu_residual_matches_onnxruntime():
    assert_matches_onnxruntime(_conv_relu_model(), {"x": _x()})


def test_build_is_deterministic_and_export_byte_identical(tmp_path):
    a = compile_onnx(_conv_relu_model())
    b = compile_onnx(_conv_relu_model())
    assert a == b and a.content_hash() == b.content_hash()
    p1 = ember.export_library(a, tmp_path / "a.so")
    p2 = ember.export_library(b, tmp_path / "b.so")
    assert p1.read_bytes() == p2.read_bytes()


def test_export_load_round_trip_in_fresh_process(tmp_path):
    arts = compile_onnx(_conv_relu_model())
    expected = run_artifacts(arts, {"x": _x()})[0]
    lib = ember.export_library(arts, tmp_path / "model.so")
    np.save(tmp_path / "x.npy", _x())
    script = f"""
import numpy as np, ember
dev = ember.cpu(0)
factory = ember.load_module({str(lib)!r})
ge = ember.GraphExecutor(factory["default"](dev))
ge.set_input("x", np.load({str(tmp_path / "x.npy")!r}))
ge.run()
np.save({str(tmp_path / "y.npy")!r}, ge.get_output(0).numpy())
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), expected)


def test_set_input_refuses_wrong_shape_and_dtype():
    from ember.executor import GraphExecutor

    dev = ember.cpu(0)
    factory = ember.load_artifacts(compile_onnx(_conv_relu_model()), dev)
    ge = GraphExecutor(factory["default"](dev))
    with pytest.raises(EmberValueError, match=r"\(1, 3, 12, 12\)"):
        ge.set_input("x", np.zeros((1, 3, 12, 11), "float32"))
    with pytest.raises(EmberValueError, match="float32"):
        ge.set_input("x", np.zeros((1, 3, 12, 12), "float64"))


def test_bad_executor_and_unlowerable_ops_are_reported():
    from ember.ir import Function, IRModule, OpDef, OpPattern, TensorType, Var, call
    from ember.ir.op import OPS, register_op

    with pytest.raises(EmberValueError, match="unknown executor"):
        compile_onnx(_conv_relu_model(), executor="vm")
    for name in ("test.nocompute_a", "test.nocompute_b"):
        register_op(OpDef(name, 1, lambda t, a: t[0], lambda x, a: x[0], OpPattern.OPAQUE))
    try:
        x = Var("x", TensorType((4,), "float32"))
        body = call("test.nocompute_b", call("test.nocompute_a", x, name="n1"), name="n2")
        mod = IRModule.from_expr(Function((x,), body))
        with pytest.raises(
            OpNotSupportedError, match="(?s)test.nocompute_a: nodes n1.*nocompute_b"
        ):
            ember.build(mod)
    finally:
        OPS.unregister("test.nocompute_a")
        OPS.unregister("test.nocompute_b")


def test_loaded_module_exports_same_bytes(tmp_path):
    arts = compile_onnx(_conv_relu_model())
    top = ember.load_artifacts(arts, ember.cpu(0))
    a = top.export_library(tmp_path / "from_module.so")
    b = ember.export_library(arts, tmp_path / "from_set.so")
    assert a.read_bytes() == b.read_bytes()
