"""The .params layout: round trips of every dtype, byte-level layout, every refusal."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from ember.errors import SerializationError
from ember.formats.params import (
    NDARRAY_MAGIC,
    PARAMS_LIST_MAGIC,
    load_params,
    save_params,
)

DTYPES = [
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.float16,
    ml_dtypes.bfloat16,
    np.float32,
    np.float64,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype(dtype: type) -> None:
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal((3, 4)) * 50).astype(dtype)
    out = load_params(save_params({"w": arr, "s": arr[0, 0]}))
    assert list(out) == ["s", "w"]
    assert out["w"].dtype == np.dtype(dtype)
    assert out["w"].shape == (3, 4)
    np.testing.assert_array_equal(out["w"], arr)
    assert out["s"].shape == ()
    assert out["w"].flags.writeable


def test_empty_dict_and_zero_size_arrays() -> None:
    assert load_params(save_params({})) == {}
    out = load_params(save_params({"e": np.zeros((0, 5), np.float32)}))
    assert out["e"].shape == (0, 5)


def test_non_contiguous_input_and_ndarray_like() -> None:
    arr = np.arange(12, dtype=np.int32).reshape(3, 4).T

    class Wrapped:
        def numpy(self) -> np.ndarray:
            return arr

    out = load_params(save_params({"a": arr, "b": Wrapped()}))
    np.testing.assert_array_equal(out["a"], arr)
    np.testing.assert_array_equal(out["b"], arr)


def test_deterministic_sorted_names() -> None:
    a = {"b": np.ones(2, np.float32), "a": np.zeros(3, np.int8)}
    b = {"a": np.zeros(3, np.int8), "b": np.ones(2, np.float32)}
    assert save_params(a) == save_params(b)


def test_byte_layout_matches_tvm() -> None:
    blob = save_params({"w": np.array([1.0, 2.0], np.float32)})
    expected = struct.pack("<QQQ", PARAMS_LIST_MAGIC, 0, 1)
    expected += struct.pack("<Q", 1) + b"w"
    expected += struct.pack("<Q", 1)
    expected += struct.pack("<QQiiiBBH", NDARRAY_MAGIC, 0, 1, 0, 1, 2, 32, 1)
    expected += struct.pack("<q", 2) + struct.pack("<q", 8)
    expected += np.array([1.0, 2.0], "<f4").tobytes()
    assert blob == expected


def test_bool_written_as_dlbool_and_read_as_tvm_uint1() -> None:
    blob = bytearray(save_params({"m": np.array([True, False, True])}))
    header = struct.Struct("<QQiiiBBH")
    off = 24 + 8 + 1 + 8
    fields = header.unpack_from(blob, off)
    assert fields[5:] == (6, 8, 1)  # kDLBool, 8 bits, 1 lane
    header.pack_into(blob, off, NDARRAY_MAGIC, 0, 1, 0, 1, 1, 1, 1)  # older TVM: uint1
    out = load_params(bytes(blob))
    np.testing.assert_array_equal(out["m"], [True, False, True])


def test_refuses_unsupported_dtype_on_save() -> None:
    with pytest.raises(SerializationError, match="no ember equivalent"):
        save_params({"c": np.zeros(2, np.complex64)})


def good_blob() -> bytes:
    return save_params({"w": np.arange(6, dtype=np.float32).reshape(2, 3)})


def patched(offset: int, fmt: str, value: int) -> bytes:
    blob = bytearray(good_blob())
    struct.pack_into(fmt, blob, offset, value)
    return bytes(blob)


ARRAY = 24 + 8 + 1 + 8  # list header, name length, "w", array count


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"", "truncated"),
        (b"\x00" * 24, "list magic"),
        (patched(16, "<Q", 1 << 60), "claims"),
        (patched(24, "<Q", 1 << 20), "claims 1048576 bytes"),
        (patched(33, "<Q", 2), "1 names but 2 arrays"),
        (patched(ARRAY, "<Q", 0xDEAD), "magic"),
        (patched(ARRAY + 24, "<i", 40), "ndim 40 is out of range"),
        (patched(ARRAY + 24, "<i", -1), "ndim -1"),
        (patched(ARRAY + 28, "<B", 9), "unsupported DLDataType"),
        (patched(ARRAY + 30, "<H", 4), "lanes=4"),
        (patched(ARRAY + 32, "<q", -2), "negative dimension"),
        (patched(ARRAY + 32, "<q", 1 << 62), "does not match shape"),
        (patched(ARRAY + 48, "<q", 1 << 40), "does not match"),
        (good_blob()[:-1], "truncated"),
        (good_blob() + b"\x00", "trailing"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_refusals(blob: bytes, message: str) -> None:
    with pytest.raises(SerializationError, match=message):
        load_params(blob)


def test_refuses_bad_utf8_and_duplicates_and_non_bytes() -> None:
    blob = bytearray(good_blob())
    blob[32] = 0xFF
    with pytest.raises(SerializationError, match="not UTF-8"):
        load_params(bytes(blob))
    one = save_params({"w": np.zeros(1, np.int8)})
    body = one[24 + 8 + 1 + 8 :]
    names = struct.pack("<QQQ", PARAMS_LIST_MAGIC, 0, 2) + (struct.pack("<Q", 1) + b"w") * 2
    dup = names + struct.pack("<Q", 2) + body * 2
    with pytest.raises(SerializationError, match="twice"):
        load_params(dup)
    with pytest.raises(SerializationError, match="expects bytes"):
        load_params("text")  # type: ignore[arg-type]


def test_string_arrays_round_trip_and_hostile_records_are_refused() -> None:
    text = np.array([["a", "héllo"], ["", "日本"]], dtype=object)
    got = load_params(save_params({"s": text}))["s"]
    assert got.dtype == object and got.tolist() == text.tolist()
    blob = save_params({"s": np.array(["ab"], dtype=object)})
    # the shape claims 2**40 elements over a 10-byte payload: refused before any allocation
    huge = blob.replace(
        struct.pack("<q", 1) + struct.pack("<q", 10),
        struct.pack("<q", 2**40) + struct.pack("<q", 10),
    )
    assert huge != blob
    with pytest.raises(SerializationError, match="do not fit"):
        load_params(huge)
    # two elements claimed, the second's size field cut off
    short = blob.replace(
        struct.pack("<q", 1) + struct.pack("<q", 10), struct.pack("<q", 2) + struct.pack("<q", 10)
    )
    with pytest.raises(SerializationError, match="do not fit|overruns"):
        load_params(short)
