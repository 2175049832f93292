"""fuse_qdq: QDQ chains become int32 kernels with onnxruntime's requantization.

Each model is a hand-built QDQ graph (the form onnxruntime's quantizer writes); after the
pass no ``dequantize`` feeds the linear op, the accumulator is int32, and ember's result
(reference evaluator and compiled) equals onnxruntime's (all graph optimizations on, so
its QDQ transformer runs QLinearConv/QLinearMatMul/QGemm/QLinearAdd) element for element.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.testing import build_model, run_onnx_compiled, run_onnx_reference, run_onnxruntime
from ember.transform import PassContext, optimize

RNG = np.random.default_rng(0)


def _ops(mod) -> list[tuple[str, str]]:
    return [
        (n.op.name, n.tensor_type.dtype)
        for n in post_order(mod.main.body)
        if isinstance(n, Call) and hasattr(n.op, "name")
    ]


def _dq(name: str, out: str) -> list:
    return [helper.make_node("DequantizeLinear", [name, f"{name}_s", f"{name}_z"], [out])]


def _qparams(name: str, scale, zp) -> dict[str, np.ndarray]:
    return {f"{name}_s": np.asarray(scale, np.float32), f"{name}_z": np.asarray(zp)}


def _conv_model(relu: bool, bias: bool, rank: int = 2, groups: int = 1):
    cin = 4 if groups == 1 else 16 * groups
    w = RNG.integers(-64, 64, (8, cin // groups) + (3,) * rank).astype(np.int8)
    inits = {"w": w, **_qparams("w", RNG.uniform(1e-3, 1e-2, 8), np.zeros(8, np.int8))}
    inits |= _qparams("x", 0.05, np.uint8(120)) | _qparams("y", 0.2, np.uint8(3))
    nodes = [helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"])]
    nodes += _dq("x", "xd") + _dq("w", "wd")
    nodes[-1].attribute.append(helper.make_attribute("axis", 0))
    conv_in = ["xd", "wd"]
    if bias:
        inits["b"] = RNG.integers(-500, 500, 8).astype(np.int32)
        inits |= {"b_s": np.asarray(0.05 * inits["w_s"], np.float32), "b_z": np.zeros(8, np.int32)}
        nodes += _dq("b", "bd")
        nodes[-1].attribute.append(helper.make_attribute("axis", 0))
        conv_in.append("bd")
    nodes.append(helper.make_node("Conv", conv_in, ["c"], pads=[1] * 2 * rank, group=groups))
    last = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        last = "r"
    nodes.append(helper.make_node("QuantizeLinear", [last, "y_s", "y_z"], ["y"]))
    nodes += _dq("y", "out")
    shape = (1, cin) + (9,) * rank
    feeds = {"xf": RNG.standard_normal(shape).astype(np.float32) * 3}
    return build_model(nodes, {"xf": ("float32", shape)}, ["out"], inits, opset=17), feeds


def _ctx(int8: bool) -> PassContext:
    """A pass context with the whole-layer int8 kernels on or off."""
    return PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": int8})


@pytest.mark.parametrize("int8", [False, True])
@pytest.mark.parametrize("relu,bias", [(False, False), (True, True), (False, True)])
def test_conv_chain_becomes_int32_and_matches_onnxruntime(
    relu: bool, bias: bool, int8: bool
) -> None:
    model, feeds = _conv_model(relu, bias)
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params, ctx=_ctx(int8)))
    kernel = ("quantized_conv_int8", "uint8") if int8 else ("quantized_conv_packed", "int32")
    assert kernel in ops and ("nn.conv", "float32") not in ops
    want = run_onnxruntime(model, feeds)[0]
    np.testing.assert_array_equal(run_onnx_reference(model, feeds)[0], want)
    got = run_onnx_compiled(model, feeds, pass_context=_ctx(int8))[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("relu,bias", [(False, False), (True, True)])
def test_conv1d_runs_as_the_2d_int8_kernel(relu: bool, bias: bool) -> None:
    """A 1-D convolution (wav2vec2's feature encoder) is the 2-D int8 kernel on a height of
    1 (it took the int32 path: 14 ms against 1-6 a layer)."""
    model, feeds = _conv_model(relu, bias, rank=1)
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params, ctx=_ctx(True)))
    assert ("quantized_conv_int8", "uint8") in ops and ("nn.conv", "int32") not in ops, ops
    got = run_onnx_compiled(model, feeds, pass_context=_ctx(True))[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])


def test_grouped_conv_runs_one_int8_kernel_a_group() -> None:
    """Groups of 16 or more input channels (ShuffleNet's 1x1 layers of 4 groups): one int8
    kernel a group on its channels, outputs concatenated (the int32 path was 5.8x slower
    on ShuffleNet)."""
    model, feeds = _conv_model(True, True, groups=4)
    mod, params = from_onnx(model)
    ops = [op for op, _ in _ops(optimize(mod, params, ctx=_ctx(True)))]
    assert ops.count("quantized_conv_int8") == 4 and "nn.conv" not in ops, ops
    got = run_onnx_compiled(model, feeds, pass_context=_ctx(True))[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])


def test_matmul_and_residual_add_match_onnxruntime() -> None:
    """DQ -> MatMul (per-column weight scales) -> Q, then QLinearAdd of two quantized tensors
    (ember computes it in onnxruntime's float order, so even ties agree)."""
    w = RNG.integers(-64, 64, (16, 12)).astype(np.int8)
    inits = {"w": w, **_qparams("w", RNG.uniform(1e-3, 1e-2, 12), np.zeros(12, np.int8))}
    inits |= _qparams("x", 0.03, np.uint8(128)) | _qparams("m", 0.07, np.uint8(100))
    inits |= _qparams("s", 0.1, np.uint8(90))
    nodes = [helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"])]
    nodes += _dq("x", "xd") + _dq("w", "wd")
    nodes[-1].attribute.append(helper.make_attribute("axis", 1))
    nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["mm"]))
    nodes.append(helper.make_node("QuantizeLinear", ["mm", "m_s", "m_z"], ["m"]))
    nodes += _dq("m", "md")
    nodes.append(helper.make_node("QuantizeLinear", ["rf", "m_s", "m_z"], ["r"]))
    nodes += [helper.make_node("DequantizeLinear", ["r", "m_s", "m_z"], ["rd"])]
    nodes.append(helper.make_node("Add", ["md", "rd"], ["sum"]))
    nodes.append(helper.make_node("QuantizeLinear", ["sum", "s_s", "s_z"], ["out"]))
    spec = {"xf": ("float32", (3, 16)), "rf": ("float32", (3, 12))}
    model = build_model(nodes, spec, ["out"], inits, opset=17)
    feeds = {k: RNG.standard_normal(s).astype(np.float32) * 2 for k, (_, s) in spec.items()}
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params, ctx=_ctx(False)))
    assert ("nn.matmul", "int32") in ops and ("dequantize", "float32") not in ops
    assert ("quantized_dense_int8", "uint8") in _ops(optimize(mod, params, ctx=_ctx(True)))
    want = run_onnxruntime(model, feeds)[0]
    for int8 in (False, True):
        got = run_onnx_compiled(model, feeds, pass_context=_ctx(int8))[0]
        np.testing.assert_array_equal(got, want)


