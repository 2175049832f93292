"""Deterministic, hostile-input-safe tar files (uncompressed).

Writing: entries sorted by name, regular files only, mode 0644, uid/gid 0, empty owner
names, mtime 0, so the same contents always give the same bytes. Reading: every entry must
be a regular file with a safe relative name (no absolute path, no ``..``, no backslash, no
duplicates); the number of entries and their total size are bounded; nothing is extracted
to disk by this module.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from ember.errors import SerializationError
from ember.support.files import write_file_atomic

MAX_ENTRIES = 100_000
MAX_TOTAL_BYTES = 1 << 34  # 16 GiB
MAX_NAME_CHARS = 1024


def safe_member_name(name: str, where: str) -> str:
    """Return ``name`` if it is a safe relative POSIX path, else raise SerializationError."""
    path = PurePosixPath(name)
    bad = (
        not name
        or len(name) > MAX_NAME_CHARS
        or "\\" in name
        or "\x00" in name
        or path.is_absolute()
        or any(part in ("..", "") for part in name.split("/"))
    )
    if bad:
        raise SerializationError(f"{where}: unsafe entry name {name!r} (must be a relative path)")
    return str(path)


def tar_bytes(files: Mapping[str, bytes]) -> bytes:
    """The deterministic tar archive of ``files`` (name -> content)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(safe_member_name(name, "tar_bytes"))
            info.size = len(data)
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_tar(path: str | os.PathLike[str], files: Mapping[str, bytes]) -> Path:
    """Write the deterministic archive of ``files`` to ``path`` atomically and exclusively."""
    return write_file_atomic(path, tar_bytes(files))


def read_tar(
    path: str | os.PathLike[str],
    max_entries: int = MAX_ENTRIES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
) -> dict[str, bytes]:
    """Read every entry of a tar archive into memory, refusing anything unsafe.

    Sparse members are refused, and the declared sizes may add up to no more than the
    archive's own size (an uncompressed tar stores every byte) nor ``max_total_bytes``.
    """
    where = str(path)
    files: dict[str, bytes] = {}
    total = 0
    try:
        st = os.stat(path)
    except OSError as err:
        raise SerializationError(f"{where}: cannot read the archive: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SerializationError(
            f"{where}: not a regular file (a FIFO, device or directory is refused); pass a tar file"
        )
    max_total_bytes = min(max_total_bytes, st.st_size)
    try:
        with tarfile.open(path, mode="r:") as tar:
            for count, member in enumerate(tar, start=1):
                if count > max_entries:
                    raise SerializationError(f"{where}: more than {max_entries} entries")
                name = safe_member_name(member.name, where)
                if member.isdir():
                    continue
                if member.issparse():
                    raise SerializationError(
                        f"{where}: entry {name!r} is a sparse file; ember archives hold "
                        "plain files only"
                    )
                if not member.isreg():
                    raise SerializationError(
                        f"{where}: entry {name!r} is not a regular file (links and devices "
                        "are refused)"
                    )
                if name in files:
                    raise SerializationError(f"{where}: duplicate entry {name!r}")
                total += member.size
                if total > max_total_bytes:
                    raise SerializationError(
                        f"{where}: entries exceed {max_total_bytes} bytes (the archive size "
                        "or the limit max_total_bytes); refusing to read"
                    )
                handle = tar.extractfile(member)
                data = handle.read() if handle is not None else b""
                if len(data) != member.size:
                    raise SerializationError(f"{where}: entry {name!r} is truncated")
                files[name] = data
    except SerializationError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, RecursionError) as exc:
        raise SerializationError(f"{where}: not a readable tar archive: {exc}") from None
    return files
