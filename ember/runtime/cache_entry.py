"""Verified cache entries: a built file is trusted only while it matches the hash recorded for it.

Every build product ember loads from ``<cache_dir>`` (the C runtime, linked native
artifacts, the FFI extension) goes through :func:`cached_build`. After a build the
sha256 of the file is written next to it (``<file>.sha256``); before a later load the file
is hashed again and compared. A missing record, a mismatch (truncated, patched or planted
file), a file owned by another user or writable by others, or a non-regular file is
rebuilt instead of loaded. The cache directory itself is checked by :func:`cache_root`.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from ember.config import config
from ember.errors import EmberValueError

#: Suffix of the file that records the sha256 of a cache entry.
HASH_SUFFIX = ".sha256"
_CHUNK = 1 << 20


def cache_root() -> Path:
    """The configured cache directory, checked: absolute, and a directory if it exists."""
    root = config().cache_dir
    if not root.is_absolute():
        raise EmberValueError(
            f"the ember cache directory {str(root)!r} is not an absolute path; set "
            "EMBER_CACHE_DIR to an absolute directory (for example ~/.cache/ember)"
        )
    if root.exists() and not root.is_dir():
        raise EmberValueError(
            f"the ember cache directory {root} exists but is not a directory; remove it or "
            "set EMBER_CACHE_DIR to a directory"
        )
    return root


def cache_subdir(name: str) -> Path:
    """``<cache_dir>/<name>``, created private (0700) if missing; a clear error if unusable."""
    path = cache_root() / name
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except (FileExistsError, NotADirectoryError):
        raise EmberValueError(
            f"the ember cache path {path} is not a directory; remove it or set "
            "EMBER_CACHE_DIR to another directory"
        ) from None
    except OSError as err:
        raise EmberValueError(
            f"cannot create the ember cache directory {path}: {err.strerror}; set "
            "EMBER_CACHE_DIR to a writable directory"
        ) from None
    if not path.is_dir():
        raise EmberValueError(f"the ember cache path {path} is not a directory; remove it")
    return path


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file's content, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _trusted_file(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False  # a symlink, FIFO or device is never a cache entry
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def verify_entry(path: Path) -> bool:
    """Whether ``path`` is a regular file of ours whose content matches its recorded hash."""
    record = path.with_name(path.name + HASH_SUFFIX)
    if not (_trusted_file(path) and _trusted_file(record)):
        return False
    try:
        expected = record.read_text(encoding="ascii").strip()
        return expected == file_sha256(path)
    except (OSError, UnicodeDecodeError):
        return False


def record_entry(path: Path, digest: str | None = None) -> None:
    """Write the hash of ``path`` (``digest`` when the caller hashed it already) next to
    it, atomically."""
    record = path.with_name(path.name + HASH_SUFFIX)
    digest = digest if digest is not None else file_sha256(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{record.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(digest + "\n")
        os.replace(tmp, record)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cached_build(output: Path, build: Callable[[Path], object]) -> Path:
    """``output`` if it is a verified entry; otherwise ``build`` it, record it, return it.

    The build writes into a private directory next to ``output`` and its file is renamed
    over the entry, so processes building the same entry at once never delete or read each
    other's half-made files (one that found an entry without its record yet used to delete
    it under the process about to record it). A stale, planted or linked entry is replaced
    by the rename, never built or written through."""
    if verify_entry(output):
        return output
    if output.is_dir() and not output.is_symlink():
        raise EmberValueError(f"the ember cache entry {output} is a directory; remove it")
    with tempfile.TemporaryDirectory(prefix=f".{output.name}.", dir=output.parent) as tmp:
        staged = Path(tmp) / output.name
        build(staged)
        digest = file_sha256(staged)
        os.replace(staged, output)
    record_entry(output, digest)
    return output
