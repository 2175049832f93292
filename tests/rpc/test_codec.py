"""The RPC value codec: round trips, and malformed bytes refused with ProtocolError only."""

from __future__ import annotations

import contextlib
import random
import struct

import numpy as np
import pytest

import ember
from ember.errors import RPCError
from ember.executor.profile import ProfileReport, ProfileRow
from ember.rpc.codec import MAX_DEPTH, ProtocolError, Tag, decode, encode
from ember.runtime.time_evaluator import BenchmarkResult

VALUES = [
    None,
    True,
    False,
    0,
    -(2**63),
    2**63 - 1,
    1.5,
    float("inf"),
    "",
    "naïve ✓",
    b"\x00\xff",
    [1, [2, (3, "x")]],
    (),
    {"a": 1, 2: [None]},
    ember.cpu(3),
    ember.runtime.dtype("int8"),
    BenchmarkResult((1.0, 2.0)),
    ProfileReport((ProfileRow(0, "n", "op", 1.5, 100.0, ((2, 1),), "float32"),), 3),
]


@pytest.mark.parametrize("value", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_values_round_trip(value: object) -> None:
    assert decode(encode(value)) == value


def test_tensors_round_trip_with_dtype_and_shape() -> None:
    for arr in (
        np.arange(12, dtype="float32").reshape(3, 4),
        np.zeros((0, 2), "int64"),
        np.array(True),
        np.arange(6, dtype=">i4"),
    ):
        out = decode(encode(arr))
        assert out.shape == arr.shape and np.array_equal(out, arr)
        assert out.dtype == arr.dtype.newbyteorder("<")


def test_local_ndarray_travels_by_value() -> None:
    out = decode(encode(ember.nd.array(np.ones((2, 2), "float32"))))
    assert isinstance(out, np.ndarray) and out.sum() == 4


def test_unsendable_values_name_their_type() -> None:
    with pytest.raises(RPCError, match="a object cannot be sent"):
        encode(object())
    with pytest.raises(RPCError, match="64 bits"):
        encode(2**64)


def test_nesting_is_limited_both_ways() -> None:
    deep: list[object] = []
    for _ in range(MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(RPCError, match="nests deeper"):
        encode(deep)
    raw = bytes([Tag.LIST]) + struct.pack("<I", 1)
    with pytest.raises(ProtocolError, match="nests deeper"):
        decode(raw * (MAX_DEPTH + 2) + bytes([Tag.NONE]))


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        bytes([99]),
        bytes([Tag.INT]) + b"\x00" * 3,
        bytes([Tag.STR]) + struct.pack("<I", 10) + b"abc",
        bytes([Tag.STR]) + struct.pack("<I", 2) + b"\xff\xfe",
        bytes([Tag.LIST]) + struct.pack("<I", 2**32 - 1),
        bytes([Tag.DICT])
        + struct.pack("<I", 1)
        + bytes([Tag.LIST])
        + struct.pack("<I", 0)
        + bytes([Tag.NONE]),
        bytes([Tag.TENSOR])
        + struct.pack("<I", 7)
        + b"float32"
        + bytes([1])
        + struct.pack("<q", 2**40)
        + struct.pack("<Q", 4),
        bytes([Tag.TENSOR]) + struct.pack("<I", 4) + b"nope" + bytes([0]) + struct.pack("<Q", 0),
        bytes([Tag.REF, 1]) + struct.pack("<Q", 5) + bytes([Tag.NONE]),
        bytes([Tag.RECORD])
        + struct.pack("<I", 4)
        + b"Evil"
        + bytes([Tag.DICT])
        + struct.pack("<I", 0),
        bytes([Tag.OBJECT]) + struct.pack("<I", 2) + b"{}",
        bytes([Tag.NONE, Tag.NONE]),
    ],
)
def test_malformed_bytes_raise_protocol_error(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode(raw)


def test_random_mutations_never_escape_as_other_errors() -> None:
    rng = random.Random(14)
    seeds = [encode(v) for v in VALUES] + [encode(np.arange(8, dtype="float32"))]
    for _ in range(3000):
        raw = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            pos = rng.randrange(len(raw) + 1)
            if op < 0.4 and raw:
                raw[min(pos, len(raw) - 1)] = rng.randrange(256)
            elif op < 0.7:
                del raw[pos:]
            else:
                raw[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        with contextlib.suppress(ProtocolError):
            decode(bytes(raw))
