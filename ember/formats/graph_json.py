"""Graph JSON: TVM's graph-executor program format as typed data, a writer and a validating reader.

A graph is a list of nodes in topological order. A node is either ``"null"`` (a model input
or a parameter; listed in ``arg_nodes``) or ``"tvm_op"`` (a call of the kernel ``func_name``
from the host module). Every node output is an *entry*; entry ids are
``node_row_ptr[node_id] + output_index``. Per entry, ``attrs`` gives the storage id (entries
that share a storage id share memory), the shape and the dtype::

    {"nodes": [{"op": "null", "name": "x", "inputs": []},
               {"op": "tvm_op", "name": "relu0", "inputs": [[0, 0, 0]],
                "attrs": {"func_name": "relu", "num_inputs": "1", "num_outputs": "1",
                          "flatten_data": "0"}}],
     "arg_nodes": [0], "heads": [[1, 0, 0]], "node_row_ptr": [0, 1, 2],
     "attrs": {"storage_id": ["list_int", [0, 1]],
               "shape": ["list_shape", [[4], [4]]],
               "dltype": ["list_str", ["float32", "float32"]]}}

``dump_graph_json`` is deterministic (sorted keys, the node order of the graph).
``load_graph_json`` refuses anything it cannot run safely with ``SerializationError``: wrong
or missing keys, sizes beyond the bounds below, indices out of range, an input referring to
a later node (a cycle), negative dimensions, unknown dtypes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ember.errors import SerializationError
from ember.formats.dtypes import check_dtype, numpy_dtype

MAX_GRAPH_JSON_BYTES = 1 << 28
MAX_NODES = 1 << 20
MAX_NDIM = 32
MAX_TENSOR_BYTES = 1 << 40
MAX_OUTPUTS_PER_NODE = 1 << 12
OP_NULL = "null"
OP_KERNEL = "tvm_op"
NOP_FUNC = "__nop"  # a kernel slot that does nothing (outputs alias inputs), as in TVM
COPY_FUNC = "__copy"  # copy input 0 into output 0, as in TVM


@dataclass(frozen=True)
class NodeEntry:
    """One output of a node: ``(node_id, index, version)``."""

    node_id: int
    index: int = 0
    version: int = 0

    def to_json(self) -> list[int]:
        """The ``[node_id, index, version]`` triple."""
        return [self.node_id, self.index, self.version]


#: node attribute of a kernel that takes a scratch buffer of that many bytes as its last
#: argument (its heap buffers planned: lowering.aot in an AOT build, lowering.graph_scratch
#: in a graph build)
SCRATCH_ATTR = "scratch_bytes"


@dataclass(frozen=True)
class OpAttrs:
    """Attributes of a ``tvm_op`` node; ``extra`` keeps other string attributes verbatim."""

    func_name: str
    num_inputs: int
    num_outputs: int = 1
    flatten_data: int = 0
    extra: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, str]:
        """TVM writes every attribute value as a string."""
        out = dict(self.extra)
        out.update(
            func_name=self.func_name,
            num_inputs=str(self.num_inputs),
            num_outputs=str(self.num_outputs),
            flatten_data=str(self.flatten_data),
        )
        return out


@dataclass(frozen=True)
class Node:
    """A graph node: an input/parameter (``op == "null"``) or a kernel call (``"tvm_op"``)."""

    op: str
    name: str
    inputs: tuple[NodeEntry, ...] = ()
    attrs: OpAttrs | None = None

    @property
    def num_outputs(self) -> int:
        """Number of entries this node produces."""
        return self.attrs.num_outputs if self.attrs is not None else 1

    def to_json(self) -> dict[str, Any]:
        """The node's JSON object."""
        out: dict[str, Any] = {
            "op": self.op,
            "name": self.name,
            "inputs": [e.to_json() for e in self.inputs],
        }
        if self.attrs is not None:
            out["attrs"] = self.attrs.to_json()
        return out


