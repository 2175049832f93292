"""Parameter dictionaries <-> bytes in TVM's ``.params`` binary layout (``save_param_dict``).

Layout, every integer little endian::

    u64  list magic            0xF7E58D4F05049CB7
    u64  reserved              0
    u64  number of names N
    N x  (u64 byte length, UTF-8 bytes)                  the names, sorted
    u64  number of arrays N    (equal to the number of names)
    N x  array, in the order of the names:
         u64  array magic       0xDD5E40F096B4A13F
         u64  reserved          0
         i32  device_type, i32 device_id     (always written as CPU 0)
         i32  ndim
         u8   type code, u8 bits, u16 lanes  (DLDataType; bool is kDLBool/8 bits)
         i64  shape[ndim]
         i64  data byte size
         the data, C order, little endian

An array of at least FILL_MIN_ELEMENTS elements that repeats one short pattern is written
as a *fill* record instead: array magic ``FILL_MAGIC``, the same header and shape, byte
size = the pattern's, the pattern. The pattern is one element (a weight made by
``ConstantOfShape``) or one trailing block of the shape (the last dimension, the last two,
...) repeated at least FILL_MIN_REPEATS times (such a weight after packing padded its rows
with zeros). Its element count divides the array's. Loading materializes it. (TVM's reader
does not know fill records.)

``save_params`` is deterministic (names sorted, nothing time- or host-dependent).
``load_params`` trusts nothing: every length is checked against the bytes that remain, so a
truncated, corrupted or hostile blob raises ``SerializationError`` saying what and where,
never allocates more than the blob could describe (fill records: at most MAX_FILL_BYTES
in all), and never runs code (no pickle).
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import numpy as np

from ember.errors import SerializationError
from ember.formats.dtypes import DLType, dltype_of, dtype_from_dltype, dtype_name, numpy_dtype
from ember.support.dtypes import DL_STRING

PARAMS_LIST_MAGIC = 0xF7E58D4F05049CB7
NDARRAY_MAGIC = 0xDD5E40F096B4A13F
FILL_MAGIC = 0xDD5E40F0F111A13F
#: arrays at least this large whose elements are all equal are written as fill records.
FILL_MIN_ELEMENTS = 4096
#: a pattern longer than one element makes a fill record only if repeated this often.
FILL_MIN_REPEATS = 16
#: the most bytes the fill records of one blob may materialize (4 GiB).
MAX_FILL_BYTES = 1 << 32
MAX_NDIM = 32
MAX_NAME_BYTES = 1 << 16
_CPU_DEVICE_TYPE = 1
_ARRAY_HEADER = struct.Struct("<QQiiiBBH")  # magic, reserved, device, ndim, dtype


def _as_numpy(name: str, value: Any) -> np.ndarray:
    """Turn one parameter value (numpy array, ember NDArray, array-like) into numpy."""
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    arr = np.asarray(value)
    dtype_name(arr.dtype)  # raises SerializationError for unsupported dtypes
    return arr


def save_params(params: Mapping[str, Any]) -> bytes:
    """Serialize ``{name: array}`` to the ``.params`` binary layout (names sorted)."""
    names = sorted(params)
    for name in names:
        if not isinstance(name, str) or not name:
            raise SerializationError(f"parameter names must be non-empty strings, got {name!r}")
    out: list[bytes] = [struct.pack("<QQQ", PARAMS_LIST_MAGIC, 0, len(names))]
    for name in names:
        raw = name.encode("utf-8")
        if len(raw) > MAX_NAME_BYTES:
            raise SerializationError(
                f"parameter name {name[:40]!r}... is {len(raw)} bytes; at most "
                f"{MAX_NAME_BYTES} are allowed"
            )
        out.append(struct.pack("<Q", len(raw)))
        out.append(raw)
    out.append(struct.pack("<Q", len(names)))
    for name in names:
        out.append(_encode_array(name, _as_numpy(name, params[name])))
    return b"".join(out)


def _encode_array(name: str, arr: np.ndarray) -> bytes:
    """One array record: header, shape, byte size, data."""
    if arr.ndim > MAX_NDIM:
        raise SerializationError(
            f"parameter {name!r} has {arr.ndim} dimensions; at most {MAX_NDIM} are allowed"
        )
    dl = dltype_of(dtype_name(arr.dtype))
    if dl.code == DL_STRING:
        return _encode_strings(arr, dl)
    data = np.ascontiguousarray(arr)
    if sys.byteorder != "little" and data.dtype.itemsize > 1:
        data = data.byteswap()
    period = _fill_period(data)
    payload = data.reshape(-1)[:period].tobytes() if period else data.tobytes()
    header = _ARRAY_HEADER.pack(
        FILL_MAGIC if period else NDARRAY_MAGIC,
        *(0, _CPU_DEVICE_TYPE, 0, arr.ndim, dl.code, dl.bits, dl.lanes),
    )
    shape = struct.pack(f"<{arr.ndim}q", *arr.shape)
    return header + shape + struct.pack("<q", len(payload)) + payload


def _encode_strings(arr: np.ndarray, dl: DLType) -> bytes:
    """A string array record: the header, then per element its UTF-8 size (int64) and bytes."""
    flat = arr.reshape(-1).tolist()
    parts = [s if isinstance(s, bytes) else str(s).encode("utf-8", "surrogateescape") for s in flat]
    payload = b"".join(struct.pack("<q", len(b)) + b for b in parts)
    header = _ARRAY_HEADER.pack(
        NDARRAY_MAGIC, *(0, _CPU_DEVICE_TYPE, 0, arr.ndim, dl.code, dl.bits, dl.lanes)
    )
    shape = struct.pack(f"<{arr.ndim}q", *arr.shape)
    return header + shape + struct.pack("<q", len(payload)) + payload


def _decode_strings(data: memoryview, shape: tuple[int, ...], name: str) -> np.ndarray:
    """The object array of str of a string array record's payload."""
    count = math.prod(shape)
    if count * 8 > len(data):  # every element takes at least its 8-byte size: no huge array
        raise SerializationError(
            f"string array {name!r}: {count} elements do not fit in {len(data)} bytes"
        )
    out = np.empty(count, dtype=object)
    pos = 0
    for i in range(out.size):
        if pos + 8 > len(data):
            raise SerializationError(f"string array {name!r}: element {i} overruns the blob")
        (size,) = struct.unpack_from("<q", data, pos)
        if size < 0 or pos + 8 + size > len(data):
            raise SerializationError(f"string array {name!r}: element {i} overruns the blob")
        out[i] = bytes(data[pos + 8 : pos + 8 + size]).decode("utf-8", "surrogateescape")
        pos += 8 + size
    return out.reshape(shape)


