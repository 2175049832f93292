"""Object JSON: a versioned graph format for registered objects and plain data.

Layout (keys sorted, deterministic)::

    {"format": "ember.object-json", "version": 1, "root": <value>, "nodes": [<node>, ...]}

A value is a JSON scalar (None, bool, int, str, finite float), ``{"float": "nan"|"inf"|
"-inf"}``, or ``{"ref": i}`` pointing at ``nodes[i]``. Every container, registered object,
array and byte string is a node, written once: a value reachable twice is one node
referenced twice, so sharing survives a round trip. Nodes only reference earlier nodes.
Node kinds: ``{"object": key, "fields": {...}}``, ``{"enum": key, "value": v}``,
``{"list": [...]}``, ``{"tuple": [...]}``, ``{"dict": [[k, v], ...]}``,
``{"ndarray": {"dtype", "shape", "data"}}`` (base64, C order, little endian),
``{"nd": {...}}`` (an ember NDArray), ``{"bytes": b64}``, ``{"dtype": "float32"}``,
``{"device": [type, id]}``. No pickle, no code execution: types come from the registry.
"""

from __future__ import annotations

import base64
import enum
import json
import math
from typing import Any

import numpy as np

from ember.errors import RegistryError, SerializationError
from ember.runtime.device import Device
from ember.runtime.dtype import DataType
from ember.runtime.dtype import dtype as as_dtype
from ember.runtime.ndarray import NDArray
from ember.runtime.ndarray import array as nd_array
from ember.runtime.object import get_type, is_registered_object, list_fields, object_factory

FORMAT = "ember.object-json"
VERSION = 1


def _array_payload(arr: np.ndarray) -> dict[str, Any]:
    dt = as_dtype(arr.dtype)
    data = np.ascontiguousarray(arr)
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("<"))
    return {
        "dtype": str(dt),
        "shape": [int(d) for d in arr.shape],
        "data": base64.b64encode(data.tobytes()).decode("ascii"),
    }


class _Writer:
    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.memo: dict[int, int] = {}
        self.alive: list[Any] = []  # keeps ids unique while writing
        self.active: set[int] = set()

    def value(self, v: Any) -> Any:
        if v is None or type(v) in (str, bool, int):
            return v
        if isinstance(v, str | int | float) and not isinstance(v, enum.Enum):
            v = (str if isinstance(v, str) else int if isinstance(v, int) else float)(v)
            if not isinstance(v, float):
                return v
        if type(v) is float:
            if math.isfinite(v):
                return v
            return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        return {"ref": self.node(v)}

    def node(self, v: Any) -> int:
        key = id(v)
        if key in self.memo:
            return self.memo[key]
        if key in self.active:
            raise SerializationError(
                f"save_json: a cycle through a {type(v).__name__} cannot be saved; "
                "the format holds acyclic graphs only"
            )
        self.active.add(key)
        encoded = self.encode(v)
        self.active.discard(key)
        self.nodes.append(encoded)
        self.alive.append(v)
        self.memo[key] = len(self.nodes) - 1
        return self.memo[key]

    def encode(self, v: Any) -> Any:
        if is_registered_object(v):
            key = type(v).__dict__["__ember_type_key__"]
            if isinstance(v, enum.Enum):
                return {"enum": key, "value": self.value(v.value)}
            return {"object": key, "fields": {n: self.value(getattr(v, n)) for n in list_fields(v)}}
        if isinstance(v, enum.Enum):
            raise SerializationError(
                f"save_json: enum {type(v).__qualname__} is not registered; decorate it with "
                "@ember.register_object('<type key>')"
            )
        if isinstance(v, list):
            return {"list": [self.value(x) for x in v]}
        if isinstance(v, tuple):
            return {"tuple": [self.value(x) for x in v]}
        if isinstance(v, dict):
            return {"dict": [[self.value(k), self.value(x)] for k, x in v.items()]}
        if isinstance(v, NDArray):
            return {"nd": _array_payload(v.numpy())}
        if isinstance(v, np.ndarray):
            return {"ndarray": _array_payload(v)}
        if isinstance(v, np.generic):
            return {"scalar": _array_payload(np.asarray(v))}
        if isinstance(v, bytes | bytearray):
            return {"bytes": base64.b64encode(bytes(v)).decode("ascii")}
        if isinstance(v, DataType):
            return {"dtype": str(v)}
        if isinstance(v, Device):
            return {"device": [v.device_type, v.device_id]}
        raise SerializationError(
            f"save_json: cannot save a {type(v).__module__}.{type(v).__qualname__}; register "
            "its class with @ember.register_object or convert it to lists/dicts/arrays"
        )


def save_json(obj: Any) -> str:
    """Serialize ``obj`` (registered objects, containers, arrays, scalars) to JSON text."""
    writer = _Writer()
    root = writer.value(obj)
    doc = {"format": FORMAT, "version": VERSION, "root": root, "nodes": writer.nodes}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)