@dataclass(frozen=True)
class GraphJSON:
    """A whole graph: nodes, argument nodes, outputs (heads) and per-entry attributes."""

    nodes: tuple[Node, ...]
    arg_nodes: tuple[int, ...]
    heads: tuple[NodeEntry, ...]
    node_row_ptr: tuple[int, ...]
    storage_id: tuple[int, ...]
    shape: tuple[tuple[int, ...], ...]
    dltype: tuple[str, ...]
    device_index: tuple[int, ...] | None = None
    #: the model's output names (e.g. ONNX's), one per head; None: positional names
    output_names: tuple[str, ...] | None = None

    @classmethod
    def create(
        cls,
        nodes: Sequence[Node],
        heads: Sequence[NodeEntry],
        shape: Sequence[Sequence[int]],
        dltype: Sequence[str],
        storage_id: Sequence[int] | None = None,
        device_index: Sequence[int] | None = None,
        output_names: Sequence[str] | None = None,
    ) -> GraphJSON:
        """Build and validate a graph, deriving ``arg_nodes`` and ``node_row_ptr`` from nodes.

        Without ``storage_id`` every entry gets its own storage.
        """
        row_ptr = [0]
        for node in nodes:
            row_ptr.append(row_ptr[-1] + node.num_outputs)
        graph = cls(
            nodes=tuple(nodes),
            arg_nodes=tuple(i for i, n in enumerate(nodes) if n.op == OP_NULL),
            heads=tuple(heads),
            node_row_ptr=tuple(row_ptr),
            storage_id=tuple(storage_id) if storage_id is not None else tuple(range(row_ptr[-1])),
            shape=tuple(tuple(int(d) for d in s) for s in shape),
            dltype=tuple(dltype),
            device_index=tuple(device_index) if device_index is not None else None,
            output_names=tuple(output_names) if output_names is not None else None,
        )
        return load_graph_json(graph.to_json())  # one validation path for built and read graphs

    @property
    def num_entries(self) -> int:
        """Number of node outputs in the graph."""
        return self.node_row_ptr[-1]

    def entry_id(self, entry: NodeEntry) -> int:
        """The flat entry id of a node output."""
        return self.node_row_ptr[entry.node_id] + entry.index

    def input_names(self) -> list[str]:
        """Names of the argument nodes (inputs and parameters) in ``arg_nodes`` order."""
        return [self.nodes[i].name for i in self.arg_nodes]

    def output_entry_ids(self) -> list[int]:
        """Entry ids of the graph outputs, in ``heads`` order."""
        return [self.entry_id(h) for h in self.heads]

    def to_json_obj(self) -> dict[str, Any]:
        """The JSON object (plain dicts and lists)."""
        attrs: dict[str, Any] = {
            "storage_id": ["list_int", list(self.storage_id)],
            "shape": ["list_shape", [list(s) for s in self.shape]],
            "dltype": ["list_str", list(self.dltype)],
        }
        if self.device_index is not None:
            attrs["device_index"] = ["list_int", list(self.device_index)]
        if self.output_names is not None:
            attrs["output_names"] = ["list_str", list(self.output_names)]
        return {
            "nodes": [n.to_json() for n in self.nodes],
            "arg_nodes": list(self.arg_nodes),
            "heads": [h.to_json() for h in self.heads],
            "node_row_ptr": list(self.node_row_ptr),
            "attrs": attrs,
        }

    def to_json(self) -> str:
        """Deterministic JSON text."""
        return dump_graph_json(self)

    @staticmethod
    def from_json(text: str | bytes) -> GraphJSON:
        """Parse and validate graph JSON text (same as ``load_graph_json``)."""
        return load_graph_json(text)


def dump_graph_json(graph: GraphJSON) -> str:
    """Serialize a graph to deterministic JSON text (sorted keys, graph order)."""
    return json.dumps(graph.to_json_obj(), sort_keys=True, indent=2) + "\n"


# ----------------------------------------------------------------------------- reading


def _fail(where: str, what: str) -> SerializationError:
    return SerializationError(f"graph JSON {where}: {what}")