def _fill_period(data: np.ndarray) -> int:
    """The element count of the shortest pattern the large C-contiguous ``data`` repeats:
    1 (one value) or a trailing block of its shape repeated FILL_MIN_REPEATS+ times; 0 when
    none. Patterns compare as bytes, in chunks, so the check copies nothing."""
    if data.size < FILL_MIN_ELEMENTS:
        return 0
    tried: set[int] = set()
    for period in (1, *np.cumprod(data.shape[:0:-1], dtype=np.int64).tolist()):
        if period in tried or (period > 1 and period * FILL_MIN_REPEATS > data.size):
            continue
        tried.add(period)
        if _repeats(data, period):
            return int(period)
    return 0


def _repeats(data: np.ndarray, period: int) -> bool:
    """Whether ``data`` is its first ``period`` elements over and over, bit for bit."""
    rows = data.reshape(-1).view(np.uint8).reshape(data.size // period, period * data.itemsize)
    first = rows[0]
    chunk = max(1, (1 << 22) // rows.shape[1])
    return all(bool((rows[i : i + chunk] == first).all()) for i in range(0, len(rows), chunk))


#: Makes the array one parameter is read into: ``alloc(shape, numpy dtype) -> np.ndarray``.
Allocator = Callable[[tuple[int, ...], np.dtype], np.ndarray]


class _Reader:
    """A bounds-checked cursor over a byte string."""

    def __init__(self, blob: bytes | memoryview) -> None:
        self.blob = memoryview(blob)
        self.pos = 0

    def read_into(self, target: memoryview, what: str) -> None:
        """Copy the next ``len(target)`` bytes into ``target``."""
        target[:] = self.take(len(target), what)

    def remaining(self) -> int:
        """Bytes not yet read."""
        return len(self.blob) - self.pos

    def take(self, n: int, what: str) -> memoryview:
        """Read ``n`` bytes or raise naming ``what`` and the offset."""
        if n < 0 or n > self.remaining():
            raise SerializationError(
                f"params blob truncated: {what} at byte {self.pos} needs {n} bytes but only "
                f"{self.remaining()} remain; the file is incomplete or not a .params file"
            )
        view = self.blob[self.pos : self.pos + n]
        self.pos += n
        return view

    def unpack(self, fmt: struct.Struct, what: str) -> tuple[Any, ...]:
        """Read and unpack one struct."""
        return fmt.unpack(self.take(fmt.size, what))


class _FileReader(_Reader):
    """The same cursor over ``size`` bytes of an open binary file, read as needed."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        self.file = file
        self.size = size
        self.pos = 0

    def remaining(self) -> int:
        """Bytes not yet read."""
        return self.size - self.pos

    def take(self, n: int, what: str) -> memoryview:
        """Read ``n`` bytes or raise naming ``what`` and the offset."""
        self._check(n, what)
        data = self.file.read(n)
        if len(data) != n:
            raise SerializationError(f"params file ended early while reading {what}")
        self.pos += n
        return memoryview(data)

    def read_into(self, target: memoryview, what: str) -> None:
        """Read the next ``len(target)`` bytes straight into ``target`` (no copy)."""
        self._check(len(target), what)
        done = 0
        while done < len(target):
            got = self.file.readinto(target[done:])  # type: ignore[attr-defined]
            if not got:
                raise SerializationError(f"params file ended early while reading {what}")
            done += got
        self.pos += done

    def _check(self, n: int, what: str) -> None:
        if n < 0 or n > self.remaining():
            raise SerializationError(
                f"params blob truncated: {what} at byte {self.pos} needs {n} bytes but only "
                f"{self.remaining()} remain; the file is incomplete or not a .params file"
            )


_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")


def load_params(blob: bytes | bytearray | memoryview) -> dict[str, np.ndarray]:
    """Parse a ``.params`` blob into ``{name: numpy array}``; refuses malformed input."""
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise SerializationError(
            f"load_params expects bytes, got {type(blob).__name__}; read the file in binary mode"
        )
    return _parse(_Reader(bytes(blob)), None)


def read_params(file: BinaryIO, size: int, alloc: Allocator) -> dict[str, np.ndarray]:
    """Parse ``size`` bytes of ``.params`` from ``file``, reading each array's data straight
    into ``alloc(shape, dtype)`` (e.g. a view of an aligned NDArray): no second copy."""
    return _parse(_FileReader(file, size), alloc)


def _parse(r: _Reader, alloc: Allocator | None) -> dict[str, np.ndarray]:
    (magic,) = r.unpack(_U64, "list magic")
    if magic != PARAMS_LIST_MAGIC:
        raise SerializationError(
            f"not a .params blob: list magic is {magic:#018x}, expected {PARAMS_LIST_MAGIC:#018x}"
        )
    r.unpack(_U64, "reserved word")
    (num_names,) = r.unpack(_U64, "name count")
    if num_names * 8 > r.remaining():
        raise SerializationError(
            f"params blob claims {num_names} names but only {r.remaining()} bytes remain"
        )
    names: list[str] = []
    for i in range(num_names):
        (length,) = r.unpack(_U64, f"length of name {i}")
        if length > MAX_NAME_BYTES:
            raise SerializationError(
                f"name {i} of the params blob claims {length} bytes; at most {MAX_NAME_BYTES}"
            )
        raw = r.take(length, f"name {i}")
        try:
            names.append(bytes(raw).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise SerializationError(f"name {i} of the params blob is not UTF-8: {exc}") from None
    (num_arrays,) = r.unpack(_U64, "array count")
    if num_arrays != num_names:
        raise SerializationError(
            f"params blob has {num_names} names but {num_arrays} arrays; they must match"
        )
    out: dict[str, np.ndarray] = {}
    budget = [MAX_FILL_BYTES]
    for name in names:
        if name in out:
            raise SerializationError(f"params blob names parameter {name!r} twice")
        out[name] = _decode_array(r, name, alloc, budget)
    if r.remaining():
        raise SerializationError(
            f"params blob has {r.remaining()} trailing bytes after the last array"
        )
    return out


def _decode_array(
    r: _Reader, name: str, alloc: Allocator | None = None, fill_budget: list[int] | None = None
) -> np.ndarray:
    """Read one array record, checking magic, ndim, dtype, shape and byte size; a fill
    record is materialized (``fill_budget[0]``: the bytes fills may still take)."""
    fields = r.unpack(_ARRAY_HEADER, f"header of array {name!r}")
    magic, _reserved, _dev_type, _dev_id, ndim, code, bits, lanes = fields
    if magic not in (NDARRAY_MAGIC, FILL_MAGIC):
        raise SerializationError(
            f"array {name!r}: magic is {magic:#018x}, expected {NDARRAY_MAGIC:#018x}; "
            "the blob is corrupt"
        )
    if not 0 <= ndim <= MAX_NDIM:
        raise SerializationError(
            f"array {name!r}: ndim {ndim} is out of range [0, {MAX_NDIM}]; the blob is corrupt"
        )
    dtype = dtype_from_dltype(DLType(code, bits, lanes), f"array {name!r}")
    shape = struct.unpack(f"<{ndim}q", r.take(8 * ndim, f"shape of array {name!r}"))
    if any(d < 0 for d in shape):
        raise SerializationError(f"array {name!r}: negative dimension in shape {shape}")
    (nbytes,) = r.unpack(_I64, f"byte size of array {name!r}")
    if dtype == "string":
        return _decode_strings(r.take(nbytes, f"data of array {name!r}"), shape, name)
    npdt = numpy_dtype(dtype)
    count = 1
    for d in shape:
        count *= d  # Python ints: a hostile shape cannot overflow
    expected = count * npdt.itemsize
    if magic == FILL_MAGIC:
        budget = fill_budget if fill_budget is not None else [MAX_FILL_BYTES]
        if expected > budget[0]:
            raise SerializationError(
                f"array {name!r}: a fill of {expected} bytes is over what the blob's fills "
                f"may still take ({budget[0]} of MAX_FILL_BYTES = {MAX_FILL_BYTES})"
            )
        budget[0] -= expected
        pattern = nbytes // npdt.itemsize
        if count and nbytes % npdt.itemsize == 0 and pattern > 0 and count % pattern == 0:
            expected = nbytes  # the pattern's elements divide the array's
        else:
            expected = npdt.itemsize if count else 0
    if nbytes != expected:
        raise SerializationError(
            f"array {name!r}: byte size {nbytes} does not match shape {list(shape)} of "
            f"{dtype} ({expected} bytes)"
        )
    if magic == FILL_MAGIC:
        return _fill(r.take(nbytes, f"value of fill {name!r}"), shape, npdt, dtype, alloc)
    if alloc is not None and (sys.byteorder == "little" or npdt.itemsize == 1):
        target = alloc(tuple(shape), npdt)
        raw = target.view(np.uint8) if dtype == "bool" else target
        r.read_into(memoryview(raw).cast("B"), f"data of array {name!r}")  # type: ignore[arg-type]
        if dtype == "bool":
            np.not_equal(raw, 0, out=target)
        return target
    data = r.take(nbytes, f"data of array {name!r}")
    if dtype == "bool":  # any non-zero byte is True, as in C
        return (np.frombuffer(data, dtype=np.uint8) != 0).reshape(shape)
    arr = np.frombuffer(data, dtype=npdt.newbyteorder("<") if npdt.itemsize > 1 else npdt)
    return arr.astype(npdt, copy=True).reshape(shape)


def _fill(
    value: memoryview, shape: tuple[int, ...], npdt: np.dtype, dtype: str, alloc: Allocator | None
) -> np.ndarray:
    """The array of ``shape`` that repeats the pattern stored in ``value`` (one element or
    more; their count divides the array's, checked by the reader)."""
    if dtype == "bool":
        one = np.frombuffer(value, dtype=np.uint8) != 0
    else:
        one = np.frombuffer(value, dtype=npdt.newbyteorder("<") if npdt.itemsize > 1 else npdt)
    target = alloc(shape, npdt) if alloc is not None else np.empty(shape, npdt)
    if one.size <= 1:
        target.fill(one[0] if one.size else 0)
    elif target.flags.c_contiguous:
        target.reshape(-1, one.size)[:] = one
    else:
        np.copyto(target, np.tile(one, target.size // one.size).reshape(shape))
    return target
