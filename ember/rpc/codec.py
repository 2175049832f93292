"""The RPC value codec: Python values <-> tagged little-endian bytes (never pickle).

Every value is one tag byte followed by its payload (layout in docs/rpc.md)::

    NONE | FALSE | TRUE | INT i64 | FLOAT f64 | STR u32+utf8 | BYTES u32+raw
    LIST/TUPLE u32 n + n values | DICT u32 n + n (key, value) pairs
    TENSOR str dtype, u8 ndim, ndim x i64 shape, u64 nbytes + raw C-order data
    DEVICE i32 type, i32 id | DTYPE str | REF u8 kind, u64 id, value meta
    OBJECT str (ember object JSON) | RECORD str name + DICT of fields (allow-listed types)

Objects that live on the other side (modules, functions, arrays) travel as REFs; the two
sides say how to make and resolve them through :class:`RefHooks`. Decoding checks every
length against the bytes left and limits nesting, so a malformed payload raises
:class:`ProtocolError` instead of allocating or recursing without bound.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Callable
from enum import IntEnum
from typing import Any

import numpy as np

from ember.errors import RPCError
from ember.executor.profile import ProfileReport, ProfileRow
from ember.runtime.device import Device
from ember.runtime.dtype import DataType
from ember.runtime.dtype import dtype as as_dtype
from ember.runtime.ndarray import NDArray
from ember.runtime.object import is_registered_object
from ember.runtime.object_json import load_json, save_json
from ember.runtime.time_evaluator import BenchmarkResult

MAX_DEPTH = 32


class ProtocolError(RPCError):
    """A peer sent bytes that are not a valid frame, message or value."""


class Tag(IntEnum):
    """The type tag that starts every encoded value."""

    NONE = 0
    FALSE = 1
    TRUE = 2
    INT = 3
    FLOAT = 4
    STR = 5
    BYTES = 6
    LIST = 7
    TUPLE = 8
    DICT = 9
    TENSOR = 10
    DEVICE = 11
    DTYPE = 12
    REF = 13
    OBJECT = 14
    RECORD = 15


class RefKind(IntEnum):
    """What a REF names on the peer."""

    MODULE = 1
    FUNC = 2
    NDARRAY = 3


#: Plain dataclasses that may cross as RECORDs, by name (decoding builds only these).
RECORD_TYPES: dict[str, type] = {
    "ProfileReport": ProfileReport,
    "ProfileRow": ProfileRow,
    "BenchmarkResult": BenchmarkResult,
}


@dataclasses.dataclass
class RefHooks:
    """How one side turns its objects into REFs and REFs back into objects."""

    #: ``obj -> (kind, id, meta)`` for objects that stay on this side, else None.
    to_ref: Callable[[Any], tuple[RefKind, int, Any] | None] = lambda obj: None
    #: ``(kind, id, meta) -> obj`` for a REF received from the peer.
    from_ref: Callable[[RefKind, int, Any], Any] | None = None
    #: ``device -> device`` applied to every decoded DEVICE.
    device: Callable[[Device], Device] = lambda dev: dev


_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_DEV = struct.Struct("<ii")
_REF = struct.Struct("<BQ")
_PLAIN = (int, str, type(None))
_INT_TAG = bytes([Tag.INT])
_STR_TAG = bytes([Tag.STR])
_NONE_TAG = bytes([Tag.NONE])


def encode(value: Any, hooks: RefHooks | None = None) -> bytes:
    """The bytes of ``value``; raises RPCError naming a type that cannot cross."""
    return b"".join(encode_parts(value, hooks))


def encode_parts(value: Any, hooks: RefHooks | None = None) -> list[bytes]:
    """The bytes of ``value`` as a list of pieces (large buffers are not copied)."""
    out: list[bytes] = []
    _Encoder(hooks or RefHooks(), out).value(value, 0)
    return out


class _Encoder:
    def __init__(self, hooks: RefHooks, out: list[bytes]) -> None:
        self.hooks = hooks
        self.out = out

    def str_(self, s: str) -> None:
        data = s.encode("utf-8")
        self.out += [_U32.pack(len(data)), data]

    def value(self, v: Any, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise RPCError(f"rpc: a value nests deeper than {MAX_DEPTH} levels")
        out = self.out
        kind = type(v)
        if kind in _PLAIN:  # the common scalars first, without the hooks
            if kind is int and -(2**63) <= v < 2**63:
                out += [_INT_TAG, _I64.pack(v)]
                return
            if kind is str:
                data = v.encode("utf-8")
                out += [_STR_TAG, _U32.pack(len(data)), data]
                return
            if v is None:
                out.append(_NONE_TAG)
                return
        ref = self.hooks.to_ref(v)
        if ref is not None:
            out += [bytes([Tag.REF]), _REF.pack(int(ref[0]), ref[1])]
            self.value(ref[2], depth + 1)
        elif v is None:
            out.append(bytes([Tag.NONE]))
        elif isinstance(v, bool | np.bool_):
            out.append(bytes([Tag.TRUE if v else Tag.FALSE]))
        elif isinstance(v, int | np.integer):
            if not -(2**63) <= int(v) < 2**63:
                raise RPCError(f"rpc: integer {v} does not fit in 64 bits")
            out += [bytes([Tag.INT]), _I64.pack(int(v))]
        elif isinstance(v, float | np.floating):
            out += [bytes([Tag.FLOAT]), _F64.pack(float(v))]
        elif isinstance(v, str):
            out.append(bytes([Tag.STR]))
            self.str_(v)
        elif isinstance(v, bytes | bytearray | memoryview):
            data = v if isinstance(v, bytes) else bytes(v)
            out += [bytes([Tag.BYTES]), _U32.pack(len(data)), data]
        elif isinstance(v, np.ndarray | NDArray):
            self.tensor(v.numpy() if isinstance(v, NDArray) else v)
        elif isinstance(v, Device):
            out += [bytes([Tag.DEVICE]), _DEV.pack(v.device_type % 128, v.device_id)]
        elif isinstance(v, DataType):
            out.append(bytes([Tag.DTYPE]))
            self.str_(str(v))
        elif isinstance(v, list | tuple):
            out += [bytes([Tag.LIST if isinstance(v, list) else Tag.TUPLE]), _U32.pack(len(v))]
            for item in v:
                self.value(item, depth + 1)
        elif isinstance(v, dict):
            out += [bytes([Tag.DICT]), _U32.pack(len(v))]
            for key, item in v.items():
                self.value(key, depth + 1)
                self.value(item, depth + 1)
        elif type(v).__name__ in RECORD_TYPES and type(v) is RECORD_TYPES[type(v).__name__]:
            out.append(bytes([Tag.RECORD]))
            self.str_(type(v).__name__)
            fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}  # type: ignore[arg-type]
            self.value(fields, depth + 1)
        elif is_registered_object(v):
            out.append(bytes([Tag.OBJECT]))
            self.str_(save_json(v))
        else:
            raise RPCError(
                f"rpc: a {type(v).__name__} cannot be sent; send numbers, str, bytes, numpy "
                "arrays, devices, lists/dicts of those, remote objects or registered Objects"
            )

    def tensor(self, arr: np.ndarray) -> None:
        data = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        self.out.append(bytes([Tag.TENSOR]))
        self.str_(str(as_dtype(data.dtype)))
        self.out.append(bytes([data.ndim]))
        self.out += [_I64.pack(int(d)) for d in data.shape]
        raw = data.tobytes()
        self.out += [_U64.pack(len(raw)), raw]


def decode(data: bytes | bytearray | memoryview, hooks: RefHooks | None = None) -> Any:
    """The value encoded in ``data`` (all of it); raises ProtocolError when malformed."""
    reader = _Decoder(memoryview(data), hooks or RefHooks())
    value = reader.value(0)
    if reader.pos != len(reader.buf):
        raise ProtocolError(f"rpc: {len(reader.buf) - reader.pos} trailing bytes after a value")
    return value


class _Decoder:
    def __init__(self, buf: memoryview, hooks: RefHooks) -> None:
        self.buf = buf
        self.pos = 0
        self.hooks = hooks

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError(
                f"rpc: truncated value: needs {n} bytes at offset {self.pos}, "
                f"{len(self.buf) - self.pos} left"
            )
        chunk = self.buf[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, st: struct.Struct) -> Any:
        return st.unpack(self.take(st.size))

    def str_(self) -> str:
        (n,) = self.unpack(_U32)
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"rpc: a string is not valid UTF-8: {exc}") from None

    def count(self, item_size: int) -> int:
        (n,) = self.unpack(_U32)
        if n * item_size > len(self.buf) - self.pos:
            raise ProtocolError(f"rpc: a container claims {n} items, more than the bytes left")
        return int(n)

    def value(self, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError(f"rpc: a value nests deeper than {MAX_DEPTH} levels")
        tag = self.take(1)[0]
        if tag == Tag.INT:
            return self.unpack(_I64)[0]
        if tag == Tag.STR:
            return self.str_()
        if tag == Tag.NONE:
            return None
        if tag in (Tag.FALSE, Tag.TRUE):
            return tag == Tag.TRUE
        if tag == Tag.INT:
            return self.unpack(_I64)[0]
        if tag == Tag.FLOAT:
            return self.unpack(_F64)[0]
        if tag == Tag.STR:
            return self.str_()
        if tag == Tag.BYTES:
            (n,) = self.unpack(_U32)
            return bytes(self.take(n))
        if tag in (Tag.LIST, Tag.TUPLE):
            items = [self.value(depth + 1) for _ in range(self.count(1))]
            return items if tag == Tag.LIST else tuple(items)
        if tag == Tag.DICT:
            pairs = [(self.value(depth + 1), self.value(depth + 1)) for _ in range(self.count(2))]
            try:
                return dict(pairs)
            except TypeError:
                raise ProtocolError("rpc: a dict key is not hashable") from None
        if tag == Tag.TENSOR:
            return self.tensor()
        if tag == Tag.DEVICE:
            dev_type, dev_id = self.unpack(_DEV)
            return self.hooks.device(Device(dev_type, dev_id))
        if tag == Tag.DTYPE:
            return self.guard(lambda s: as_dtype(s), self.str_())
        if tag == Tag.REF:
            return self.ref(depth)
        if tag == Tag.OBJECT:
            return self.guard(load_json, self.str_())
        if tag == Tag.RECORD:
            return self.record(depth)
        raise ProtocolError(f"rpc: unknown value tag {tag}")

    @staticmethod
    def guard(func: Callable[[str], Any], text: str) -> Any:
        try:
            return func(text)
        except RPCError:
            raise
        except Exception as exc:  # noqa: BLE001 - any decoding failure is a protocol error
            raise ProtocolError(f"rpc: cannot decode {text[:60]!r}: {exc}") from None

    def tensor(self) -> np.ndarray:
        dt = self.guard(lambda s: as_dtype(s).numpy_dtype(), self.str_())
        ndim = self.take(1)[0]
        shape = tuple(self.unpack(_I64)[0] for _ in range(ndim))
        (nbytes,) = self.unpack(_U64)
        if any(d < 0 for d in shape) or math.prod(shape) * dt.itemsize != nbytes:
            raise ProtocolError(f"rpc: tensor shape {shape} of {dt} does not hold {nbytes} bytes")
        raw = self.take(nbytes)
        return np.frombuffer(raw, dtype=dt.newbyteorder("<")).reshape(shape).copy()

    def ref(self, depth: int) -> Any:
        kind, ident = self.unpack(_REF)
        meta = self.value(depth + 1)
        if kind not in RefKind.__members__.values() or self.hooks.from_ref is None:
            raise ProtocolError(f"rpc: unexpected reference (kind {kind}, id {ident})")
        return self.hooks.from_ref(RefKind(kind), ident, meta)

    def record(self, depth: int) -> Any:
        name = self.str_()
        cls = RECORD_TYPES.get(name)
        fields = self.value(depth + 1)
        if cls is None or not isinstance(fields, dict):
            raise ProtocolError(f"rpc: unknown record type {name!r}")
        try:
            return cls(**fields)
        except TypeError as exc:
            raise ProtocolError(f"rpc: bad fields for record {name!r}: {exc}") from None
