"""Checks that run before any node is converted: load, opsets, graph structure, support.

Every problem with the input is reported as an ember error that names the model, the node
and what to do: a malformed or truncated file, an opset outside the supported range, a
duplicate output name, an input produced by nobody (a missing initializer), a cycle, and
the complete list of unsupported operators (all of them at once, with their node names).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx
from onnx import inliner, numpy_helper
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from ember.errors import FrontendError, OpNotSupportedError
from ember.frontend.onnx.context import onnx_elem_dtype, onnx_elem_name, sparse_to_dense
from ember.frontend.onnx.registry import find_handler, supported_ops
from ember.support.dtypes import numpy_dtype as _np_dtype

#: the oldest default-domain opset the importer accepts.
MIN_OPSET = 7


def newest_opset() -> int:
    """The newest default-domain opset the installed onnx package knows."""
    return int(onnx.defs.onnx_opset_version())


def load_model(model: onnx.ModelProto | str | os.PathLike[str] | bytes) -> onnx.ModelProto:
    """Accept a ModelProto, a file path or serialized bytes; FrontendError if unreadable."""
    if isinstance(model, onnx.ModelProto):
        proto = model
        where = "the given ModelProto"
    elif isinstance(model, bytes | bytearray | memoryview):
        where = f"the given bytes ({len(model)} bytes)"
        proto = _parse(bytes(model), where)
    elif isinstance(model, str | os.PathLike):
        path = os.fspath(model)
        where = f"'{path}'"
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as err:
            raise FrontendError(f"cannot read ONNX model {where}: {err.strerror or err}") from None
        proto = _parse(data, where)
        _load_external(proto, os.path.dirname(os.path.abspath(path)), where)
    else:
        raise FrontendError(
            f"from_onnx expects an onnx.ModelProto, a file path or bytes, got "
            f"{type(model).__name__}"
        )
    if not proto.HasField("graph"):
        raise FrontendError(
            f"ONNX model {where} has no graph: the file is empty, truncated or not an ONNX model"
        )
    _check_strings(proto, where)
    return proto


def _check_strings(proto: onnx.ModelProto, where: str) -> None:
    """Every name must be valid UTF-8 (protobuf hands back bytes, or raises, when not)."""
    try:
        names = [imp.domain for imp in proto.opset_import]
        for func in proto.functions:
            names += [func.name, func.domain, *func.input, *func.output]
        names += _graph_strings(proto.graph)
    except UnicodeDecodeError:
        names = [b""]
    if any(not isinstance(n, str) for n in names):
        raise FrontendError(
            f"ONNX model {where} holds a name that is not valid UTF-8: the file is corrupt"
        )


def _graph_strings(graph: onnx.GraphProto) -> list[object]:
    """The names in a graph (and its subgraphs) whose decoding can fail."""
    names: list[object] = [graph.name]
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        names.append(vi.name)
        names += [d.dim_param for d in vi.type.tensor_type.shape.dim]
    for t in graph.initializer:
        names.append(t.name)
        names += [e.key for e in t.external_data] + [e.value for e in t.external_data]
    for node in graph.node:
        names += [node.name, node.op_type, node.domain, *node.input, *node.output]
        for attr in node.attribute:
            names.append(attr.name)
            if attr.type == onnx.AttributeProto.GRAPH:
                names += _graph_strings(attr.g)
            for g in attr.graphs:
                names += _graph_strings(g)
    return names


def _parse(data: bytes, where: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as err:  # google.protobuf.message.DecodeError and friends
        raise FrontendError(
            f"cannot parse ONNX model {where}: the file is malformed or truncated ({err}); "
            "re-export the model or check the download"
        ) from None
    return proto


def _load_external(proto: onnx.ModelProto, base_dir: str, where: str) -> None:
    """Load tensors stored in external data files next to the model."""

    tensors = list(proto.graph.initializer)
    if not any(uses_external_data(t) for t in tensors):
        return
    try:
        load_external_data_for_model(proto, base_dir)
    except Exception as err:
        raise FrontendError(
            f"ONNX model {where}: cannot load its external tensor data from '{base_dir}': {err}; "
            "keep the data files next to the model"
        ) from None


def normalize_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """Inline model-local functions and densify sparse initializers (a copy if needed)."""
    if model.functions:
        try:
            model = inliner.inline_local_functions(model)
        except Exception as err:
            names = ", ".join(f.name for f in model.functions)
            raise FrontendError(
                f"ONNX model {graph_label(model)}: cannot inline its local functions "
                f"({names}): {err}"
            ) from None
    if model.graph.sparse_initializer:
        dense = onnx.ModelProto()
        dense.CopyFrom(model)
        for sparse in dense.graph.sparse_initializer:
            where = f"ONNX model {graph_label(model)}: sparse initializer"
            value = sparse_to_dense(sparse, where)
            dense.graph.initializer.append(numpy_helper.from_array(value, sparse.values.name))
        del dense.graph.sparse_initializer[:]
        model = dense
    return model


def graph_label(model: onnx.ModelProto) -> str:
    """A name for messages: the graph name, else 'unnamed graph'."""
    return f"'{model.graph.name}'" if model.graph.name else "(unnamed graph)"


def read_opsets(model: onnx.ModelProto) -> dict[str, int]:
    """Domain -> opset version (default domain as ""); check the default-domain range."""
    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
        opsets[domain] = max(int(imp.version), opsets.get(domain, 0))
    label = graph_label(model)
    if not model.opset_import:
        if model.ir_version >= 3:
            raise FrontendError(
                f"ONNX model {label} imports no opset (opset_import is empty): the file is "
                "malformed or truncated; re-export it with an explicit opset"
            )
        opsets[""] = 1
    default = opsets.get("")
    newest = newest_opset()
    if default is None:
        uses_default = any(n.domain in ("", "ai.onnx") for n in model.graph.node)
        if uses_default:
            raise FrontendError(
                f"ONNX model {label} uses default-domain ops but does not import the default "
                "opset; fix opset_import"
            )
    elif default < MIN_OPSET:
        raise FrontendError(
            f"ONNX model {label} uses opset {default}; ember supports opsets {MIN_OPSET} to "
            f"{newest}. Convert it first: onnx.version_converter.convert_version(model, "
            f"{MIN_OPSET + 6})"
        )
    elif default > newest:
        raise FrontendError(
            f"ONNX model {label} uses opset {default}, newer than the installed onnx package "
            f"knows ({newest}); upgrade onnx or export with opset <= {newest}"
        )
    return opsets


def topological_nodes(graph: onnx.GraphProto, input_names: Sequence[str]) -> list[int]:
    """Indices of the graph's nodes in a dependency order (the file order when it is one).

    Checks single assignment (no name produced twice), that every consumed name is
    produced, and that the graph has no cycle; raises FrontendError naming the nodes.
    """
    label = f"'{graph.name}'" if graph.name else "(unnamed graph)"
    producer: dict[str, str] = {name: "a graph input or initializer" for name in input_names}
    node_of: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        who = _node_label(node, i)
        for out in node.output:
            if not out:
                continue
            if out in producer:
                raise FrontendError(
                    f"graph {label}: value '{out}' is produced twice, by {producer[out]} and "
                    f"by {who}; ONNX requires unique output names (fix the exporter)"
                )
            producer[out] = who
            node_of[out] = i
    deps: list[set[int]] = []
    for i, node in enumerate(graph.node):
        needs: set[int] = set()
        for name in _consumed_names(node):
            if name not in producer:
                raise FrontendError(
                    f"graph {label}: {_node_label(node, i)} reads '{name}', which no node, "
                    "graph input or initializer produces (a missing initializer?); the "
                    "model is incomplete"
                )
            if name in node_of:
                needs.add(node_of[name])
        deps.append(needs)
    for out in graph.output:
        if out.name not in producer:
            raise FrontendError(
                f"graph {label}: output '{out.name}' is produced by no node, graph input or "
                "initializer; the model is incomplete"
            )
    return _kahn(graph, deps, label)


def _kahn(graph: onnx.GraphProto, deps: list[set[int]], label: str) -> list[int]:
    """Stable topological order (smallest ready index first); FrontendError on a cycle."""

    users: list[list[int]] = [[] for _ in deps]
    missing = [len(d) for d in deps]
    for i, needs in enumerate(deps):
        for j in needs:
            users[j].append(i)
    ready = [i for i, n in enumerate(missing) if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            missing[u] -= 1
            if missing[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(deps):
        stuck = [_node_label(graph.node[i], i) for i, n in enumerate(missing) if n > 0]
        shown = ", ".join(stuck[:10]) + (", ..." if len(stuck) > 10 else "")
        raise FrontendError(
            f"graph {label} has a cycle: {len(stuck)} nodes depend on each other's outputs "
            f"({shown}); an ONNX graph must be acyclic"
        )
    return order


def _consumed_names(node: onnx.NodeProto) -> list[str]:
    """Names a node reads: its inputs, plus outer-scope names its subgraphs read."""
    names = [n for n in node.input if n]
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for g in graphs:
            names.extend(_outer_names(g))
    return names


def _outer_names(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads from its enclosing scope."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        local.update(o for o in node.output if o)
    outer: list[str] = []
    for node in graph.node:
        outer.extend(n for n in _consumed_names(node) if n not in local)
    outer.extend(o.name for o in graph.output if o.name not in local)
    return outer


def _node_label(node: onnx.NodeProto, index: int) -> str:
    name = node.name or f"#{index}"
    return f"node '{name}' ({node.op_type})"


@dataclass(frozen=True)
class Unsupported:
    """One unsupported (op, domain, opset) and the input dtypes and nodes that use it."""

    op_type: str
    domain: str
    opset: int
    dtypes: tuple[str, ...]
    reason: str
    nodes: tuple[str, ...]

    def describe(self) -> str:
        """One line of the report."""
        domain = self.domain or "ai.onnx"
        dtypes = ""
        if self.dtypes:
            plural = "s" if len(self.dtypes) > 1 else ""
            dtypes = f", input dtype{plural} {', '.join(self.dtypes)}"
        nodes = ", ".join(self.nodes[:8]) + (
            f", ... ({len(self.nodes)} nodes)" if len(self.nodes) > 8 else ""
        )
        head = f"  - {self.op_type} (domain {domain}, opset {self.opset}{dtypes})"
        return f"{head}: {self.reason}; nodes: {nodes}"


def find_unsupported(
    graph: onnx.GraphProto,
    order: Sequence[int],
    opsets: Mapping[str, int],
    value_dtypes: Mapping[str, str],
) -> list[Unsupported]:
    """Every node without a usable handler, grouped by (op, domain, opset, reason)."""
    groups: dict[tuple[str, str, int, str], tuple[set[str], list[str]]] = {}
    for i, node in _with_subgraph_nodes([(i, graph.node[i]) for i in order]):
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        opset = opsets.get(domain, 0)
        first = next((n for n in node.input if n), None)
        dtype = value_dtypes.get(first) if first else None
        handler = find_handler(node.op_type, opset, domain) if opset else None
        if opset == 0:
            reason = f"the model does not import domain '{domain}' in opset_import"
        elif handler is None:
            reason = "no handler"
        elif handler.dtypes is not None and dtype is not None and dtype not in handler.dtypes:
            reason = f"handler supports input dtypes {', '.join(sorted(handler.dtypes))} only"
        else:
            continue
        dtypes, nodes = groups.setdefault((node.op_type, domain, opset, reason), (set(), []))
        if dtype:
            dtypes.add(dtype)
        nodes.append(node.name or f"#{i}")
    return [
        Unsupported(op, dom, ver, tuple(sorted(dts)), reason, tuple(nodes))
        for (op, dom, ver, reason), (dts, nodes) in groups.items()
    ]


def _with_subgraph_nodes(
    nodes: Sequence[tuple[int, onnx.NodeProto]],
) -> list[tuple[int, onnx.NodeProto]]:
    """``nodes`` followed by the nodes of their subgraphs (If branches, ...), recursively,
    indexed by their position in their own graph."""
    out = list(nodes)
    for _, node in nodes:
        for attr in node.attribute:
            graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
            for sub in graphs:
                out += _with_subgraph_nodes(list(enumerate(sub.node)))
    return out


def raise_unsupported(label: str, problems: Sequence[Unsupported]) -> None:
    """Raise one OpNotSupportedError listing every problem, if there is any."""
    if not problems:
        return
    count = sum(len(p.nodes) for p in problems)
    lines = [
        f"ONNX model {label}: {count} node(s) use operators ember does not support "
        "(nothing was converted):",
        *(p.describe() for p in problems),
        "Supported ONNX ops: " + ", ".join(supported_ops()),
    ]
    raise OpNotSupportedError("\n".join(lines))


def infer_value_dtypes(model: onnx.ModelProto, input_dtypes: Mapping[str, str]) -> dict[str, str]:
    """Element types of every value (by name) from onnx type inference on a light copy.

    The copy has no tensor data (initializers become typed inputs), so this is cheap even
    for large models; ``input_dtypes`` overrides the declared input types. Values whose
    type cannot be inferred are absent.
    """
    graph = model.graph
    light = onnx.GraphProto(name=graph.name)
    light.node.extend(graph.node)
    light.output.extend(graph.output)
    seen: set[str] = set()
    for t in graph.initializer:
        light.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        seen.add(t.name)
    for inp in graph.input:
        if inp.name in seen:
            continue
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(inp)
        if inp.name in input_dtypes:
            elem = onnx.helper.np_dtype_to_tensor_dtype(_np_dtype(input_dtypes[inp.name]))
            vi.type.tensor_type.elem_type = elem
        light.input.append(vi)
    lmodel = onnx.helper.make_model(light, opset_imports=list(model.opset_import))
    lmodel.ir_version = model.ir_version or lmodel.ir_version
    try:
        inferred = onnx.shape_inference.infer_shapes(lmodel).graph
        infos = list(inferred.value_info) + list(inferred.input) + list(inferred.output)
    except Exception:  # inference is best effort; unknown types are simply not checked
        infos = list(light.input) + list(graph.value_info) + list(graph.output)
    out: dict[str, str] = {}
    for vi in infos:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.elem_type:
            continue
        try:
            out[vi.name] = onnx_elem_dtype(tt.elem_type, vi.name)
        except FrontendError:
            out[vi.name] = onnx_elem_name(tt.elem_type).lower()
    return out
