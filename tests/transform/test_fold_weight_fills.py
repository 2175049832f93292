"""fold_weight_fills: constant fills that are weights become constants (so convolutions pack
them), other fills stay, the budget holds; filled ONNX weights compile to packed kernels
that agree with onnxruntime."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.frontend import from_onnx
from ember.ir import Call, Constant, Function, IRModule, TensorType, Var, call, const, post_order
from ember.lowering.legalize import legalize
from ember.testing import assert_matches_onnxruntime, build_model
from ember.transform import fold_weight_fills, optimize


def _calls(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def _fill(shape: tuple[int, ...], value: float = 0.02) -> Call:
    return call("broadcast_to", const(np.float32(value)), shape=shape)


def _module() -> IRModule:
    """A conv with a filled weight (through a reshape), a dense with a filled weight, and a
    fill added to the data (not a weight)."""
    x = Var("x", TensorType((1, 4, 8, 8), "float32"))
    w = call("reshape", _fill((8, 36)), newshape=(8, 4, 3, 3))
    y = call("nn.conv", x, w, padding=[1, 1, 1, 1])
    y = call("add", y, _fill((1, 8, 8, 8), 0.5))
    flat = call("reshape", y, newshape=(1, 512))
    return IRModule.from_expr(Function((x,), call("nn.dense", flat, _fill((10, 512), -0.01))))


def test_weight_fills_become_constants_and_others_stay(same_results) -> None:
    mod = _module()
    out = fold_weight_fills(mod)
    assert _calls(out).count("broadcast_to") == 1  # the fill added to the data
    same_results(mod, out)
    optimized = optimize(mod)
    conv = next(
        n for n in post_order(optimized.main.body) if getattr(n, "op_name", "") == "nn.conv"
    )
    assert isinstance(conv.args[1], Constant)  # the reshape folded too
    legal = _calls(legalize(optimized))
    assert "nn.conv_packed" in legal and "nn.matmul" in legal  # packed / transposed weights


def test_the_budget_leaves_fills_beyond_it_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    module = sys.modules["ember.transform.fold_weight_fills"]
    monkeypatch.setattr(module, "MAX_FILL_ELEMENTS", 8 * 36)  # room for the conv weight only
    assert _calls(fold_weight_fills(_module())).count("broadcast_to") == 2
    monkeypatch.setattr(module, "MAX_FILL_ELEMENTS", 0)
    assert _calls(fold_weight_fills(_module())).count("broadcast_to") == 3


@pytest.mark.cc
def test_constant_of_shape_and_expand_weights_match_onnxruntime() -> None:
    """Large fills (imported as broadcasts) as Conv and MatMul weights, compiled."""
    shape = numpy_helper.from_array(np.array([64, 32, 3, 3], np.int64), "wshape")
    fill = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.01])
    scalar = numpy_helper.from_array(np.array([[0.003]], np.float32), "s")
    mshape = numpy_helper.from_array(np.array([64 * 16 * 16, 10], np.int64), "mshape")
    flat = numpy_helper.from_array(np.array([1, 64 * 16 * 16], np.int64), "flat")
    nodes = [
        helper.make_node("ConstantOfShape", ["wshape"], ["w"], value=fill),
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "flat"], ["f"]),
        helper.make_node("Expand", ["s", "mshape"], ["m"]),
        helper.make_node("MatMul", ["f", "m"], ["y"]),
    ]
    inits = {t.name: numpy_helper.to_array(t) for t in (shape, scalar, mshape, flat)}
    model = build_model(nodes, {"x": ("float32", (1, 32, 16, 16))}, ["y"], inits, opset=13)
    mod, params = from_onnx(model)
    assert "broadcast_to" in _calls(mod)  # large enough to stay a fill in the importer
    optimized = optimize(mod, params)
    assert "broadcast_to" not in _calls(optimized)
    assert "nn.conv_packed" in _calls(legalize(optimized))
    x = np.random.default_rng(0).standard_normal((1, 32, 16, 16)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5)
