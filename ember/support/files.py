"""Writing files safely: exclusive temporaries in the target directory, renamed into place."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ember.errors import SerializationError


def write_file_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through an O_EXCL temporary in its directory, then rename.

    No link is followed (a symlink planted at a temporary name is never written through),
    and readers never see a half-written file. Errors are SerializationErrors.
    """
    out = Path(path)
    if out.is_dir():
        raise SerializationError(f"cannot write {out}: it is a directory; pass a file path")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as err:
        raise SerializationError(
            f"cannot write {out}: {err.strerror} in {out.parent or '.'}; pick a writable directory"
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as err:
        raise SerializationError(f"cannot write {out}: {err.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
