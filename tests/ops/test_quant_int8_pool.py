"""``quantized_global_avg_pool_int8`` (the QDQ global average pool as onnxruntime's
QLinearGlobalAveragePool: integer sums, one float32 multiplier) against onnxruntime, on the
AVX-512, AVX2 and portable C paths."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.runtime.cpu_features import host_features
from ember.testing import build_model, run_onnx_compiled, run_onnx_reference, run_onnxruntime
from ember.transform import PassContext, optimize

pytestmark = pytest.mark.cc
RNG_SEED = 11  # every test draws from a fresh RNG of this seed (tests/ops/conftest.py)
RNG = np.random.default_rng(RNG_SEED)
HAS_AVX512 = {"avx512bw", "avx512f"} <= host_features()


def _gap_model(x_dtype: str, y_dtype: str, shape: tuple[int, ...]):
    """QuantizeLinear -> DequantizeLinear -> GlobalAveragePool -> QuantizeLinear, and feeds."""
    xz = np.int8(-9) if x_dtype == "int8" else np.uint8(3)
    yz = np.int8(4) if y_dtype == "int8" else np.uint8(0)
    inits = {
        "x_s": np.asarray(0.0235, np.float32),
        "x_z": np.asarray(xz),
        "y_s": np.asarray(0.0234, np.float32),
        "y_z": np.asarray(yz),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"]),
        helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["xd"]),
        helper.make_node("GlobalAveragePool", ["xd"], ["p"]),
        helper.make_node("QuantizeLinear", ["p", "y_s", "y_z"], ["y"]),
    ]
    model = build_model(nodes, {"xf": ("float32", shape)}, ["y"], inits, opset=17)
    return model, {"xf": RNG.uniform(-1.0, 6.0, shape).astype(np.float32)}


def _ops(model) -> set[str]:
    mod, params = from_onnx(model)
    body = optimize(mod, params, ctx=PassContext(opt_level=2)).main.body
    return {n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")}


@pytest.mark.parametrize(
    "x_dtype,y_dtype,shape",
    [
        ("uint8", "uint8", (1, 40, 7, 7)),  # MobileNetV2's 7x7: 49 bytes, one masked load
        ("int8", "uint8", (2, 5, 9, 15)),  # 135 bytes: two full loads and a masked one
        ("uint8", "int8", (1, 3, 8, 8)),  # exactly 64
        ("int8", "int8", (1, 4, 1, 3)),
    ],
)
def test_global_avg_pool_int8_equals_onnxruntime(x_dtype, y_dtype, shape) -> None:
    """Integer sums and one float32 multiplier give onnxruntime's bytes (its QDQ transformer
    makes QLinearGlobalAveragePool of the chain) on every C path."""
    model, feeds = _gap_model(x_dtype, y_dtype, shape)
    assert "quantized_global_avg_pool_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    # the float chain (ONNX's semantics) rounds a rare sum the other way
    float_chain = run_onnx_reference(model, feeds)[0].astype(np.int32)
    assert np.abs(float_chain - want).max() <= 1
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)
    for cpu in ("x86-64-v2", "znver3") + (("icelake-server",) if HAS_AVX512 else ()):
        np.testing.assert_array_equal(
            run_onnx_compiled(model, feeds, target=f"c -mcpu={cpu}")[0], want
        )


def test_global_avg_pool_int8_only_for_onnxruntimes_multipliers() -> None:
    """A multiplier outside onnxruntime's [2^-32, 256) keeps the float pool."""
    model, _ = _gap_model("uint8", "uint8", (1, 2, 3, 3))
    for init in model.graph.initializer:
        if init.name == "y_s":
            init.float_data[:] = []
            init.raw_data = np.asarray(1e-5, np.float32).tobytes()
    ops = _ops(model)
    assert "quantized_global_avg_pool_int8" not in ops and "nn.global_avg_pool" in ops
