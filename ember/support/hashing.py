"""Hashing: stable content hashes for cache keys and artifact names (sha256, hex)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def hash_bytes(*parts: bytes, length: int = 16) -> str:
    """Hex sha256 of the parts, each length-prefixed so that boundaries matter."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:length]


def hash_strings(parts: Iterable[str], length: int = 16) -> str:
    """Hex sha256 of UTF-8 strings, boundary-sensitive like :func:`hash_bytes`."""
    return hash_bytes(*(p.encode("utf-8") for p in parts), length=length)


def hash_files(paths: Iterable[str | Path], length: int = 16) -> str:
    """Hex sha256 over the contents of files (names do not enter the hash)."""
    return hash_bytes(*(Path(p).read_bytes() for p in paths), length=length)
