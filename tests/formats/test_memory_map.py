"""memory_map.json: deterministic round trip, validation of hostile input."""

import pytest

from ember.errors import SerializationError
from ember.formats.memory_map import BufferPlacement, MemoryMap

MM = MemoryMap(8192, 8192, 64, "greedy_by_size", (BufferPlacement(3, "k", 0, 4096, 0, 1),))


def test_round_trip_and_table():
    text = MM.to_json()
    assert MemoryMap.from_json(text) == MM and MM.to_json() == text
    assert "lower bound 8192" in MM.table() and "k (e3)" in MM.table()


@pytest.mark.parametrize(
    "bad",
    [
        "[",
        "[]",
        '{"version": 2}',
        MM.to_json().replace('"offset": 0', '"offset": -1'),
        MM.to_json().replace('"node": "k"', '"node": 5'),
        MM.to_json().replace('"algorithm": "greedy_by_size"', '"algorithm": 1'),
        "[" * 100000,
    ],
)
def test_bad_maps_are_refused(bad):
    with pytest.raises(SerializationError):
        MemoryMap.from_json(bad)