def test_unquantized_output_stays_float() -> None:
    """DQ -> Conv without a QuantizeLinear after it: nothing to requantize, no rewrite."""
    model, feeds = _conv_model(False, False)
    graph = model.graph
    keep = [n for n in graph.node if n.output[0] not in ("y", "out")]
    del graph.node[:]
    graph.node.extend(keep)
    graph.output[0].name = "c"
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params))
    assert ("nn.conv", "float32") in ops


@pytest.mark.parametrize("zero_point", [0, 9])
def test_add_relu_becomes_quantized_add_when_the_zero_point_is_the_minimum(zero_point) -> None:
    """Q(Relu(Add(DQ(a), DQ(b)))): with the output zero point at the type's minimum the
    saturation is the relu (onnxruntime drops the Relu and runs QLinearAdd); otherwise the
    chain stays in float."""
    inits = _qparams("a", 0.05, np.uint8(120)) | _qparams("b", 0.03, np.uint8(100))
    inits |= _qparams("s", 0.04, np.uint8(zero_point))
    nodes = [helper.make_node("QuantizeLinear", [f"{n}f", f"{n}_s", f"{n}_z"], [n]) for n in "ab"]
    nodes += _dq("a", "ad") + _dq("b", "bd")
    nodes.append(helper.make_node("Add", ["ad", "bd"], ["sum"]))
    nodes.append(helper.make_node("Relu", ["sum"], ["r"]))
    nodes.append(helper.make_node("QuantizeLinear", ["r", "s_s", "s_z"], ["out"]))
    spec = {"af": ("float32", (2, 3, 17)), "bf": ("float32", (2, 3, 17))}
    model = build_model(nodes, spec, ["out"], inits, opset=17)
    feeds = {k: RNG.standard_normal(s).astype(np.float32) * 3 for k, (_, s) in spec.items()}
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params))
    assert (("quantized_add_int8", "uint8") in ops) == (zero_point == 0)
    want = run_onnxruntime(model, feeds)[0]
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)


