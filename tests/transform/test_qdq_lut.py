"""fuse_qdq's tables: elementwise QDQ chains of one 8-bit tensor as ``take`` of 256 values,
Q/DQ pairs around moves dropped (ember/transform/qdq_lut.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.testing import build_model, run_onnx_compiled, run_onnxruntime
from ember.transform import PassContext, optimize

pytestmark = pytest.mark.cc
RNG = np.random.default_rng(5)


def _ops(model, int8: bool = True) -> list[str]:
    mod, params = from_onnx(model)
    ctx = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": int8})
    body = optimize(mod, params, ctx=ctx).main.body
    return [n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")]


def _qdq(name: str, src: str, dtype: str, scale: float, zp: int) -> tuple[list, dict]:
    """QuantizeLinear(src) -> ``name`` (8-bit) -> DequantizeLinear -> ``name``_f."""
    inits = {f"{name}_s": np.float32(scale), f"{name}_z": np.asarray(zp, dtype)}
    nodes = [
        helper.make_node("QuantizeLinear", [src, f"{name}_s", f"{name}_z"], [name]),
        helper.make_node("DequantizeLinear", [name, f"{name}_s", f"{name}_z"], [f"{name}_f"]),
    ]
    return nodes, inits


def _gelu(dtype: str) -> tuple:
    """BERT's QDQ GELU: x * 0.5 * (1 + erf(x / sqrt 2)), a Q/DQ pair after every step."""
    zp = -3 if dtype == "int8" else 125
    nodes, inits = _qdq("x", "xf", dtype, 0.03, zp)
    inits |= {"r2": np.float32(1.4142135), "one": np.float32(1.0), "half": np.float32(0.5)}
    steps = [("Div", "x_f", "r2", "d"), ("Erf", "d_f", None, "e"), ("Add", "e_f", "one", "a"),
             ("Mul", "x_f", "a_f", "m"), ("Mul", "m_f", "half", "y")]  # fmt: skip
    scales = {"d": 0.02, "e": 0.008, "a": 0.008, "m": 0.03, "y": 0.015}
    for op, a, b, out in steps:
        nodes.append(helper.make_node(op, [a] if b is None else [a, b], [f"{out}_raw"]))
        more, extra = _qdq(out, f"{out}_raw", "uint8", scales[out], 0 if out == "e" else 20)
        nodes += more
        inits |= extra
    model = build_model(nodes, {"xf": ("float32", (2, 3, 40))}, ["y_f"], inits, opset=17)
    return model, {"xf": RNG.standard_normal((2, 3, 40)).astype(np.float32) * 2}


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_gelu_chain_is_one_table(dtype: str) -> None:
    """The whole chain is one take (no erf left), equal to onnxruntime and to the float
    chain compiled without tables."""
    model, feeds = _gelu(dtype)
    ops = _ops(model)
    assert "erf" not in ops and ops.count("quantized_table_int8") == 1, ops
    got = run_onnx_compiled(model, feeds)[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])
    off = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": False})
    np.testing.assert_array_equal(got, run_onnx_compiled(model, feeds, pass_context=off)[0])


def test_qdq_pairs_around_moves_are_dropped() -> None:
    """Transpose and Reshape between Q/DQ pairs of one scale and zero point: the bytes move,
    nothing is computed."""
    nodes, inits = _qdq("x", "xf", "uint8", 0.05, 131)
    nodes.append(helper.make_node("Transpose", ["x_f"], ["t_raw"], perm=[0, 2, 1]))
    more, extra = _qdq("t", "t_raw", "uint8", 0.05, 131)
    inits["shape"] = np.asarray([2, -1], np.int64)
    nodes += more + [helper.make_node("Reshape", ["t_f", "shape"], ["r_raw"])]
    more2, extra2 = _qdq("r", "r_raw", "uint8", 0.05, 131)
    model = build_model(nodes + more2, {"xf": ("float32", (2, 3, 4))}, ["r_f"],
                        inits | extra | extra2, opset=17)  # fmt: skip
    feeds = {"xf": RNG.standard_normal((2, 3, 4)).astype(np.float32) * 3}
    ops = _ops(model)
    assert ops.count("quantize") == 1 and ops.count("dequantize") == 1, ops
    assert "quantized_table_int8" not in ops
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0],
                                  run_onnxruntime(model, feeds)[0])  # fmt: skip


