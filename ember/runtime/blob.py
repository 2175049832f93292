"""The artifact blob: a versioned, length-prefixed byte string holding a list of Artifacts.

An exported library embeds its non-native artifacts as one blob under the symbol
``__ember_dev_mblob``. Layout (all integers u64 little-endian)::

    +----------+---------+-------+-----------------------------------------------+
    | magic(8) | version | count | count x record                                |
    +----------+---------+-------+-----------------------------------------------+
    record = 6 x (u64 length, bytes):
             codegen_id | loader | file_name | metadata JSON | sha256 hex | content

Nothing may follow the last record. The reader bounds every length by the bytes that
remain and by a per-field maximum, checks the version and each content's sha256, and
raises :class:`~ember.errors.SerializationError` (or ArtifactError for a hash mismatch).

Example::

    data = pack_artifacts([art])
    assert unpack_artifacts(data) == [art]
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Sequence

from ember.errors import ArtifactError, SerializationError
from ember.runtime.artifact import Artifact
from ember.runtime.elf import ElfFile

#: The first 8 bytes of every blob.
BLOB_MAGIC = b"EMBRBLOB"
#: The blob layout version written by :func:`pack_artifacts`.
BLOB_FORMAT_VERSION = 1
#: The symbol under which an exported library embeds its blob.
BLOB_SYMBOL = "__ember_dev_mblob"

MAX_BLOB_ARTIFACTS = 1 << 16
MAX_NAME_FIELD_BYTES = 1 << 12
MAX_METADATA_FIELD_BYTES = 1 << 20
MAX_CONTENT_BYTES = 1 << 34

_U64 = struct.Struct("<Q")
_FIELDS = ("codegen_id", "loader", "file_name", "metadata", "sha256", "content")
_FIELD_MAX = {
    "codegen_id": MAX_NAME_FIELD_BYTES,
    "loader": MAX_NAME_FIELD_BYTES,
    "file_name": MAX_NAME_FIELD_BYTES,
    "metadata": MAX_METADATA_FIELD_BYTES,
    "sha256": 64,
    "content": MAX_CONTENT_BYTES,
}
# The smallest possible record: six empty length-prefixed fields.
_MIN_RECORD_BYTES = len(_FIELDS) * _U64.size


def _metadata_json(art: Artifact) -> bytes:
    return json.dumps(dict(art.metadata), sort_keys=True, separators=(",", ":")).encode()


def pack_artifacts(artifacts: Sequence[Artifact]) -> bytes:
    """Serialize ``artifacts`` (in order) into one blob; deterministic for equal input."""
    parts = [BLOB_MAGIC, _U64.pack(BLOB_FORMAT_VERSION), _U64.pack(len(artifacts))]
    for art in artifacts:
        if not isinstance(art, Artifact):
            raise ArtifactError(f"only plain-data Artifacts can be packed into a blob, got {art!r}")
        fields = (
            art.codegen_id.encode(),
            art.loader.encode(),
            art.file_name.encode(),
            _metadata_json(art),
            art.sha256.encode(),
            art.content,
        )
        for value in fields:
            parts.append(_U64.pack(len(value)))
            parts.append(value)
    return b"".join(parts)


class _Reader:
    """A bounds-checked cursor over blob bytes; every error names ``where``."""

    def __init__(self, data: bytes | memoryview, where: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.where = where

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def fail(self, what: str) -> SerializationError:
        return SerializationError(
            f"corrupt artifact blob in {self.where} at byte {self.pos}: {what}; "
            "re-export the library with this ember"
        )

    def take(self, n: int, what: str) -> memoryview:
        if n > self.remaining():
            raise self.fail(f"{what} needs {n} bytes but only {self.remaining()} remain")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u64(self, what: str) -> int:
        value: int = _U64.unpack(self.take(_U64.size, what))[0]
        return value

    def field(self, name: str) -> bytes:
        length = self.u64(f"the length of {name}")
        limit = _FIELD_MAX[name]
        if length > limit:
            raise self.fail(f"{name} claims {length} bytes, more than the maximum {limit}")
        return bytes(self.take(length, name))


def unpack_artifacts(data: bytes | memoryview, where: str = "<bytes>") -> list[Artifact]:
    """Parse a blob back into Artifacts, refusing anything corrupt, truncated or foreign."""
    reader = _Reader(data, where)
    magic = bytes(reader.take(len(BLOB_MAGIC), "the magic bytes"))
    if magic != BLOB_MAGIC:
        raise reader.fail(f"magic is {magic!r}, expected {BLOB_MAGIC!r}")
    version = reader.u64("the format version")
    if version != BLOB_FORMAT_VERSION:
        raise SerializationError(
            f"artifact blob in {where} has format version {version}; this ember reads "
            f"version {BLOB_FORMAT_VERSION} (re-export the library with this ember)"
        )
    count = reader.u64("the artifact count")
    if count > MAX_BLOB_ARTIFACTS or count * _MIN_RECORD_BYTES > reader.remaining():
        raise reader.fail(f"artifact count {count} does not fit in the remaining bytes")
    artifacts = []
    for index in range(count):
        raw = {name: reader.field(name) for name in _FIELDS}
        try:
            metadata = json.loads(raw["metadata"].decode("utf-8"))
            names = [raw[n].decode("utf-8") for n in ("codegen_id", "loader", "file_name")]
            sha = raw["sha256"].decode("ascii")
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise reader.fail(f"record {index} has an undecodable field ({err})") from None
        if not isinstance(metadata, dict):
            raise reader.fail(f"record {index} metadata is not a JSON object")
        art = Artifact(names[0], names[1], names[2], raw["content"], metadata)
        if hashlib.sha256(art.content).hexdigest() != sha:
            raise ArtifactError(
                f"artifact {art.codegen_id}/{art.file_name} in {where} does not match its "
                f"recorded sha256 ({sha[:16]}...); the library is corrupted, re-export it"
            )
        artifacts.append(art)
    if reader.remaining():
        raise reader.fail(f"{reader.remaining()} unexpected bytes after the last record")
    return artifacts


def read_library_blob(data: bytes, where: str) -> list[Artifact] | None:
    """The artifacts embedded in a shared library's bytes, or None when it holds no blob.

    The library is parsed as ELF (not loaded), so a corrupt file is refused before any of
    its code could run.
    """
    blob = ElfFile(data, where).symbol_bytes(BLOB_SYMBOL)
    if blob is None:
        return None
    return unpack_artifacts(blob, where)
