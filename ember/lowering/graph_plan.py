"""Graph planning: fused IRModule -> graph JSON with a liveness-based storage plan.

Input: ``main`` whose body calls primitive Functions (attribute ``Primitive=1``, made by
``ember.transform.fuse_ops``); a bare op call is wrapped into a one-op group on the fly.
Output: a :class:`GraphPlan` holding the graph JSON (TVM's format), the parameters it needs
(model parameters plus constants lifted out of the groups) and the kernels to lower, one per
distinct group, named deterministically.

Storage plan: model inputs and parameters own their storage; each kernel output takes the
smallest free storage that is large enough (else grows the largest free one, else a new one);
a storage is freed after the last kernel reading it has run, never in place, and graph outputs
are never reused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ember.errors import CompileError
from ember.formats.graph_json import OP_KERNEL, OP_NULL, GraphJSON, Node, NodeEntry, OpAttrs
from ember.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    Tuple,
    TupleGetItem,
    Var,
    post_order,
    rewrite,
)
from ember.ir.module import IRModule
from ember.ir.op import Attrs, OpDef
from ember.ir.structural import structural_equal, structural_hash
from ember.ir.types import TensorType, TupleType, Type
from ember.support.dtypes import dtype_info

#: constants with at most this many elements stay inside kernels as immediates.
MAX_INLINE_CONSTANT = 1

KERNEL_PREFIX = "ember_"


@dataclass(frozen=True)
class GraphPlan:
    """The result of graph planning: the graph, the parameters it reads, the kernels to build."""

    graph: GraphJSON
    params: Mapping[str, np.ndarray]
    kernels: Mapping[str, Function] = field(default_factory=dict)


def _flat_types(ty: Type) -> list[TensorType]:
    if isinstance(ty, TupleType):
        out: list[TensorType] = []
        for f in ty.fields:
            out.extend(_flat_types(f))
        return out
    if not isinstance(ty, TensorType):
        raise CompileError(f"cannot plan storage for a value of type {ty}")
    return [ty]


def _group_of(call: Call) -> Function:
    """The primitive function a main-level call applies (bare op calls become one-op groups)."""
    if isinstance(call.op, Function):
        return call.op
    params = tuple(Var(f"p{i}", a.type) for i, a in enumerate(call.args))
    body = Call(call.op, params, call.attrs, name=call.name)
    return Function(params, body, Attrs({"Primitive": 1}))


def _lift_constants(func: Function) -> tuple[Function, list[Constant]]:
    """Move constants larger than MAX_INLINE_CONSTANT out of ``func`` into new parameters."""
    lifted: list[Constant] = []
    if "ExternalConstants" in list(func.attrs):
        return func, []  # a region whose external artifact owns its constants
    new_params: dict[int, Var] = {}
    for node in post_order(func.body):
        big = isinstance(node, Constant) and node.type.size > MAX_INLINE_CONSTANT
        if big and id(node) not in new_params:
            assert isinstance(node, Constant)
            new_params[id(node)] = Var(f"c{len(lifted)}", node.type)
            lifted.append(node)
    if not lifted:
        return func, []
    body = rewrite(func.body, lambda n, _new: new_params.get(id(n)))
    params = func.params + tuple(new_params[id(c)] for c in lifted)
    return Function(params, body, func.attrs), lifted


def _group_name(func: Function) -> str:
    """A readable kernel name from the ops of a group: ``fused_nn_conv_add_relu``."""
    names = []
    for node in post_order(func.body):
        if isinstance(node, Call) and isinstance(node.op, OpDef):
            names.append(re.sub(r"[^0-9a-zA-Z]+", "_", node.op.name).strip("_"))
    stem = "_".join(names[:4]) or "copy"
    if len(names) > 4:
        stem += f"_{len(names) - 4}more"
    kind = dict(func.attrs).get("Compiler", "")  # a partitioned region: named after its kind
    return f"{kind}_" * bool(kind) + ("fused_" if len(names) > 1 else "") + stem


def source_attrs(func: Function, op_types: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """A kernel node's record of what it computes, as graph JSON string attributes (JSON
    lists): ``onnx_nodes`` (the source node names fused into it, in order),
    ``onnx_op_types`` (their op types, where the frontend recorded them) and ``ops`` (the IR
    ops)."""
    nodes: list[str] = []
    ops: list[str] = []
    for node in post_order(func.body):
        if isinstance(node, Call) and isinstance(node.op, OpDef):
            ops.append(node.op.name)
            if node.name and node.name not in nodes:
                nodes.append(node.name)
    known = [n for n in nodes if n in op_types]
    if known:  # names a handler derived (``conv_bias``) belong to a node already listed
        nodes = known
    types = [op_types[n] for n in known]
    return (
        ("onnx_nodes", json.dumps(nodes)),
        ("onnx_op_types", json.dumps(types)),
        ("ops", json.dumps(ops)),
    )


class _Planner:
    """Walks ``main`` once, building nodes, params and kernels in a deterministic order."""

    def __init__(
        self, params: Mapping[str, np.ndarray], op_types: Mapping[str, str] | None = None
    ) -> None:
        self.op_types: Mapping[str, str] = op_types or {}
        self.params: dict[str, np.ndarray] = dict(params)
        self.nodes: list[Node] = []
        self.types: list[list[TensorType]] = []
        self.entries: dict[int, list[NodeEntry]] = {}
        self.kernels: dict[str, Function] = {}
        self.const_names: dict[int, str] = {}
        self.used_names: dict[str, int] = {}
        self.by_hash: dict[int, list[str]] = {}

    def add_null(self, name: str, ty: TensorType) -> list[NodeEntry]:
        self.nodes.append(Node(OP_NULL, name))
        self.types.append([ty])
        return [NodeEntry(len(self.nodes) - 1, 0)]

    def constant(self, const: Constant) -> list[NodeEntry]:
        if id(const) not in self.const_names:
            name = f"const_{len(self.const_names)}"
            self.const_names[id(const)] = name
            self.params[name] = np.asarray(const.data)
            self.entries[id(const)] = self.add_null(name, const.type)
        return self.entries[id(const)]

    def kernel_name(self, func: Function) -> str:
        stem = KERNEL_PREFIX + _group_name(func)
        count = self.used_names.get(stem, 0)
        self.used_names[stem] = count + 1
        return stem if count == 0 else f"{stem}_{count}"

    def shared_kernel(self, func: Function, name: str) -> str:
        """The kernel implementing ``func``: an earlier structurally equal one, or a new one."""
        key = structural_hash(func)
        for other in self.by_hash.get(key, []):
            if structural_equal(func, self.kernels[other], map_free_vars=True):
                return other
        self.by_hash.setdefault(key, []).append(name)
        self.kernels[name] = func
        return name

    def call(self, call: Call) -> list[NodeEntry]:
        func, lifted = _lift_constants(_group_of(call))
        inputs: list[NodeEntry] = []
        for arg in call.args:
            inputs.extend(self.value(arg))
        for const in lifted:
            inputs.extend(self.constant(const))
        name = self.kernel_name(func)
        func_name = self.shared_kernel(func, name)
        out_types = _flat_types(func.ret_type)
        attrs = OpAttrs(
            func_name, len(inputs), len(out_types), extra=source_attrs(func, self.op_types)
        )
        self.nodes.append(Node(OP_KERNEL, name, tuple(inputs), attrs))
        self.types.append(out_types)
        nid = len(self.nodes) - 1
        return [NodeEntry(nid, i) for i in range(len(out_types))]

    def value(self, expr: Expr) -> list[NodeEntry]:
        if id(expr) in self.entries:
            return self.entries[id(expr)]
        if isinstance(expr, Constant):
            return self.constant(expr)
        raise CompileError(f"value {expr!r} used before it was planned (graph not in order?)")

    def visit(self, node: Expr) -> None:
        if isinstance(node, Var | Function):
            return  # params are added up front; functions are visited through calls
        if isinstance(node, Constant):
            return  # added on first use, so unused constants cost nothing
        if isinstance(node, Call):
            self.entries[id(node)] = self.call(node)
        elif isinstance(node, Tuple):
            flat: list[NodeEntry] = []
            for f in node.fields:
                flat.extend(self.value(f))
            self.entries[id(node)] = flat
        elif isinstance(node, TupleGetItem):
            src = self.value(node.tuple_value)
            ty = node.tuple_value.type
            assert isinstance(ty, TupleType)
            start = sum(len(_flat_types(f)) for f in ty.fields[: node.index])
            width = len(_flat_types(ty.fields[node.index]))
            self.entries[id(node)] = src[start : start + width]
        else:
            raise CompileError(f"cannot plan {type(node).__name__} in main")


def plan_graph(mod: IRModule, params: Mapping[str, np.ndarray] | None = None) -> GraphPlan:
    """Turn a fused module's ``main`` into graph JSON, parameters and kernels to lower."""
    main = mod.main
    raw_types = mod.attrs.get("onnx_op_types")
    pairs = raw_types if isinstance(raw_types, list | tuple) else []
    op_types = {str(p[0]): str(p[1]) for p in pairs if isinstance(p, list | tuple) and len(p) == 2}
    planner = _Planner(params or {}, op_types)
    for var in main.params:
        ty = var.type
        if not isinstance(ty, TensorType):
            raise CompileError(f"input '{var.name}' has non-tensor type {ty}")
        planner.entries[id(var)] = planner.add_null(var.name, ty)
    for node in post_order(main.body):
        planner.visit(node)
    heads = planner.value(main.body)
    shapes = [t.shape for types in planner.types for t in types]
    dtypes = [t.dtype for types in planner.types for t in types]
    storage = _plan_storage(planner.nodes, planner.types, heads)
    out_names = mod.attrs.get("output_names")
    names = [str(n) for n in out_names] if isinstance(out_names, list | tuple) else None
    if names is not None and (len(names) != len(heads) or len(set(names)) != len(names)):
        names = None  # a tuple-valued output or a repeated name: keep the positional names
    graph = GraphJSON.create(
        planner.nodes, heads, shapes, dtypes, storage_id=storage, output_names=names
    )
    used = {planner.nodes[i].name for i in graph.arg_nodes}
    kept = {k: v for k, v in sorted(planner.params.items()) if k in used}
    return GraphPlan(graph, kept, dict(planner.kernels))


