"""String tensors in host memory: numpy text arrays <-> 16-byte records, and the run arena.

An ember ``string`` element is an ``EmberString {const char* data; int64_t size}`` record
(``ember.support.dtypes.STRING_RECORD``) pointing at NUL-terminated UTF-8 bytes. The bytes
of strings given by the caller (inputs, constants) live in a blob that the NDArray holding
the records keeps alive; the bytes kernels make come from a :class:`StringArena` that the
executor makes current for the run (docs/strings.md). Example::

    records, blob = encode(np.array(["a", "bc"], dtype=object))
    decode(records)      # array(['a', 'bc'], dtype=object)
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ember.errors import EmberTypeError, FFIError, OpNotSupportedError
from ember.runtime import c_api
from ember.support.dtypes import STRING_RECORD


def _as_bytes(item: object, index: int) -> bytes:
    if isinstance(item, str):
        return item.encode("utf-8", "surrogateescape")
    if isinstance(item, bytes | np.bytes_):
        return bytes(item)
    raise EmberTypeError(
        f"string tensor element {index} is a {type(item).__name__} ({item!r:.40}), not a str; "
        "pass a numpy array of str (dtype object, 'U' or 'S')"
    )


def encode(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(records, blob): the ``STRING_RECORD`` array for the text array ``values`` and the
    uint8 blob holding its NUL-terminated UTF-8 bytes (keep the blob alive with the records)."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype.kind not in "OUS":
        raise EmberTypeError(
            f"a string tensor needs a numpy array of str (dtype object, 'U' or 'S'), got dtype "
            f"{arr.dtype}; convert with x.astype(object)"
        )
    flat = [_as_bytes(item, i) for i, item in enumerate(arr.reshape(-1).tolist())]
    sizes = np.array([len(b) for b in flat], dtype=np.int64)
    blob = np.frombuffer(b"".join(b + b"\0" for b in flat) or b"\0", dtype=np.uint8).copy()
    offsets = np.concatenate(([0], np.cumsum(sizes + 1)[:-1])).astype(np.uint64)
    records = np.zeros(arr.shape, dtype=STRING_RECORD)
    flat_records = records.reshape(-1)
    flat_records["data"] = offsets[: len(flat)] + np.uint64(blob.ctypes.data)
    flat_records["size"] = sizes
    return records, blob


def decode(records: np.ndarray) -> np.ndarray:
    """The numpy object array of str that the ``STRING_RECORD`` array ``records`` points at."""
    flat = records.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    pairs = zip(flat["data"].tolist(), flat["size"].tolist(), strict=True)
    for i, (data, size) in enumerate(pairs):
        raw = ctypes.string_at(data, size) if data and size > 0 else b""
        out[i] = raw.decode("utf-8", "surrogateescape")
    return out.reshape(records.shape)


class StringArena:
    """The memory of the strings kernels make during one run (reset at the next run)."""

    def __init__(self) -> None:
        self._lib = c_api.lib()
        handle = self._lib.EmberStringArenaCreate()
        if not handle:
            raise FFIError(c_api.last_error() or "EmberStringArenaCreate failed")
        self._handle: int | None = handle

    @property
    def nbytes(self) -> int:
        """Bytes the arena holds (its chunks), kept across resets for reuse."""
        return int(self._lib.EmberStringArenaBytes(self._handle)) if self._handle else 0

    @contextmanager
    def run(self) -> Iterator[None]:
        """Reset the arena and make it this thread's current one for the block."""
        self._lib.EmberStringArenaReset(self._handle)
        previous = self._lib.EmberStringArenaSwap(self._handle)
        try:
            yield
        finally:
            self._lib.EmberStringArenaSwap(previous)

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._lib.EmberStringArenaFree(handle)


#: the C functions of the string ops (src/string_kernels.h) and the ONNX ops that call them.
STRING_KERNELS: dict[str, str] = {
    "ember_str_equal": "Equal",
    "ember_str_concat": "StringConcat",
    "ember_str_regex_full_match": "RegexFullMatch",
    "ember_str_change_case": "StringNormalizer",
    "ember_str_label_encode": "LabelEncoder",
}


def check_no_strings(sources: Iterable[bytes], dtypes: Iterable[str], what: str) -> None:
    """OpNotSupportedError naming the string ops, for a runtime with no string support
    (the standalone, no-heap runtime of Model Library Format and Cortex-M)."""
    text = b"\n".join(sources)
    ops = sorted({op for fn, op in STRING_KERNELS.items() if fn.encode() in text})
    if ops or "string" in set(dtypes):
        uses = ", ".join(ops) or "string inputs or outputs"
        raise OpNotSupportedError(
            f"{what}: the model uses string tensors ({uses}), which need the hosted runtime's "
            "string arena; the standalone runtime "
            "has none (docs/strings.md): load the build with ember (executor 'graph' or 'aot', "
            "interface 'packed') instead"
        )