def test_chain_with_a_vector_constant_stays_float() -> None:
    """An Add of a per-column constant is not a function of one byte: no table."""
    nodes, inits = _qdq("x", "xf", "uint8", 0.05, 100)
    inits["b"] = RNG.standard_normal(4).astype(np.float32)
    nodes.append(helper.make_node("Add", ["x_f", "b"], ["a_raw"]))
    nodes.append(helper.make_node("Sigmoid", ["a_raw"], ["s_raw"]))
    more, extra = _qdq("s", "s_raw", "uint8", 1 / 256, 0)
    model = build_model(nodes + more, {"xf": ("float32", (3, 4))}, ["s_f"], inits | extra, 17)
    feeds = {"xf": RNG.standard_normal((3, 4)).astype(np.float32)}
    ops = _ops(model)
    assert "quantized_table_int8" not in ops and "sigmoid" in ops, ops
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0],
                                  run_onnxruntime(model, feeds)[0])  # fmt: skip


def test_rank_raising_constant_keeps_the_float_chain() -> None:
    """A one-element constant of a higher rank broadcasts the chain to that rank: the table
    (of the data's shape) would not fit, so the chain stays as it is."""
    nodes, inits = _qdq("x", "xf", "uint8", 0.05, 100)
    inits["c"] = np.full((1, 1, 1), 0.5, np.float32)
    nodes.append(helper.make_node("Mul", ["x_f", "c"], ["m_raw"]))
    more, extra = _qdq("m", "m_raw", "uint8", 0.03, 10)
    model = build_model(nodes + more, {"xf": ("float32", (3, 4))}, ["m_f"], inits | extra, 17)
    feeds = {"xf": RNG.standard_normal((3, 4)).astype(np.float32)}
    assert "quantized_table_int8" not in _ops(model)
    got = run_onnx_compiled(model, feeds)[0]
    assert got.shape == (1, 3, 4)
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])


def _tanh_gelu() -> tuple:
    """GPT-2's QDQ GELU as onnxruntime's quantizer leaves it: 0.5x(1 + tanh(k(x + c x^3))),
    its constants c and k themselves dequantized 8-bit scalars, and an Add of two values of
    the same x (x and c x^3)."""
    nodes, inits = _qdq("x", "xf", "uint8", 0.035, 121)
    for name, value in (("c", 0.044715), ("k", 0.7978846)):  # quantized as the quantizer does
        inits |= {f"{name}_q": np.asarray(255, np.uint8), f"{name}_s": np.float32(value / 255)}
        inits[f"{name}_z"] = np.asarray(0, np.uint8)
        nodes.append(helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"],
                                      [f"{name}_f"]))  # fmt: skip
    inits |= {"three": np.float32(3.0), "one": np.float32(1.0), "half": np.float32(0.5)}
    steps = [("Pow", "x_f", "three", "p"), ("Mul", "p_f", "c_f", "cube"),
             ("Add", "x_f", "cube_f", "s"), ("Mul", "s_f", "k_f", "i"),
             ("Tanh", "i_f", None, "t"), ("Add", "t_f", "one", "a"),
             ("Mul", "x_f", "half", "h"), ("Mul", "h_f", "a_f", "y")]  # fmt: skip
    scales = {"p": 0.5, "cube": 0.03, "s": 0.05, "i": 0.04, "t": 0.0078, "a": 0.0078,
              "h": 0.018, "y": 0.02}  # fmt: skip
    for op, a, b, out in steps:
        nodes.append(helper.make_node(op, [a] if b is None else [a, b], [f"{out}_raw"]))
        zp = 127 if out == "t" else (0 if out == "a" else 20)
        more, extra = _qdq(out, f"{out}_raw", "uint8", scales[out], zp)
        nodes += more
        inits |= extra
    model = build_model(nodes, {"xf": ("float32", (2, 8, 48))}, ["y_f"], inits, opset=17)
    return model, {"xf": RNG.standard_normal((2, 8, 48)).astype(np.float32) * 2}


def test_tanh_gelu_with_quantized_constants_is_one_table() -> None:
    """Dequantized scalar weights count as constants, and an Add whose operands are both
    functions of one 8-bit tensor becomes part of its table, not an int8 add kernel (GPT-2's
    static QDQ GELU: four scalar kernels of 1 ms a layer before, one table now)."""
    model, feeds = _tanh_gelu()
    ops = _ops(model)
    assert ops.count("quantized_table_int8") == 1 and "tanh" not in ops and "power" not in ops, ops
    assert not any(op.startswith("quantized_add") for op in ops), ops
    got = np.rint(run_onnx_compiled(model, feeds)[0] / 0.02)  # in output steps
    off = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": False})
    chain = np.rint(run_onnx_compiled(model, feeds, pass_context=off)[0] / 0.02)
    want = np.rint(run_onnxruntime(model, feeds)[0] / 0.02)
    for ref in (chain, want):  # tanh's last bit may move a value that lands on a tie
        assert np.abs(got - ref).max() <= 1 and np.mean(got != ref) < 0.01
