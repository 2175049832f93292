"""Semantic mutations of a saved artifact set (tests/security/test_set_mutations.py).

An attacker who can edit a saved set can also rewrite ``manifest.json``'s hashes, so the
hash check is no defence: every mutation here is written with a manifest that matches it.
The mutations are structured, not random bytes: every JSON value of ``graph.json``,
``metadata.json`` and ``memory_map.json`` (a number made smaller, larger, 0, -1, 2^62, a
float, text; a list shortened, extended, emptied, reversed; an object missing a key or
with an extra one; a name or dtype replaced by another of the file), plus the header
fields of ``params.bin`` (counts, lengths, ndim, dtype code/bits/lanes, dimensions, byte
sizes) and each array's data (all 0x00, 0x7f, 0x80, 0xff, noise: packed weights are
data), and the fields of ``manifest.json`` itself (loaders, names, cflags). The C sources
are never mutated (they are compiled at load: another question).

:func:`mutations` lists them deterministically; :func:`write_mutated` writes one as a set
directory whose unchanged files are hard links to the original's.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
JSON_FILES = ("graph.json", "metadata.json", "memory_map.json")
PARAMS_FILE = "params.bin"
DTYPES = ("float32", "float64", "float16", "int8", "uint8", "int32", "int64", "bool", "string")
HUGE = 1 << 62


@dataclass(frozen=True)
class Mutation:
    """One edit of one file of a saved set: ``<codegen_id>/<file_name>`` and its new bytes
    (built on demand: ``make()``), with a label saying what changed."""

    file: str
    label: str
    make: Callable[[], bytes]
    #: other files edited with it, ``(file, make)``: a consistent edit of several files
    also: tuple[tuple[str, Callable[[], bytes]], ...] = ()

    @property
    def name(self) -> str:
        """``file: label``, the id a failure is reported by."""
        return f"{self.file}: {self.label}"


# ----------------------------------------------------------------------------- JSON


def _unique(values: list[Any], old: Any) -> list[Any]:
    """``values`` without repeats (as JSON) and without the old value itself."""
    seen = {json.dumps(old)}
    out = []
    for v in values:
        key = json.dumps(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _numbers(v: int) -> list[Any]:
    """Replacements of an integer value: edge and neighbour values, other types."""
    out: list[Any] = [v - 1, v + 1, 0, -1, HUGE, v * 1000 + 7, v // 2, float(v) + 0.5]
    return _unique([*out, str(v), None, True, [v]], v)


def _numeric_text(v: str) -> list[Any]:
    """Replacements of a number written as text (TVM's node attributes)."""
    n = int(v)
    out: list[Any] = [str(x) for x in (n - 1, n + 1, 0, -1, HUGE, n * 1000 + 7, n // 2, 64)]
    return _unique([*out, f"{n}.5", "x", "", n], v)


def _texts(v: str, names: list[str]) -> list[Any]:
    """Replacements of a text value: dtypes, other names of the file, empty, odd text."""
    out: list[Any] = ["", "x" * 300, v + "_", 1, None, "../../x", "a\u0000b"]
    if v in DTYPES:
        out = [d for d in DTYPES if d != v] + ["int4", "float32x4", "void"] + out
    others = [n for n in names if n != v]
    return _unique(out + others[:2] + others[-2:], v)


def _walk(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, obj
    if isinstance(obj, dict):
        for k in sorted(obj):
            yield from _walk(obj[k], (*path, k))
    elif isinstance(obj, list):
        for i, x in enumerate(obj):
            yield from _walk(x, (*path, i))


def _replace(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``obj`` with the value at ``path`` replaced (``_DROP``: removed)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        out = dict(obj)
        new = _replace(obj[head], rest, value)
        if new is _DROP:
            del out[head]
        else:
            out[head] = new
        return out
    items = list(obj)
    new = _replace(items[head], rest, value)
    if new is _DROP:
        del items[head]
    else:
        items[head] = new
    return items


_DROP = object()


def _strings(obj: Any) -> list[str]:
    return sorted({v for _, v in _walk(obj) if isinstance(v, str) and v})


def _is_int_text(v: str) -> bool:
    return v.lstrip("-").isdigit() and len(v) < 20


def _container_edits(value: Any) -> list[tuple[str, Any]]:
    """Edits of a list or an object as a whole."""
    edits: list[tuple[str, Any]] = []
    if isinstance(value, list):
        if value:
            edits += [("drop last", value[:-1]), ("drop first", value[1:]), ("empty", [])]
            edits += [("repeat last", [*value, value[-1]]), ("as object", {})]
            if len(value) > 1 and value != value[::-1]:
                edits.append(("reversed", value[::-1]))
            if len(value) > 1:
                edits.append(("swap 0,1", [value[1], value[0], *value[2:]]))
        edits.append(("append 1", [*value, 1]))
    elif isinstance(value, dict):
        edits += [(f"drop key {k!r}", ("drop", k)) for k in sorted(value)]
        edits += [("extra key", {**value, "zz_extra": 1}), ("as list", [])]
    return edits


def json_mutations(file: str, data: bytes) -> list[Mutation]:
    """Every semantic mutation of the JSON ``data`` of ``file``."""
    doc = json.loads(data)
    names = _strings(doc)
    out: list[Mutation] = []

    def add(path: tuple[Any, ...], label: str, value: Any) -> None:
        def make(path: tuple[Any, ...] = path, value: Any = value) -> bytes:
            return (json.dumps(_replace(doc, path, value), indent=1) + "\n").encode()

        out.append(Mutation(file, f"{list(path)} {label}", make))

    for path, value in _walk(doc):
        if isinstance(value, bool) or value is None:
            add(path, "-> 1", 1)
        elif isinstance(value, int):
            for new in _numbers(value):
                add(path, f"-> {json.dumps(new)}", new)
        elif isinstance(value, float):
            add(path, "-> -1e308", -1e308)
            add(path, "-> 0", 0)
        elif isinstance(value, str):
            news = _numeric_text(value) if _is_int_text(value) else _texts(value, names)
            for new in news:
                add(path, f"-> {json.dumps(new)[:40]}", new)
        for label, edit in _container_edits(value):
            if isinstance(edit, tuple) and edit and edit[0] == "drop":
                add((*path, edit[1]), label, _DROP)
            else:
                add(path, label, edit)
    # every occurrence of one key at once (all nodes' scratch_bytes, every function's
    # workspace): a size the executor takes the largest of is only reached this way
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
    for path, value in _walk(doc):
        if path and isinstance(path[-1], str) and not isinstance(value, dict | list):
            pattern = tuple("*" if isinstance(p, int) else p for p in path)
            groups.setdefault(pattern, []).append(path)
    for pattern, paths in sorted(groups.items(), key=lambda kv: json.dumps(kv[0])):
        if len(paths) < 2:
            continue
        for new in (64, "64", 0, "0", 1 << 40):
            out.append(_all_of(file, doc, pattern, paths, new))
    # graph.json: whole-graph edits the per-value ones cannot make
    if isinstance(doc, dict) and "attrs" in doc and "storage_id" in doc.get("attrs", {}):
        sids = doc["attrs"]["storage_id"][1]
        for i in range(len(sids) - 1):
            j = len(sids) - 1 - i
            if sids[i] != sids[j]:
                swapped = list(sids)
                swapped[i], swapped[j] = swapped[j], swapped[i]
                add(("attrs", "storage_id", 1), f"swap storage ids of entries {i},{j}", swapped)
        add(("attrs", "storage_id", 1), "all storage 0", [0] * len(sids))
        shapes = doc["attrs"]["shape"][1]
        add(("attrs", "shape", 1), "all shapes [1]", [[1]] * len(shapes))
        add(("attrs", "shape", 1), "all shapes doubled", [[2 * d for d in s] for s in shapes])
    return out


def _all_of(
    file: str, doc: Any, pattern: tuple[Any, ...], paths: list[tuple[Any, ...]], new: Any
) -> Mutation:
    def make() -> bytes:
        edited = doc
        for path in paths:
            edited = _replace(edited, path, new)
        return (json.dumps(edited, indent=1) + "\n").encode()

    return Mutation(file, f"every {list(pattern)} -> {json.dumps(new)}", make)


# ----------------------------------------------------------------------------- params.bin


def _params_fields(blob: bytes) -> list[tuple[str, int, str]]:
    """(label, offset, struct format) of every header field of a ``.params`` blob."""
    fields: list[tuple[str, int, str]] = [("list magic", 0, "<Q"), ("name count", 16, "<Q")]
    pos = 24
    (n,) = struct.unpack_from("<Q", blob, 16)
    for i in range(n):
        (length,) = struct.unpack_from("<Q", blob, pos)
        fields.append((f"name {i} length", pos, "<Q"))
        pos += 8 + length
    fields.append(("array count", pos, "<Q"))
    pos += 8
    for i in range(n):
        fields.append((f"array {i} magic", pos, "<Q"))
        ndim, code, bits, lanes = struct.unpack_from("<iBBH", blob, pos + 24)
        fields += [(f"array {i} ndim", pos + 24, "<i"), (f"array {i} code", pos + 28, "<B")]
        fields += [(f"array {i} bits", pos + 29, "<B"), (f"array {i} lanes", pos + 30, "<H")]
        pos += 32
        for d in range(ndim):
            fields.append((f"array {i} dim {d}", pos + 8 * d, "<q"))
        pos += 8 * ndim
        (nbytes,) = struct.unpack_from("<q", blob, pos)
        fields.append((f"array {i} byte size", pos, "<q"))
        fields.append((f"array {i} data", pos + 8, f"{nbytes}s"))
        pos += 8 + nbytes
    return fields


def _data_mutations(file: str, blob: bytes, label: str, offset: int, size: int) -> list[Mutation]:
    """An array's data bytes all 0x00, 0x7f, 0x80, 0xff, or seeded noise."""
    out = []
    noise = random.Random(offset).randbytes(size)
    for name, data in [(f"{b:#04x}", bytes([b]) * size) for b in (0, 0x7F, 0x80, 0xFF)] + [
        ("noise", noise)
    ]:

        def make(data: bytes = data) -> bytes:
            return blob[:offset] + data + blob[offset + size :]

        out.append(Mutation(file, f"{label} -> {name}", make))
    return out


def params_mutations(file: str, blob: bytes) -> list[Mutation]:
    """Every header-field mutation of the ``.params`` blob of ``file``."""
    out = []
    for label, offset, fmt in _params_fields(blob):
        if fmt.endswith("s"):  # an array's data: values a kernel may trust (packed weights)
            out += _data_mutations(file, blob, label, offset, struct.calcsize(fmt))
            continue
        (value,) = struct.unpack_from(fmt, blob, offset)
        size = struct.calcsize(fmt)
        top = (1 << (8 * size)) - 1
        signed = fmt[-1] in "iq"
        news = [
            value - 1,
            value + 1,
            0,
            value * 2,
            value // 2,
            top,
            HUGE & top,
            1 << (8 * size - 1),
        ]
        if signed:
            news = [
                (x + (1 << (8 * size - 1))) % (1 << 8 * size) - (1 << (8 * size - 1)) for x in news
            ]
        else:
            news = [x % (1 << (8 * size)) for x in news]
        for new in dict.fromkeys(news):
            if new == value:
                continue

            def make(offset: int = offset, fmt: str = fmt, new: int = new) -> bytes:
                buf = bytearray(blob)
                struct.pack_into(fmt, buf, offset, new)
                return bytes(buf)

            out.append(Mutation(file, f"{label} {value} -> {new}", make))
    for cut in (len(blob) - 1, len(blob) // 2, 24):
        out.append(Mutation(file, f"truncated to {cut} bytes", lambda cut=cut: blob[:cut]))
    return out


# ----------------------------------------------------------------------------- sets


def mutations(root: Path) -> list[Mutation]:
    """Every mutation of the saved set at ``root``, in a fixed order."""
    manifest = json.loads((root / MANIFEST).read_bytes())
    out: list[Mutation] = json_mutations(MANIFEST, (root / MANIFEST).read_bytes())
    for entry in manifest["artifacts"]:
        rel = f"{entry['codegen_id']}/{entry['file_name']}"
        data = (root / rel).read_bytes()
        if entry["file_name"] in JSON_FILES:
            out += json_mutations(rel, data)
        elif entry["file_name"] == PARAMS_FILE:
            out += params_mutations(rel, data)
        if entry["file_name"] == "metadata.json":
            out += consistent_mutations(root, entry["codegen_id"])
    return out


def _dump(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1) + "\n").encode()


def consistent_mutations(root: Path, codegen: str) -> list[Mutation]:
    """Edits of an input or parameter made in graph.json AND metadata.json alike (so the
    cross-file checks pass): its dtype, its shape."""
    graph_file, md_file = f"{codegen}/graph.json", f"{codegen}/metadata.json"
    graph = json.loads((root / graph_file).read_bytes())
    md = json.loads((root / md_file).read_bytes())
    out = []
    for nid in graph["arg_nodes"]:
        name = graph["nodes"][nid]["name"]
        eid = graph["node_row_ptr"][nid]
        old_dtype = graph["attrs"]["dltype"][1][eid]
        old_shape = graph["attrs"]["shape"][1][eid]
        edits: list[tuple[str, str, Any]] = [
            (f"dtype {d}", "dtype", d) for d in ("float32", "int8", "float64", "string", "bool")
        ]
        edits += [("shape []", "shape", []), ("shape doubled", "shape", [2 * d for d in old_shape])]
        edits += [("shape [1]", "shape", [1]), ("shape +1 dim", "shape", [*old_shape, 1])]
        for label, key, value in edits:
            if key == "dtype" and value == old_dtype:
                continue

            def make_graph(eid: int = eid, key: str = key, value: Any = value) -> bytes:
                g = json.loads(json.dumps(graph))
                g["attrs"]["dltype" if key == "dtype" else "shape"][1][eid] = value
                return _dump(g)

            def make_md(name: str = name, key: str = key, value: Any = value) -> bytes:
                m = json.loads(json.dumps(md))
                for section in ("inputs", "params"):
                    for info in m[section]:
                        if info["name"] == name:
                            info[key] = value
                for func in m["functions"][:1]:
                    for info in func["params"]:
                        if info["name"] == name:
                            info[key] = value
                return _dump(m)

            out.append(
                Mutation(
                    md_file,
                    f"{name!r} {label} in graph.json too",
                    make_md,
                    ((graph_file, make_graph),),
                )
            )
    return out


def write_mutated(root: Path, mutation: Mutation, target: Path) -> Path:
    """Write the set at ``root`` with ``mutation`` applied to ``target`` (hard links for the
    unchanged files) and a manifest whose sizes and hashes match the new content."""
    manifest = json.loads((root / MANIFEST).read_bytes())
    for entry in manifest["artifacts"]:
        rel = f"{entry['codegen_id']}/{entry['file_name']}"
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        edits = {mutation.file: mutation.make, **dict(mutation.also)}
        if rel in edits and mutation.file != MANIFEST:
            data = edits[rel]()
            dest.write_bytes(data)
            entry["size"] = len(data)
            entry["sha256"] = hashlib.sha256(data).hexdigest()
        else:
            os.link(root / rel, dest)
    if mutation.file == MANIFEST:  # the manifest's own fields (loader, names, cflags...)
        (target / MANIFEST).write_bytes(mutation.make())
    else:
        (target / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return target