def _int(value: Any, where: str, lo: int, hi: int) -> int:
    """An integer in [lo, hi]; TVM writes node attributes as decimal strings, so accept those."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"expected an integer, got {value!r}")
    if not lo <= value <= hi:
        raise _fail(where, f"{value} is out of range [{lo}, {hi}]")
    return value


def _list(value: Any, where: str, max_len: int = MAX_NODES * 4) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, f"expected a list, got {type(value).__name__}")
    if len(value) > max_len:
        raise _fail(where, f"has {len(value)} items; at most {max_len} are allowed")
    return value


def _keys(obj: Any, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> None:
    if not isinstance(obj, dict):
        raise _fail(where, f"expected an object, got {type(obj).__name__}")
    required = set(required)
    allowed = required | set(optional)
    missing = sorted(required - set(obj))
    unknown = sorted(set(obj) - allowed)
    if missing:
        raise _fail(where, f"missing key(s) {missing}")
    if unknown:
        raise _fail(where, f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _entry(value: Any, where: str, nodes: Sequence[Node], before: int) -> NodeEntry:
    """A ``[node_id, index(, version)]`` triple referring to a node before ``before``."""
    items = _list(value, where, 3)
    if len(items) not in (2, 3):
        raise _fail(where, f"an entry is [node_id, index, version], got {value!r}")
    nid = _int(items[0], f"{where}[0]", 0, MAX_NODES)
    if nid >= before:
        raise _fail(
            where,
            f"refers to node {nid}, which is not before it (nodes must be in topological "
            "order; a later or own node means a cycle or a dangling reference)",
        )
    index = _int(items[1], f"{where}[1]", 0, MAX_OUTPUTS_PER_NODE)
    if index >= nodes[nid].num_outputs:
        raise _fail(where, f"output {index} of node {nid} does not exist")
    version = _int(items[2], f"{where}[2]", 0, 1 << 30) if len(items) == 3 else 0
    return NodeEntry(nid, index, version)


def _node(obj: Any, nid: int, nodes: Sequence[Node]) -> Node:
    where = f"node {nid}"
    _keys(obj, where, ("op", "name", "inputs"), ("attrs",))
    op, name = obj["op"], obj["name"]
    if op not in (OP_NULL, OP_KERNEL):
        raise _fail(where, f"op {op!r} is unknown; a node is {OP_NULL!r} or {OP_KERNEL!r}")
    if not isinstance(name, str) or not name:
        raise _fail(where, f"name must be a non-empty string, got {name!r}")
    raw_inputs = _list(obj["inputs"], f"{where} ({name}) inputs", 1 << 16)
    inputs = tuple(
        _entry(e, f"{where} ({name}) input {k}", nodes, nid) for k, e in enumerate(raw_inputs)
    )
    raw_attrs = obj.get("attrs")
    if op == OP_NULL:
        if inputs:
            raise _fail(where, f"input/parameter node {name!r} must have no inputs")
        if raw_attrs not in (None, {}):
            raise _fail(where, f"input/parameter node {name!r} must have no attrs")
        return Node(op, name)
    if not isinstance(raw_attrs, dict):
        raise _fail(where, f"kernel node {name!r} needs attrs with func_name, num_inputs, ...")
    func_name = raw_attrs.get("func_name")
    if not isinstance(func_name, str) or not func_name:
        raise _fail(where, f"kernel node {name!r} has no func_name")
    num_inputs = _int(raw_attrs.get("num_inputs"), f"{where} num_inputs", 0, 1 << 16)
    if num_inputs != len(inputs):
        raise _fail(where, f"num_inputs is {num_inputs} but the node lists {len(inputs)} inputs")
    num_outputs = _int(raw_attrs.get("num_outputs"), f"{where} num_outputs", 1, 1 << 12)
    flatten = _int(raw_attrs.get("flatten_data", 0), f"{where} flatten_data", 0, 1)
    extra = []
    for key in sorted(raw_attrs):
        if key in ("func_name", "num_inputs", "num_outputs", "flatten_data"):
            continue
        if not isinstance(raw_attrs[key], str):
            raise _fail(where, f"attribute {key!r} must be a string, got {raw_attrs[key]!r}")
        if key == SCRATCH_ATTR:  # the executor allocates this many bytes: a bounded integer
            _int(raw_attrs[key], f"{where} ({name}) {SCRATCH_ATTR}", 0, MAX_TENSOR_BYTES)
        extra.append((key, raw_attrs[key]))
    attrs = OpAttrs(func_name, num_inputs, num_outputs, flatten, tuple(extra))
    return Node(op, name, inputs, attrs)


def _typed_list(attrs: dict[str, Any], key: str, tag: str, n: int) -> list[Any]:
    value = attrs[key]
    if not (isinstance(value, list) and len(value) == 2 and value[0] == tag):
        raise _fail(f"attrs.{key}", f'must be ["{tag}", [...]]')
    items = _list(value[1], f"attrs.{key}")
    if len(items) != n:
        raise _fail(f"attrs.{key}", f"has {len(items)} items but the graph has {n} entries")
    return items


def _shape(value: Any, where: str, dtype: str) -> tuple[int, ...]:
    dims = tuple(_int(d, where, 0, MAX_TENSOR_BYTES) for d in _list(value, where, MAX_NDIM))
    nbytes = numpy_dtype(dtype).itemsize
    for d in dims:
        nbytes *= d
    if nbytes > MAX_TENSOR_BYTES:
        raise _fail(
            where, f"shape {list(dims)} of {dtype} needs {nbytes} bytes; the bound is 1 TiB"
        )
    return dims


def load_graph_json(text: str | bytes) -> GraphJSON:
    """Parse and validate graph JSON text; raises SerializationError saying what is wrong."""
    if len(text) > MAX_GRAPH_JSON_BYTES:
        raise _fail("text", f"is {len(text)} bytes; at most {MAX_GRAPH_JSON_BYTES} are allowed")
    try:
        obj = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise _fail("text", f"is not valid JSON: {exc}") from None
    _keys(obj, "top level", ("nodes", "arg_nodes", "heads", "node_row_ptr", "attrs"))
    nodes: list[Node] = []
    for nid, raw in enumerate(_list(obj["nodes"], "nodes", MAX_NODES)):
        nodes.append(_node(raw, nid, nodes))
    if not nodes:
        raise _fail("nodes", "is empty; a graph needs at least one node")
    row_ptr = [
        _int(v, "node_row_ptr", 0, MAX_NODES * MAX_OUTPUTS_PER_NODE)
        for v in _list(obj["node_row_ptr"], "node_row_ptr", MAX_NODES + 1)
    ]
    expect = [0]
    for node in nodes:
        expect.append(expect[-1] + node.num_outputs)
    if row_ptr != expect:
        raise _fail(
            "node_row_ptr", f"is {row_ptr[:8]}... but the nodes' outputs give {expect[:8]}..."
        )
    n = expect[-1]
    arg_nodes = tuple(
        _int(a, "arg_nodes", 0, len(nodes) - 1) for a in _list(obj["arg_nodes"], "arg_nodes")
    )
    nulls = [i for i, node in enumerate(nodes) if node.op == OP_NULL]
    if sorted(arg_nodes) != nulls:
        raise _fail("arg_nodes", f"is {list(arg_nodes)[:8]} but the null nodes are {nulls[:8]}")
    names = [nodes[i].name for i in arg_nodes]
    dup = sorted({x for x in names if names.count(x) > 1}) if len(set(names)) != len(names) else []
    if dup:
        raise _fail("arg_nodes", f"input names must be unique; repeated: {dup}")
    heads = tuple(
        _entry(h, f"heads[{k}]", nodes, len(nodes))
        for k, h in enumerate(_list(obj["heads"], "heads"))
    )
    if not heads:
        raise _fail("heads", "is empty; a graph needs at least one output")
    attrs = obj["attrs"]
    _keys(attrs, "attrs", ("storage_id", "shape", "dltype"), ("device_index", "output_names"))
    storage = tuple(
        _int(s, "attrs.storage_id", 0, max(n - 1, 0))
        for s in _typed_list(attrs, "storage_id", "list_int", n)
    )
    dltype = tuple(
        check_dtype(d, f"graph JSON attrs.dltype[{k}]")
        for k, d in enumerate(_typed_list(attrs, "dltype", "list_str", n))
    )
    shape = tuple(
        _shape(s, f"attrs.shape[{k}]", dltype[k])
        for k, s in enumerate(_typed_list(attrs, "shape", "list_shape", n))
    )
    device_index = None
    if "device_index" in attrs:
        device_index = tuple(
            _int(d, "attrs.device_index", 0, 1 << 16)
            for d in _typed_list(attrs, "device_index", "list_int", n)
        )
    output_names = None
    if "output_names" in attrs:
        raw = _typed_list(attrs, "output_names", "list_str", len(heads))
        if not all(isinstance(x, str) and x for x in raw) or len(set(raw)) != len(raw):
            raise _fail("attrs.output_names", "must be unique non-empty strings")
        output_names = tuple(raw)
    return GraphJSON(
        tuple(nodes),
        arg_nodes,
        heads,
        tuple(row_ptr),
        storage,
        shape,
        dltype,
        device_index,
        output_names,
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")