@pytest.mark.parametrize("dtype,zero_point", [("uint8", 17), ("int8", -3)])
def test_max_pool_between_equal_qdq_runs_on_the_integers(dtype: str, zero_point: int) -> None:
    """Q(MaxPool(DQ(x))) with one scale and zero point: max_pool of the 8-bit data."""
    zp = np.asarray(zero_point, dtype)
    inits = _qparams("x", 0.05, zp) | _qparams("y", 0.05, zp)
    nodes = [helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"])]
    nodes += _dq("x", "xd")
    pool = helper.make_node("MaxPool", ["xd"], ["p"], kernel_shape=[3, 3], strides=[2, 2])
    pool.attribute.append(helper.make_attribute("pads", [1, 1, 1, 1]))
    nodes += [pool, helper.make_node("QuantizeLinear", ["p", "y_s", "y_z"], ["out"])]
    spec = {"xf": ("float32", (1, 3, 11, 10))}
    model = build_model(nodes, spec, ["out"], inits, opset=17)
    feeds = {"xf": RNG.standard_normal((1, 3, 11, 10)).astype(np.float32) * 3}
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params))  # the int8 kernel (tests/ops/test_quant_int8.py)
    assert ("quantized_max_pool_int8", dtype) in ops and ("dequantize", "float32") not in ops
    ctx = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": False})
    assert ("nn.max_pool", dtype) in _ops(optimize(mod, params, ctx=ctx))
    want = run_onnxruntime(model, feeds)[0]
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds, pass_context=ctx)[0], want)


def test_concat_of_quantized_inputs_requantizes_each_by_a_table() -> None:
    """Q(Concat(DQ(a), DQ(b))): a with the output's parameters is concatenated as it is, b
    requantized by a 256-entry table; no float left, onnxruntime's bytes."""
    inits = _qparams("a", 0.05, np.uint8(128)) | _qparams("b", 0.11, np.uint8(100))
    inits |= _qparams("y", 0.05, np.uint8(128))
    nodes = [helper.make_node("QuantizeLinear", [f"{v}f", f"{v}_s", f"{v}_z"], [v]) for v in "ab"]
    nodes += _dq("a", "ad") + _dq("b", "bd")
    nodes += [helper.make_node("Concat", ["ad", "bd"], ["c"], axis=1)]
    nodes += [helper.make_node("QuantizeLinear", ["c", "y_s", "y_z"], ["out"])]
    spec = {"af": ("float32", (1, 3, 5, 4)), "bf": ("float32", (1, 2, 5, 4))}
    model = build_model(nodes, spec, ["out"], inits, opset=17)
    feeds = {k: RNG.standard_normal(s).astype(np.float32) * 4 for k, (_, s) in spec.items()}
    mod, params = from_onnx(model)
    ops = _ops(optimize(mod, params))
    assert ("concatenate", "uint8") in ops and ("dequantize", "float32") not in ops, ops
    assert [op for op, _ in ops].count("quantized_table_int8") == 1, ops
    np.testing.assert_array_equal(
        run_onnx_compiled(model, feeds)[0], run_onnxruntime(model, feeds)[0]
    )
