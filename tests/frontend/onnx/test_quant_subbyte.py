"""QuantizeLinear and DequantizeLinear on the sub-byte integers (int4, uint4, int2, uint2:
``quantize``/``dequantize``) and the 8-bit and 4-bit floats (casts, as onnx's reference),
compiled, exactly against onnx's reference implementation and, for the integers, against
onnxruntime (which cannot hand sub-byte tensors to numpy, so those models end in 8 bits).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import ember
from ember.errors import FrontendError
from ember.testing import run_onnxruntime

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from . import subbyte_check as sb
except ImportError:
    import subbyte_check as sb  # type: ignore[no-redef]

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.mark.parametrize("target", sb.TARGETS)
@pytest.mark.parametrize("name", list(sb.SUB_INTS))
def test_quantize_dequantize_sub_byte_match_onnxruntime(name: str, target: str) -> None:
    """Q -> DQ and Cast -> Cast chains with 8-bit ends, which onnxruntime can return."""
    elem = getattr(TensorProto, name)
    zp = helper.make_tensor("zp", elem, [], [1])
    nodes = [
        helper.make_node("Constant", [], ["z"], value=zp),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
        helper.make_node("Cast", ["x"], ["c"], to=elem),
        helper.make_node("Cast", ["c"], ["w"], to=getattr(TensorProto, sb.SUB_INTS[name].upper())),
    ]
    model = sb.model_of(nodes, {"x": 1, "s": 1}, {"y": 1, "w": 0})
    model.graph.output[1].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(
        np.dtype(sb.SUB_INTS[name])
    )
    feeds = {"x": np.arange(-9, 16, dtype=np.float32), "s": np.array(2, np.float32)}
    for got, want in zip(sb.run(model, feeds, target), run_onnxruntime(model, feeds), strict=True):
        sb.same(got, want)


@pytest.mark.parametrize("target", sb.TARGETS)
def test_blocked_int4_quantization_with_output_dtype(target: str) -> None:
    x = np.random.default_rng(1).uniform(-20, 20, (3, 8)).astype(np.float32)
    scale = np.array([[0.5, 1.0, 2.0, 4.0]] * 3, np.float32)
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=2, output_dtype=22)
    dq = helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=2)
    model = sb.model_of([q, dq], {"x": 1, "s": 1}, {"q": 22, "y": 1})
    sb.check_reference(model, {"x": x, "s": scale}, target)


@pytest.mark.parametrize("name", ["FLOAT8E4M3FN", "FLOAT8E5M2", "FLOAT4E2M1"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_float_quantize_linear_is_a_saturating_cast(name: str, saturate: int) -> None:
    elem = getattr(TensorProto, name)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], saturate=saturate)
    dq = helper.make_node("DequantizeLinear", ["q", "s"], ["y"])
    model = sb.model_of([q, dq], {"x": 1, "s": 1, "z": elem}, {"q": elem, "y": 1})
    zero = np.zeros((), helper.tensor_dtype_to_np_dtype(elem))
    feeds = {"x": sb.FLOATS * 3, "s": np.array(0.5, np.float32), "z": zero}
    sb.check_reference(model, feeds)


def test_float8_dequantize_to_float16_scale() -> None:
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    dq = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
    model = sb.model_of([dq], {"x": TensorProto.FLOAT8E4M3FN, "s": 10}, {"y": 10})
    sb.check_reference(model, {"x": x, "s": np.array(0.25, np.float16)})


def test_a_float8_zero_point_must_be_zero() -> None:
    zp = helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [1.0])
    nodes = [
        helper.make_node("Constant", [], ["z"], value=zp),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
    ]
    model = sb.model_of(nodes, {"x": 1, "s": 1}, {"q": TensorProto.FLOAT8E4M3FN})
    with pytest.raises(FrontendError, match="float8 zero point must be 0"):
        ember.import_onnx(model, shape={"x": (4,), "s": ()})


@pytest.mark.parametrize("target", sb.TARGETS)
@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_int4_weights_stay_int4_params_read_from_their_low_bits(target: str, executor: str) -> None:
    """An int4 initializer dequantized by a run-time scale is a param of the built model:
    stored as onnx unpacks it (the value in the low 4 bits), read sign-extended."""
    w = np.array([-8, -3, 0, 5, 7, -1], ml_dtypes.int4)
    model = sb.model_of(
        [helper.make_node("DequantizeLinear", ["w", "s"], ["y"])], {"s": 1}, {"y": 1}
    )
    model.graph.initializer.append(numpy_helper.from_array(w, "w"))
    (got,) = sb.run(model, {"s": np.array(0.5, np.float32)}, target, executor=executor)
    np.testing.assert_array_equal(got, w.astype(np.float32) * 0.5)
