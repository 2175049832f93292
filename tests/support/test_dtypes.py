"""The one dtype table: each row against numpy, ml_dtypes, ONNX, DLPack and C, and every
older dtype view (runtime, formats, loop IR, graph IR, C codegen, ONNX importer) against it."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import onnx
import pytest

from ember.codegen.c import abi
from ember.errors import CompileError, EmberTypeError, EmberValueError, SerializationError
from ember.formats import dtypes as formats_dtypes
from ember.frontend.onnx import registry as onnx_registry
from ember.frontend.onnx.context import onnx_elem_dtype
from ember.ir import types as ir_types
from ember.ir.ops import common as ir_common
from ember.runtime.c_api import DLDataTypeCode
from ember.runtime.dlpack import from_capsule
from ember.runtime.dtype import SUPPORTED
from ember.runtime.dtype import dtype as rt_dtype
from ember.support import dtypes
from ember.tir import dtype as tir_dtype

ROWS = dtypes.DTYPES
# the numeric rows (``string`` is tested in tests/runtime/test_ndarray_strings.py)
TENSOR_ROWS = tuple(d for d in ROWS if d.numpy is not None and d.kind != "string")
_NUMPY_KIND = {"bool": "b", "int": "i", "uint": "u", "float": "f"}
_CTYPES = {
    "uint8_t": ctypes.c_uint8,
    "int8_t": ctypes.c_int8,
    "int16_t": ctypes.c_int16,
    "int32_t": ctypes.c_int32,
    "int64_t": ctypes.c_int64,
    "uint16_t": ctypes.c_uint16,
    "uint32_t": ctypes.c_uint32,
    "uint64_t": ctypes.c_uint64,
    "float": ctypes.c_float,
    "double": ctypes.c_double,
    "void*": ctypes.c_void_p,
    "EmberString": ctypes.c_char_p * 2,  # {const char* data; int64_t size} (16 bytes)
}


def _ids(rows: tuple[dtypes.DTypeInfo, ...]) -> list[str]:
    return [d.name for d in rows]


def test_names_are_unique_and_keys_are_unique() -> None:
    assert len({d.name for d in ROWS}) == len(ROWS)
    assert len({d.dl_type[:2] for d in ROWS}) == len(ROWS)
    assert len({d.onnx for d in TENSOR_ROWS}) == len(TENSOR_ROWS)
    assert tuple(d.name for d in TENSOR_ROWS) == dtypes.TENSOR_DTYPES
    assert all(d.lanes == 1 for d in ROWS)


@pytest.mark.parametrize("info", TENSOR_ROWS, ids=_ids(TENSOR_ROWS))
def test_row_agrees_with_numpy_and_ml_dtypes(info: dtypes.DTypeInfo) -> None:
    assert info.numpy is not None
    assert info.numpy.name == info.name
    assert info.numpy.itemsize == info.itemsize == info.bits // 8
    if hasattr(ml_dtypes, info.name):  # bfloat16, the float8s, float4, the 2-/4-bit ints
        assert info.numpy == np.dtype(getattr(ml_dtypes, info.name))
    else:
        assert info.numpy.kind == _NUMPY_KIND[info.kind]
        assert info.numpy == np.dtype(info.name)
    assert dtypes.from_numpy(info.numpy) is info
    assert dtypes.numpy_dtype(info.name) == info.numpy


@pytest.mark.parametrize("info", TENSOR_ROWS, ids=_ids(TENSOR_ROWS))
def test_row_agrees_with_onnx(info: dtypes.DTypeInfo) -> None:
    assert info.onnx is not None
    assert onnx.helper.tensor_dtype_to_np_dtype(info.onnx) == info.numpy
    assert dtypes.from_onnx(info.onnx) is info
    assert onnx_elem_dtype(info.onnx, "test") == info.name


def test_every_onnx_type_ember_can_hold_is_in_the_table() -> None:
    for code in onnx.TensorProto.DataType.values():
        try:
            name = onnx.helper.tensor_dtype_to_np_dtype(code).name
        except (KeyError, ValueError, TypeError):
            continue
        row = dtypes.from_onnx(code)
        held = (*dtypes.TENSOR_DTYPES, "object")  # object: onnx's STRING is ember's string
        want = None if name not in held else ("string" if name == "object" else name)
        assert (row.name if row else None) == want


@pytest.mark.parametrize("info", TENSOR_ROWS, ids=_ids(TENSOR_ROWS))
def test_row_agrees_with_dlpack(info: dtypes.DTypeInfo) -> None:
    assert dtypes.DL_CODE_NAMES.get(info.dl_code, info.name) in info.name  # float8: whole
    assert dtypes.from_dl(*info.dl_type[:2]) is info
    if not hasattr(ml_dtypes, info.name):  # numpy refuses
        # to export ml_dtypes types
        exported = from_capsule(np.zeros(3, info.numpy).__dlpack__()).data_type
        assert (exported.code, exported.bits, exported.lanes) == info.dl_type


def test_dlpack_codes_match_the_ffi_enum() -> None:
    assert DLDataTypeCode.kDLInt == dtypes.DL_INT
    assert DLDataTypeCode.kDLUInt == dtypes.DL_UINT
    assert DLDataTypeCode.kDLFloat == dtypes.DL_FLOAT
    assert DLDataTypeCode.kDLOpaqueHandle == dtypes.DL_HANDLE
    assert DLDataTypeCode.kDLBfloat == dtypes.DL_BFLOAT
    assert DLDataTypeCode.kDLBool == dtypes.DL_BOOL


@pytest.mark.parametrize("info", ROWS, ids=_ids(ROWS))
def test_c_types_have_the_rows_width_and_sign(info: dtypes.DTypeInfo) -> None:
    if info.c_type is None:
        assert dtypes.is_half(info.name)
        return
    ct = _CTYPES[info.c_type]
    assert ctypes.sizeof(ct) * 8 == info.bits
    if info.kind in ("int", "uint"):
        assert ct(-1).value == (-1 if info.kind == "int" else (1 << info.bits) - 1)


def test_sub_byte_rows_are_stored_one_per_byte_and_say_their_width_to_dlpack() -> None:
    for name, width in (("int4", 4), ("uint4", 4), ("int2", 2), ("uint2", 2), ("float4_e2m1fn", 4)):
        info = dtypes.dtype_info(name)
        assert (info.bits, info.itemsize, info.sub_bits, dtypes.sub_bits(name)) == (
            8,
            1,
            width,
            width,
        )
        assert info.dl_type[1] == width and rt_dtype(name).itemsize == 1
    assert dtypes.sub_bits("int8") == dtypes.sub_bits("float8_e8m0fnu") == 0
    assert dtypes.from_dl(dtypes.DL_INT, 4).name == "int4"  # type: ignore[union-attr]


def test_queries() -> None:
    f8 = (
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float4_e2m1fn",
        "float8_e8m0fnu",
    )
    assert dtypes.names_of("float") == (*f8, "float16", "bfloat16", "float32", "float64")
    assert [n for n in dtypes.TENSOR_DTYPES if dtypes.is_half(n)] == [*f8, "float16", "bfloat16"]
    assert dtypes.is_integral("uint8") and not dtypes.is_integral("bool")
    assert dtypes.is_int("int8") and not dtypes.is_uint("int8")
    assert not dtypes.is_float("float32x4") and not dtypes.is_float("nonsense")
    assert dtypes.lookup(3) is None
    with pytest.raises(EmberValueError, match="unknown dtype 'float8'; use one of bool"):
        dtypes.dtype_info("float8")
    with pytest.raises(EmberValueError, match="'handle' has no numpy equivalent"):
        dtypes.numpy_dtype("handle")


@pytest.mark.parametrize("info", TENSOR_ROWS, ids=_ids(TENSOR_ROWS))
def test_runtime_view(info: dtypes.DTypeInfo) -> None:
    dt = rt_dtype(info.name)
    assert (dt.code, dt.bits, dt.lanes) == info.dl_type
    assert str(dt) == info.name
    assert dt.numpy_dtype() == info.numpy
    assert rt_dtype(info.numpy) == dt
    assert dt.itemsize == info.itemsize
    assert SUPPORTED == dtypes.TENSOR_DTYPES


def test_runtime_view_refuses_numpy_types_outside_the_table() -> None:
    with pytest.raises(EmberTypeError, match="not supported"):
        rt_dtype(np.complex64)
    if np.dtype(np.longdouble).itemsize > 8:  # formerly became an unusable DataType(2, 128)
        with pytest.raises(EmberTypeError, match="not supported"):
            rt_dtype(np.longdouble)
    assert rt_dtype(np.dtype(">f4")) == rt_dtype("float32")


@pytest.mark.parametrize("info", TENSOR_ROWS, ids=_ids(TENSOR_ROWS))
def test_formats_view(info: dtypes.DTypeInfo) -> None:
    dl = formats_dtypes.dltype_of(info.name)
    assert (dl.code, dl.bits, dl.lanes) == info.dl_type
    assert formats_dtypes.numpy_dtype(info.name) == info.numpy
    assert formats_dtypes.dtype_name(info.numpy) == info.name
    assert tuple(sorted((*dtypes.TENSOR_DTYPES, "string"))) == formats_dtypes.KNOWN_DTYPES


def test_formats_view_keeps_refusing_foreign_byte_orders() -> None:
    with pytest.raises(SerializationError, match="no ember equivalent"):
        formats_dtypes.dtype_name(np.dtype(">f4"))


@pytest.mark.parametrize("info", ROWS, ids=_ids(ROWS))
def test_loop_ir_view(info: dtypes.DTypeInfo) -> None:
    name = info.name
    assert tir_dtype.bits_of(name) == info.bits
    assert tir_dtype.bytes_of(name) == info.itemsize
    assert tir_dtype.is_float(name) == (info.kind == "float")
    assert tir_dtype.is_int(name) == (info.kind == "int")
    assert tir_dtype.is_uint(name) == (info.kind == "uint")
    assert tir_dtype.is_bool(name) == (info.kind == "bool")
    assert tir_dtype.is_handle(name) == (info.kind == "handle")
    assert tir_dtype.dlpack_code(name) == info.dl_type
    if info.kind != "handle":
        assert tir_dtype.dlpack_code(name + "x4") == (*info.dl_type[:2], 4)
        assert tir_dtype.is_float(name + "x4") == (info.kind == "float")
    assert tuple(sorted(d.name for d in ROWS)) == tir_dtype.SCALAR_DTYPES


@pytest.mark.parametrize("info", TENSOR_ROWS, ids=_ids(TENSOR_ROWS))
def test_graph_ir_view(info: dtypes.DTypeInfo) -> None:
    assert ir_types.DTYPES == dtypes.TENSOR_DTYPES
    assert ir_types.canonical_dtype(info.numpy) == info.name
    assert ir_types.canonical_dtype(info.name) == info.name
    assert ir_common.np_dtype(info.name) == info.numpy
    half = np.dtype("float32") if dtypes.is_half(info.name) else info.numpy
    assert ir_common.compute_dtype(info.name) == half


def test_dtype_sets_of_the_ir_and_the_importer() -> None:
    assert set(dtypes.names_of("float")) == ir_common.FLOAT_DTYPES
    assert onnx_registry.FLOAT_TYPES == ir_common.FLOAT_DTYPES - dtypes.STORAGE_ONLY
    assert onnx_registry.INT_TYPES == ir_common.INT_DTYPES - dtypes.STORAGE_ONLY
    assert {
        "int4",
        "uint4",
        "int2",
        "uint2",
        "float4_e2m1fn",
        "float8_e8m0fnu",
    } == dtypes.STORAGE_ONLY
    assert set(dtypes.names_of("int", "uint")) == ir_common.INT_DTYPES
    assert {"int8", "int16", "int32", "int64", "int4", "int2"} == ir_common.SIGNED_DTYPES
    assert ir_common.ALL_DTYPES == onnx_registry.ALL_TYPES == set(dtypes.TENSOR_DTYPES)


@pytest.mark.parametrize("info", ROWS, ids=_ids(ROWS))
def test_c_codegen_view(info: dtypes.DTypeInfo) -> None:
    if dtypes.is_half(info.name):  # stored as bits, computed as float (codegen/c/half.py)
        assert abi.c_type(info.name) == {16: "uint16_t", 8: "uint8_t"}[info.bits]
    elif info.c_type is None:
        with pytest.raises(CompileError, match="not supported by the C backend"):
            abi.c_type(info.name)
    else:
        assert abi.c_type(info.name) == info.c_type