class _Reader:
    def __init__(self, nodes: list[Any]) -> None:
        self.nodes = nodes
        self.values: list[Any] = []

    def value(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, bool | int | str):
            return v
        if isinstance(v, float):
            return v
        if isinstance(v, dict) and set(v) == {"ref"} and type(v["ref"]) is int:
            ref = v["ref"]
            if not 0 <= ref < len(self.values):
                raise SerializationError(
                    f"load_json: {where} references node {ref}, which is not an earlier node"
                )
            return self.values[ref]
        if isinstance(v, dict) and set(v) == {"float"}:
            text = v["float"]
            if text not in ("nan", "inf", "-inf"):
                raise SerializationError(f"load_json: {where} has a bad float {text!r}")
            return float(text)
        raise SerializationError(f"load_json: {where} holds an unreadable value {v!r:.80}")

    def node(self, i: int, n: Any) -> Any:
        where = f"node {i}"
        if not isinstance(n, dict) or not n:
            raise SerializationError(f"load_json: {where} is not an object")
        kind = next(
            k
            for k in (
                "object",
                "enum",
                "list",
                "tuple",
                "dict",
                "nd",
                "ndarray",
                "scalar",
                "bytes",
                "dtype",
                "device",
                "",
            )
            if k in n or not k
        )
        if kind == "object":
            cls = self._type(n["object"], where)
            fields = n.get("fields")
            if not isinstance(fields, dict):
                raise SerializationError(f"load_json: {where} lacks its 'fields' mapping")
            known = set(list_fields(cls))
            unknown = sorted(set(fields) - known)
            if unknown:
                raise SerializationError(
                    f"load_json: {where} ({n['object']}) has unknown fields {unknown}; "
                    f"the type has {sorted(known)}"
                )
            values = {k: self.value(v, f"{where}.{k}") for k, v in fields.items()}
            try:
                return object_factory(cls)(values)
            except (TypeError, ValueError) as err:
                raise SerializationError(f"load_json: {where} ({n['object']}): {err}") from err
        if kind == "enum":
            cls = self._type(n["enum"], where)
            try:
                return cls(self.value(n.get("value"), where))
            except ValueError as err:
                raise SerializationError(f"load_json: {where}: {err}") from err
        if kind in ("list", "tuple"):
            items = [self.value(x, f"{where}[{k}]") for k, x in enumerate(_as_list(n[kind], where))]
            return items if kind == "list" else tuple(items)
        if kind == "dict":
            out = {}
            for k, pair in enumerate(_as_list(n["dict"], where)):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise SerializationError(f"load_json: {where} entry {k} is not a [key, value]")
                out[self.value(pair[0], where)] = self.value(pair[1], f"{where}[{k}]")
            return out
        if kind in ("nd", "ndarray", "scalar"):
            arr = _read_array(n[kind], where)
            if kind == "nd":
                return nd_array(arr)
            return arr[()] if kind == "scalar" else arr
        if kind == "bytes":
            return _b64(n["bytes"], where)
        if kind == "dtype":
            return as_dtype(str(n["dtype"]))
        if kind == "device":
            dev = _as_list(n["device"], where)
            if len(dev) != 2 or not all(type(x) is int for x in dev):
                raise SerializationError(f"load_json: {where} has a bad device {dev}")
            return Device(dev[0], dev[1])
        raise SerializationError(f"load_json: {where} has an unknown kind {sorted(n)}")

    def _type(self, key: Any, where: str) -> type:
        try:
            return get_type(str(key))
        except RegistryError as err:
            raise SerializationError(
                f"load_json: {where} has type '{key}', which is not registered; import the "
                f"module that registers it ({err})"
            ) from None


def _as_list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list):
        raise SerializationError(f"load_json: {where} should hold a list")
    return v


def _b64(text: Any, where: str) -> bytes:
    try:
        return base64.b64decode(str(text), validate=True)
    except ValueError as err:
        raise SerializationError(f"load_json: {where} has bad base64 data: {err}") from None


def _read_array(payload: Any, where: str) -> np.ndarray:
    if not isinstance(payload, dict) or not {"dtype", "shape", "data"} <= set(payload):
        raise SerializationError(f"load_json: {where} needs dtype, shape and data")
    np_dtype = as_dtype(str(payload["dtype"])).numpy_dtype()
    shape = tuple(_as_list(payload["shape"], where))
    if not all(type(d) is int and d >= 0 for d in shape):
        raise SerializationError(f"load_json: {where} has a bad shape {shape}")
    raw = _b64(payload["data"], where)
    if len(raw) != math.prod(shape) * np_dtype.itemsize:
        raise SerializationError(
            f"load_json: {where} holds {len(raw)} bytes, shape {shape} of {payload['dtype']} "
            f"needs {math.prod(shape) * np_dtype.itemsize}"
        )
    return np.frombuffer(raw, dtype=np_dtype.newbyteorder("<")).astype(np_dtype).reshape(shape)


def load_json(text: str | bytes) -> Any:
    """Rebuild the value saved by :func:`save_json` (raises SerializationError if malformed)."""
    try:
        doc = json.loads(text)
    except (ValueError, TypeError) as err:
        raise SerializationError(f"load_json: not valid JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SerializationError(f"load_json: not an {FORMAT} document (missing 'format')")
    if doc.get("version") != VERSION:
        raise SerializationError(
            f"load_json: version {doc.get('version')!r} is not supported; "
            f"this ember reads version {VERSION}"
        )
    reader = _Reader(_as_list(doc.get("nodes"), "nodes"))
    for i, n in enumerate(reader.nodes):
        reader.values.append(reader.node(i, n))
    return reader.value(doc.get("root"), "root")
