"""Cast, CastLike, QuantizeLinear and DequantizeLinear on the sub-byte and 8-bit float types
(int4, uint4, int2, uint2, float4_e2m1fn, float8_e8m0fnu, the float8s), compiled, against
onnx's reference implementation, and against onnxruntime where it runs them (it cannot
hand sub-byte tensors to numpy, so its models cast back to 8 bits inside).

Every comparison is exact: these are conversions, ember computes them as onnx's reference
and ml_dtypes do (a float truncated toward zero then wrapped into int4, round half to even
into float4, ONNX's e8m0 rounding modes on the float32 exponent). The integer types run
through both code generators (``c`` and ``llvm``); the narrow floats through ``c`` (the
LLVM back end has no narrow floats and says so).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ember
from ember.errors import CompileError, FrontendError
from ember.testing import run_onnxruntime

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

DEV = ember.cpu(0)
SUB_INTS = {"INT4": "int8", "UINT4": "uint8", "INT2": "int8", "UINT2": "uint8"}
TARGETS = ["c", "llvm"]


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, int], outputs: dict[str, int]):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, None) for n, t in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 10
    return model


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: str = "c", **kw):
    shapes = {k: v.shape for k, v in feeds.items()}
    mod, params = ember.import_onnx(model, shape=shapes)
    top = ember.load_artifacts(ember.build(mod, target=target, params=params, **kw), DEV)
    executor = kw.get("executor", "graph")
    ex = (ember.AotExecutor if executor == "aot" else ember.GraphExecutor)(top["default"](DEV))
    for name, value in feeds.items():
        ex.set_input(name, value)
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


def _same(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(g, w, equal_nan=True), np.stack([g, w])[:, g != w]


def _check_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: str = "c"):
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, feeds)
    got = _run(model, feeds, target)
    for g, w in zip(got, want, strict=True):
        _same(g, w)


def _cast(src: int, dst: int, **attrs: object) -> onnx.ModelProto:
    node = helper.make_node("Cast", ["x"], ["y"], to=dst, **attrs)
    return _model([node], {"x": src}, {"y": dst})


FLOATS = np.array(
    [0.0, -0.0, 0.24, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5, 6.0, 7.0, -3.4, -9.5]
    + [1e6, -1e6, 1e-7, 1e-40, 3e38, 2.0**127, 1.5 * 2.0**126, np.inf, -np.inf, np.nan],
    np.float32,
)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(SUB_INTS))
def test_cast_float_to_sub_byte_int_truncates_then_wraps(name: str, target: str) -> None:
    x = np.concatenate([np.arange(-20, 20, dtype=np.float32) / 2, [1e3, -1e3]]).astype("f4")
    _check_reference(_cast(TensorProto.FLOAT, getattr(TensorProto, name)), {"x": x}, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(SUB_INTS))
def test_sub_byte_int_to_wider_types(name: str, target: str) -> None:
    dtype = helper.tensor_dtype_to_np_dtype(getattr(TensorProto, name))
    info = ml_dtypes.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype)
    wide = [TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT8]
    for dst in wide + ([TensorProto.FLOAT16] if target == "c" else []):  # llvm: no float16
        _check_reference(_cast(getattr(TensorProto, name), dst), {"x": x}, target)


@pytest.mark.parametrize("target", TARGETS)
def test_integer_casts_into_int4_keep_the_low_bits(target: str) -> None:
    x = np.arange(-128, 128, dtype=np.int32).astype(np.int8)
    for dst in (TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2):
        _check_reference(_cast(TensorProto.INT8, dst), {"x": x}, target)


@pytest.mark.parametrize("src", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_cast_to_float4_rounds_to_even_and_saturates(src: int) -> None:
    x = FLOATS.astype(helper.tensor_dtype_to_np_dtype(src))
    _check_reference(_cast(src, TensorProto.FLOAT4E2M1), {"x": x})
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    _check_reference(_cast(TensorProto.FLOAT4E2M1, src), {"x": codes})


@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_to_e8m0_rounding_modes_and_saturation(mode: str, saturate: int) -> None:
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 31, 4000, dtype=np.uint32)  # positive floats, every exponent
    x = np.concatenate([FLOATS, bits.view(np.float32), [2.0**-127, 1.5 * 2.0**-127]]).astype("f4")
    model = _cast(TensorProto.FLOAT, TensorProto.FLOAT8E8M0, saturate=saturate, round_mode=mode)
    _check_reference(model, {"x": x})


def test_e8m0_to_float_is_exact_for_every_code() -> None:
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    for dst in (TensorProto.FLOAT, TensorProto.FLOAT16):
        _check_reference(_cast(TensorProto.FLOAT8E8M0, dst), {"x": codes})


@pytest.mark.parametrize("target", TARGETS)
def test_castlike_takes_the_sub_byte_type_of_its_second_input(target: str) -> None:
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    model = _model([node], {"x": TensorProto.FLOAT, "like": TensorProto.INT4}, {"y": 22})
    feeds = {"x": np.arange(-9, 16, dtype=np.float32), "like": np.zeros(1, ml_dtypes.int4)}
    _check_reference(model, feeds, target)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", list(SUB_INTS))
def test_quantize_dequantize_sub_byte_match_onnxruntime(name: str, target: str) -> None:
    """Q -> DQ and Cast -> Cast chains with 8-bit ends, which onnxruntime can return."""
    elem = getattr(TensorProto, name)
    zp = helper.make_tensor("zp", elem, [], [1])
    nodes = [
        helper.make_node("Constant", [], ["z"], value=zp),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
        helper.make_node("Cast", ["x"], ["c"], to=elem),
        helper.make_node("Cast", ["c"], ["w"], to=getattr(TensorProto, SUB_INTS[name].upper())),
    ]
    model = _model(nodes, {"x": 1, "s": 1}, {"y": 1, "w": 0})
    model.graph.output[1].type.tensor_type.elem_type = helper.np_dtype_to_tensor_dtype(
        np.dtype(SUB_INTS[name])
    )
    feeds = {"x": np.arange(-9, 16, dtype=np.float32), "s": np.array(2, np.float32)}
    for got, want in zip(_run(model, feeds, target), run_onnxruntime(model, feeds), strict=True):
        _same(got, want)


@pytest.mark.parametrize("target", TARGETS)
def test_blocked_int4_quantization_with_output_dtype(target: str) -> None:
    x = np.random.default_rng(1).uniform(-20, 20, (3, 8)).astype(np.float32)
    scale = np.array([[0.5, 1.0, 2.0, 4.0]] * 3, np.float32)
    q = helper.make_node("QuantizeLinear", ["x", "s"], ["q"], axis=1, block_size=2, output_dtype=22)
    dq = helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=1, block_size=2)
    model = _model([q, dq], {"x": 1, "s": 1}, {"q": 22, "y": 1})
    _check_reference(model, {"x": x, "s": scale}, target)


@pytest.mark.parametrize("name", ["FLOAT8E4M3FN", "FLOAT8E5M2", "FLOAT4E2M1"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_float_quantize_linear_is_a_saturating_cast(name: str, saturate: int) -> None:
    elem = getattr(TensorProto, name)
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], saturate=saturate)
    dq = helper.make_node("DequantizeLinear", ["q", "s"], ["y"])
    model = _model([q, dq], {"x": 1, "s": 1, "z": elem}, {"q": elem, "y": 1})
    zero = np.zeros((), helper.tensor_dtype_to_np_dtype(elem))
    feeds = {"x": FLOATS * 3, "s": np.array(0.5, np.float32), "z": zero}
    _check_reference(model, feeds)


def test_float8_dequantize_to_float16_scale() -> None:
    x = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn)
    dq = helper.make_node("DequantizeLinear", ["x", "s"], ["y"])
    model = _model([dq], {"x": TensorProto.FLOAT8E4M3FN, "s": 10}, {"y": 10})
    _check_reference(model, {"x": x, "s": np.array(0.25, np.float16)})


def test_a_float8_zero_point_must_be_zero() -> None:
    zp = helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [1.0])
    nodes = [
        helper.make_node("Constant", [], ["z"], value=zp),
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
    ]
    model = _model(nodes, {"x": 1, "s": 1}, {"q": TensorProto.FLOAT8E4M3FN})
    with pytest.raises(FrontendError, match="float8 zero point must be 0"):
        ember.import_onnx(model, shape={"x": (4,), "s": ()})


def test_unknown_round_mode_is_refused() -> None:
    model = _cast(TensorProto.FLOAT, TensorProto.FLOAT8E8M0, round_mode="sideways")
    with pytest.raises(FrontendError, match="round_mode 'sideways' is unknown"):
        ember.import_onnx(model, shape={"x": (4,)})


def test_aot_executor_takes_and_returns_sub_byte_tensors() -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT4),
        helper.make_node("Cast", ["a"], ["b"], to=TensorProto.FLOAT),
    ]
    model = _model(nodes, {"x": 1, "a": TensorProto.FLOAT4E2M1}, {"y": 22, "b": 1})
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    feeds = {"x": np.arange(-8, 8, dtype=np.float32) * 1.5, "a": codes}
    want = ReferenceEvaluator(model).run(None, feeds)
    for got, w in zip(_run(model, feeds, executor="aot"), want, strict=True):
        _same(got, w)


def test_llvm_refuses_the_narrow_floats_with_a_clear_error() -> None:
    model = _cast(TensorProto.FLOAT, TensorProto.FLOAT4E2M1)
    mod, params = ember.import_onnx(model, shape={"x": (4,)})
    with pytest.raises(CompileError, match="float4_e2m1fn is not supported by the LLVM"):
        ember.build(mod, target="llvm", params=params)
