"""Cast and CastLike on the sub-byte and 8-bit float types (int4, uint4, int2, uint2,
float4_e2m1fn, float8_e8m0fnu), compiled, exactly against onnx's reference implementation
(subbyte_check), through both code generators (``c`` and ``llvm``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import ember
from ember.errors import FrontendError

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from . import subbyte_check as sb
except ImportError:
    import subbyte_check as sb  # type: ignore[no-redef]

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.mark.parametrize("target", sb.TARGETS)
@pytest.mark.parametrize("name", list(sb.SUB_INTS))
def test_cast_float_to_sub_byte_int_truncates_then_wraps(name: str, target: str) -> None:
    x = np.concatenate([np.arange(-20, 20, dtype=np.float32) / 2, [1e3, -1e3]]).astype("f4")
    model = sb.cast_model(TensorProto.FLOAT, getattr(TensorProto, name))
    sb.check_reference(model, {"x": x}, target)


@pytest.mark.parametrize("target", sb.TARGETS)
@pytest.mark.parametrize("name", list(sb.SUB_INTS))
def test_sub_byte_int_to_wider_types(name: str, target: str) -> None:
    dtype = helper.tensor_dtype_to_np_dtype(getattr(TensorProto, name))
    info = ml_dtypes.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype)
    wide = [TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT8]
    for dst in [*wide, TensorProto.FLOAT16]:
        sb.check_reference(sb.cast_model(getattr(TensorProto, name), dst), {"x": x}, target)


@pytest.mark.parametrize("target", sb.TARGETS)
def test_integer_casts_into_int4_keep_the_low_bits(target: str) -> None:
    x = np.arange(-128, 128, dtype=np.int32).astype(np.int8)
    for dst in (TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2):
        sb.check_reference(sb.cast_model(TensorProto.INT8, dst), {"x": x}, target)


@pytest.mark.parametrize("target", sb.TARGETS)
@pytest.mark.parametrize("src", [TensorProto.FLOAT, TensorProto.FLOAT16])
def test_cast_to_float4_rounds_to_even_and_saturates(src: int, target: str) -> None:
    x = sb.FLOATS.astype(helper.tensor_dtype_to_np_dtype(src))
    sb.check_reference(sb.cast_model(src, TensorProto.FLOAT4E2M1), {"x": x}, target)
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    sb.check_reference(sb.cast_model(TensorProto.FLOAT4E2M1, src), {"x": codes}, target)


@pytest.mark.parametrize("target", sb.TARGETS)
@pytest.mark.parametrize("mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_cast_to_e8m0_rounding_modes_and_saturation(mode: str, saturate: int, target: str) -> None:
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 31, 4000, dtype=np.uint32)  # positive floats, every exponent
    tiny = [2.0**-127, 1.5 * 2.0**-127]
    x = np.concatenate([sb.FLOATS, bits.view(np.float32), tiny]).astype("f4")
    model = sb.cast_model(
        TensorProto.FLOAT, TensorProto.FLOAT8E8M0, saturate=saturate, round_mode=mode
    )
    sb.check_reference(model, {"x": x}, target)


@pytest.mark.parametrize("target", sb.TARGETS)
def test_e8m0_to_float_is_exact_for_every_code(target: str) -> None:
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu)
    for dst in (TensorProto.FLOAT, TensorProto.FLOAT16):
        sb.check_reference(sb.cast_model(TensorProto.FLOAT8E8M0, dst), {"x": codes}, target)


@pytest.mark.parametrize("target", sb.TARGETS)
def test_castlike_takes_the_sub_byte_type_of_its_second_input(target: str) -> None:
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    model = sb.model_of([node], {"x": TensorProto.FLOAT, "like": TensorProto.INT4}, {"y": 22})
    feeds = {"x": np.arange(-9, 16, dtype=np.float32), "like": np.zeros(1, ml_dtypes.int4)}
    sb.check_reference(model, feeds, target)


def test_unknown_round_mode_is_refused() -> None:
    model = sb.cast_model(TensorProto.FLOAT, TensorProto.FLOAT8E8M0, round_mode="sideways")
    with pytest.raises(FrontendError, match="round_mode 'sideways' is unknown"):
        ember.import_onnx(model, shape={"x": (4,)})


def test_aot_executor_takes_and_returns_sub_byte_tensors() -> None:
    nodes = [
        helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT4),
        helper.make_node("Cast", ["a"], ["b"], to=TensorProto.FLOAT),
    ]
    model = sb.model_of(nodes, {"x": 1, "a": TensorProto.FLOAT4E2M1}, {"y": 22, "b": 1})
    codes = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)
    feeds = {"x": np.arange(-8, 8, dtype=np.float32) * 1.5, "a": codes}
    want = ReferenceEvaluator(model).run(None, feeds)
    for got, w in zip(sb.run(model, feeds, executor="aot"), want, strict=True):
        sb.same(got, w)
