"""The artifact blob: round trip, determinism and refusal of every kind of bad input."""

from __future__ import annotations

import struct

import pytest

from ember.errors import ArtifactError, SerializationError
from ember.runtime.artifact import Artifact
from ember.runtime.blob import (
    BLOB_FORMAT_VERSION,
    BLOB_MAGIC,
    MAX_CONTENT_BYTES,
    pack_artifacts,
    unpack_artifacts,
)

ARTS = [
    Artifact("ext", "json_loader", "graph.json", b'{"nodes": []}', {"format": "json", "n": 3}),
    Artifact("exec", "metadata", "meta.bin", bytes(range(256)) * 4),
    Artifact("empty", "x", "nothing", b""),
]


def u64(value: int) -> bytes:
    return struct.pack("<Q", value)


def test_round_trip() -> None:
    data = pack_artifacts(ARTS)
    assert data.startswith(BLOB_MAGIC + u64(BLOB_FORMAT_VERSION) + u64(3))
    assert unpack_artifacts(data) == ARTS
    assert unpack_artifacts(pack_artifacts([])) == []


def test_deterministic() -> None:
    assert pack_artifacts(ARTS) == pack_artifacts(list(ARTS))


def test_layout_is_length_prefixed_fields() -> None:
    data = pack_artifacts(ARTS[:1])
    pos = 24
    fields = []
    for _ in range(6):
        (n,) = struct.unpack_from("<Q", data, pos)
        fields.append(data[pos + 8 : pos + 8 + n])
        pos += 8 + n
    assert pos == len(data)
    assert fields[:3] == [b"ext", b"json_loader", b"graph.json"]
    assert fields[3] == b'{"format":"json","n":3}'
    assert fields[4] == ARTS[0].sha256.encode()
    assert fields[5] == ARTS[0].content


def test_wrong_magic() -> None:
    with pytest.raises(SerializationError, match="magic"):
        unpack_artifacts(b"NOTABLOB" + pack_artifacts(ARTS)[8:])


def test_wrong_version() -> None:
    data = bytearray(pack_artifacts(ARTS))
    data[8:16] = u64(BLOB_FORMAT_VERSION + 1)
    with pytest.raises(SerializationError, match=f"format version {BLOB_FORMAT_VERSION + 1}"):
        unpack_artifacts(bytes(data))


@pytest.mark.parametrize("cut", [0, 5, 12, 20, 30, 60, -1])
def test_truncated(cut: int) -> None:
    data = pack_artifacts(ARTS)
    with pytest.raises(SerializationError, match="corrupt artifact blob|needs"):
        unpack_artifacts(data[:cut])


def test_trailing_bytes() -> None:
    with pytest.raises(SerializationError, match="unexpected bytes"):
        unpack_artifacts(pack_artifacts(ARTS) + b"\0")


def test_oversized_count() -> None:
    data = bytearray(pack_artifacts(ARTS))
    data[16:24] = u64(1 << 40)
    with pytest.raises(SerializationError, match="artifact count"):
        unpack_artifacts(bytes(data))


def test_oversized_field_length() -> None:
    # A name field claiming more than its maximum is refused before any allocation.
    data = bytearray(pack_artifacts(ARTS))
    data[24:32] = u64(1 << 20)
    with pytest.raises(SerializationError, match="codegen_id claims"):
        unpack_artifacts(bytes(data))


def test_content_length_beyond_the_maximum() -> None:
    blob = BLOB_MAGIC + u64(BLOB_FORMAT_VERSION) + u64(1)
    for value in (b"a", b"b", b"c", b"{}", b"0" * 64):
        blob += u64(len(value)) + value
    blob += u64(MAX_CONTENT_BYTES + 1)
    with pytest.raises(SerializationError, match="content claims"):
        unpack_artifacts(blob)


def test_content_length_beyond_the_data() -> None:
    blob = BLOB_MAGIC + u64(BLOB_FORMAT_VERSION) + u64(1)
    for value in (b"a", b"b", b"c", b"{}", b"0" * 64):
        blob += u64(len(value)) + value
    blob += u64(1 << 30) + b"short"
    with pytest.raises(SerializationError, match="only 5 remain"):
        unpack_artifacts(blob)


def test_corrupted_content_fails_its_hash() -> None:
    data = bytearray(pack_artifacts(ARTS))
    data[data.find(bytes(range(256))) + 10] ^= 0xFF
    with pytest.raises(ArtifactError, match="recorded sha256"):
        unpack_artifacts(bytes(data))


def test_bad_metadata_json() -> None:
    good = pack_artifacts(ARTS[:1])
    bad = good.replace(b'{"format":"json","n":3}', b'{"format":"json","n":3]')
    with pytest.raises(SerializationError, match="undecodable"):
        unpack_artifacts(bad)


def test_hostile_file_name_is_refused() -> None:
    good = pack_artifacts(ARTS[:1])
    bad = good.replace(b"graph.json", b"../x.json!")
    with pytest.raises(ArtifactError, match="file name"):
        unpack_artifacts(bad)


def test_only_plain_artifacts() -> None:
    with pytest.raises(ArtifactError, match="plain-data"):
        pack_artifacts(["x"])  # type: ignore[list-item]
