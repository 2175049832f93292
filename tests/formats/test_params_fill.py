"""Fill records of the .params layout: a large array of one repeated value is stored as
that value and materialized at load, bit for bit; a hostile fill is refused."""

from __future__ import annotations

import io
import struct
import sys

import numpy as np
import pytest

from ember.errors import SerializationError
from ember.formats.params import (
    FILL_MAGIC,
    FILL_MIN_ELEMENTS,
    NDARRAY_MAGIC,
    load_params,
    read_params,
    save_params,
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.bool_, np.float16])
def test_fills_are_compact_and_round_trip(dtype: type) -> None:
    value = np.asarray(0.02 if np.dtype(dtype).kind == "f" else 1).astype(dtype)
    big = np.full((64, 32, 3, 3), value, dtype)
    blob = save_params({"w": big, "small": np.full(8, value, dtype)})
    assert len(blob) < 400  # 18432 elements stored as one
    assert struct.pack("<Q", FILL_MAGIC) in blob and struct.pack("<Q", NDARRAY_MAGIC) in blob
    back = load_params(blob)
    assert back["w"].dtype == big.dtype and back["w"].shape == big.shape
    np.testing.assert_array_equal(back["w"], big)
    into = read_params(io.BytesIO(blob), len(blob), lambda shape, dt: np.zeros(shape, dt))
    np.testing.assert_array_equal(into["w"], big)


def test_only_bitwise_equal_values_make_a_fill() -> None:
    mixed = np.zeros(FILL_MIN_ELEMENTS, np.float32)
    mixed[-1] = -0.0  # equal as numbers, different bits
    nan = np.full(FILL_MIN_ELEMENTS, np.nan, np.float32)
    blob = save_params({"mixed": mixed, "nan": nan})
    assert struct.pack("<Q", FILL_MAGIC) in blob  # the NaNs share their bits
    assert len(blob) > FILL_MIN_ELEMENTS * 4  # -0.0 kept the mixed one whole
    back = load_params(blob)
    assert np.signbit(back["mixed"][-1]) and not np.signbit(back["mixed"][0])
    assert np.isnan(back["nan"]).all()


def test_refuses_a_fill_over_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    blob = save_params({"w": np.ones((128, 128), np.float32)})
    module = sys.modules["ember.formats.params"]
    monkeypatch.setattr(module, "MAX_FILL_BYTES", 128 * 128 * 4 - 1)
    with pytest.raises(SerializationError, match="MAX_FILL_BYTES"):
        load_params(blob)
    hostile = blob.replace(struct.pack("<qq", 128, 128), struct.pack("<qq", 1 << 40, 1 << 20))
    monkeypatch.setattr(module, "MAX_FILL_BYTES", 1 << 32)
    with pytest.raises(SerializationError, match="fill of"):
        load_params(hostile)


def test_a_repeated_row_is_one_fill_record() -> None:
    # a filled weight whose packing padded every row with zeros: the row is the pattern
    padded = np.zeros((4096, 1008), np.float32)
    padded[:, :1000] = 0.125
    blob = save_params({"w": padded})
    assert len(blob) < 1008 * 4 + 400 and struct.pack("<Q", FILL_MAGIC) in blob
    np.testing.assert_array_equal(load_params(blob)["w"], padded)
    into = read_params(io.BytesIO(blob), len(blob), lambda shape, dt: np.zeros(shape, dt))
    np.testing.assert_array_equal(into["w"], padded)
    padded[7, 3] = 1.0  # one row differs: stored whole
    assert len(save_params({"w": padded})) > padded.nbytes


def test_a_pattern_must_divide_the_array() -> None:
    blob = save_params({"w": np.tile(np.arange(256, dtype=np.float32), (64, 1))})
    assert struct.pack("<q", 256 * 4) in blob  # one 256-element pattern
    np.testing.assert_array_equal(load_params(blob)["w"], np.tile(np.arange(256), (64, 1)))
    hostile = blob.replace(struct.pack("<q", 256 * 4), struct.pack("<q", 255 * 4))
    with pytest.raises(SerializationError, match="byte size"):
        load_params(hostile[: len(hostile) - 4])