def _nbytes(ty: TensorType) -> int:
    return max(1, ty.size * dtype_info(ty.dtype).bits // 8)


def _plan_storage(
    nodes: list[Node], types: list[list[TensorType]], heads: list[NodeEntry]
) -> list[int]:
    """Assign storage ids to every entry (see the module docstring for the rules)."""
    row = [0]
    for t in types:
        row.append(row[-1] + len(t))
    eid_of = {(nid, i): row[nid] + i for nid in range(len(nodes)) for i in range(len(types[nid]))}
    pinned = {eid_of[(h.node_id, h.index)] for h in heads}
    uses = [0] * row[-1]
    for node in nodes:
        for e in node.inputs:
            uses[eid_of[(e.node_id, e.index)]] += 1
    storage = [-1] * row[-1]
    sizes: list[int] = []
    free: list[int] = []
    for nid, node in enumerate(nodes):
        for i, ty in enumerate(types[nid]):
            eid = row[nid] + i
            need = _nbytes(ty)
            if node.op == OP_NULL or eid in pinned or not free:
                sid = len(sizes)
                sizes.append(need)
            else:
                fitting = [s for s in free if sizes[s] >= need]
                sid = (
                    min(fitting, key=lambda s: (sizes[s], s))
                    if fitting
                    else max(free, key=lambda s: (sizes[s], -s))
                )
                free.remove(sid)
                sizes[sid] = max(sizes[sid], need)
            storage[eid] = sid
        for e in node.inputs:
            eid = eid_of[(e.node_id, e.index)]
            uses[eid] -= 1
            src = nodes[e.node_id]
            if uses[eid] == 0 and src.op != OP_NULL and eid not in pinned:
                free.append(storage[eid])
    return storage
