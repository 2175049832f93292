"""AOT lowering: a planned graph + its kernels -> one run function in loop IR.

The run function ``ember_<mod>_run_model`` takes the model's inputs, then its outputs,
then its constants (each a buffer, in the order of :class:`AotProgram`), then the workspace
(a handle to ``workspace_size_bytes`` bytes, so that each executor has its own and runs
never share memory), and calls every
kernel's unpacked C entry (``<symbol>_unpacked``, the runtime ABI; or its packed one,
see ``calling_convention``) in graph order, and kernels of other modules (the artifacts of a
``relay_to_runtime`` hook) by name through the runtime (``call_packed``); each
call's status is checked, so a kernel's error fails the run with its message. Every
intermediate lives at a fixed offset of that workspace (``pool="workspace"``),
placed by :func:`ember.support.memory_plan.plan_memory`; nothing is allocated per run.
An output that is not written by a kernel (an input or a constant returned as is, or one
value returned twice) is copied by a loop in the run function.

Name mangling, so that models built with different ``mod_name``s link into one program:
kernel ``ember_fused_conv_relu`` of model ``net`` becomes ``ember_net_fused_conv_relu``;
the run function is ``ember_net_run_model`` (packed) and ``ember_net_run_model_unpacked``
(pointers only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from ember.errors import CompileError
from ember.formats.graph_json import OP_NULL, SCRATCH_ATTR, GraphJSON, Node, OpAttrs
from ember.formats.graph_memory import graph_buffers
from ember.formats.metadata import FunctionInfo, ParameterInfo
from ember.lowering.aot_scratch import ScratchKernel, plan_scratch, static_nbytes
from ember.lowering.graph_plan import KERNEL_PREFIX
from ember.support.memory_plan import Buffer as Interval
from ember.support.memory_plan import MemoryPlan, plan_memory
from ember.tir import (
    PrimFunc,
    Var,
    call_cpacked,
    call_extern,
    call_packed,
    decl_buffer,
    eq,
    for_range,
    seq,
    store,
)
from ember.tir.buffer import Buffer
from ember.tir.expr import Cast, PrimExpr
from ember.tir.functor import post_order_visit
from ember.tir.simplify import const_int
from ember.tir.stmt import Allocate, AssertStmt, ForKind, Stmt, StorageKind

#: suffix of a kernel's unpacked C entry (the runtime ABI; codegen.c.abi agrees, tested).
UNPACKED_SUFFIX = "_unpacked"
#: the pool every intermediate of the run function lives in: its last parameter, a handle.
WORKSPACE_POOL = "workspace"
#: kernel calls per segment of the run function; a segment declares the workspace buffers
#: it touches, so nesting stays shallow however many intermediates a model has.
SEGMENT_CALLS = 16
#: PrimFunc attribute of a function called by another kernel (a control-flow body's run
#: function and kernels): built as it is, not renamed, never called by the run function.
HELPER_ATTR = "called_by_kernel"


@dataclass(frozen=True)
class AotProgram:
    """The run function, the renamed kernels it calls and the plan of its workspace."""

    run_func: PrimFunc
    kernels: tuple[PrimFunc, ...]
    memory: MemoryPlan
    intervals: tuple[Interval, ...]
    input_names: tuple[str, ...]
    param_names: tuple[str, ...]
    num_outputs: int
    graph: GraphJSON
    scratch_bytes: Mapping[str, int]

    @property
    def run_symbol(self) -> str:
        """The packed symbol of the run function."""
        return self.run_func.name


def mangle(mod_name: str, kernel: str) -> str:
    """The AOT symbol of ``kernel`` in model ``mod_name`` (see the module docstring)."""
    return f"{KERNEL_PREFIX}{mod_name}_{kernel.removeprefix(KERNEL_PREFIX)}"


def run_symbol(mod_name: str) -> str:
    """The packed symbol of model ``mod_name``'s run function."""
    return mangle(mod_name, "run_model")


def build_aot(
    graph: GraphJSON,
    params: Mapping[str, object],
    funcs: Sequence[PrimFunc],
    mod_name: str,
    alignment: int,
    calling_convention: str = "unpacked",
) -> AotProgram:
    """Plan the workspace and write the run function of ``graph`` (kernels in ``funcs``);
    operators are called through their unpacked entry, (``cpacked``) their packed one, or
    (``packed``) a lookup through the runtime; a node whose kernel is not in ``funcs`` (a
    ``relay_to_runtime`` artifact's) is always called through a lookup."""
    kernels: dict[str, ScratchKernel] = {}
    helpers = tuple(f for f in funcs if f.attrs.get(HELPER_ATTR))
    for f in funcs:
        if f.attrs.get(HELPER_ATTR):
            continue
        kernels[f.name] = plan_scratch(replace(f, name=mangle(mod_name, f.name)), alignment)
    intervals = graph_buffers(graph)
    step = 0
    for nid, node in enumerate(graph.nodes):
        if node.op == OP_NULL:
            continue
        name = node.attrs.func_name if node.attrs is not None else ""
        if name in kernels and kernels[name].scratch_bytes:
            intervals.append(Interval(f"s{nid}", kernels[name].scratch_bytes, step, step))
        step += 1
    memory = plan_memory(intervals, alignment=alignment)
    bufs: dict[str, Buffer] = {}
    inputs: list[tuple[str, Buffer]] = []
    consts: list[tuple[str, Buffer]] = []
    for nid in graph.arg_nodes:
        eid = graph.node_row_ptr[nid]
        name = graph.nodes[nid].name
        role = consts if name in params else inputs
        bufs[f"e{eid}"] = _buffer(graph, eid, ("c" if role is consts else "in") + str(len(role)))
        role.append((name, bufs[f"e{eid}"]))
    outputs = [_buffer(graph, eid, f"out{i}") for i, eid in enumerate(graph.output_entry_ids())]
    copies: list[tuple[Buffer, int]] = []
    for out, eid in zip(outputs, graph.output_entry_ids(), strict=True):
        producer = _producer(graph, eid)
        if graph.nodes[producer].op == OP_NULL or f"e{eid}" in bufs:
            copies.append((out, eid))
        else:
            bufs[f"e{eid}"] = out
    offsets: dict[str, int] = {}
    for iv in intervals:
        if iv.name.startswith("e"):
            bufs[iv.name] = _buffer(graph, int(iv.name[1:]), iv.name, scope="local")
        else:
            bufs[iv.name] = decl_buffer((iv.size,), "uint8", iv.name, scope="local")
        offsets[iv.name] = memory.offset(iv.name)
    calls: list[tuple[Stmt, list[str]]] = []
    for nid, node in enumerate(graph.nodes):
        if node.op != OP_NULL:
            calls.append(_kernel_call(graph, nid, node, kernels, bufs, calling_convention))
    for out, eid in copies:
        calls.append((_copy(out, bufs[f"e{eid}"], graph, eid), [f"e{eid}"]))
    segments = [calls[k : k + SEGMENT_CALLS] for k in range(0, len(calls), SEGMENT_CALLS)]
    body = seq(*(_declare(segment, bufs, offsets) for segment in segments))
    workspace = Var(WORKSPACE_POOL, "handle")
    params_list: list[Buffer | Var] = [*(b for _, b in inputs), *outputs]
    params_list += [*(b for _, b in consts), workspace]
    run = PrimFunc(run_symbol(mod_name), tuple(params_list), body)
    return AotProgram(
        run,
        tuple(kernels[n].func for n in sorted(kernels)) + helpers,
        memory,
        tuple(intervals),
        tuple(n for n, _ in inputs),
        tuple(n for n, _ in consts),
        len(outputs),
        _renamed_graph(graph, mod_name, kernels),
        {k.func.name: k.scratch_bytes for k in kernels.values()},
    )


def _declare(
    segment: Sequence[tuple[Stmt, list[str]]], bufs: dict[str, Buffer], offsets: dict[str, int]
) -> Stmt:
    """A segment of calls inside the declarations of the workspace buffers it touches."""
    body: Stmt = seq(*(stmt for stmt, _ in segment))
    used = sorted({n for _, names in segment for n in names if n in offsets}, reverse=True)
    for name in used:
        body = Allocate(
            bufs[name], body, StorageKind.STATIC, pool=WORKSPACE_POOL, offset=offsets[name]
        )
    return body


def _buffer(graph: GraphJSON, eid: int, name: str, scope: str = "global") -> Buffer:
    return decl_buffer(graph.shape[eid], graph.dltype[eid], name, scope=scope)


def _producer(graph: GraphJSON, eid: int) -> int:
    for nid in range(len(graph.nodes)):
        if graph.node_row_ptr[nid] <= eid < graph.node_row_ptr[nid + 1]:
            return nid
    raise CompileError(f"graph entry {eid} has no producing node")


def _kernel_call(
    graph: GraphJSON,
    nid: int,
    node: Node,
    kernels: Mapping[str, ScratchKernel],
    bufs: dict[str, Buffer],
    calling_convention: str,
) -> tuple[Stmt, list[str]]:
    attrs = node.attrs
    if attrs is None:
        raise CompileError(f"AOT: node '{node.name}' calls no kernel")
    names = [f"e{graph.entry_id(e)}" for e in node.inputs]
    names += [f"e{graph.node_row_ptr[nid] + i}" for i in range(attrs.num_outputs)]
    if attrs.func_name not in kernels:
        # a kernel of another module (a relay_to_runtime artifact): found at run time
        status = call_packed(attrs.func_name, *(bufs[n].data for n in names))
        return AssertStmt(eq(status, 0), "", seq()), names
    kernel = kernels[attrs.func_name]
    tensors = [p for p in kernel.func.params if isinstance(p, Buffer)]
    scalars = len(kernel.func.params) - len(tensors) - (1 if kernel.scratch_bytes else 0)
    if len(names) != len(tensors) or scalars:
        raise CompileError(
            f"AOT: kernel '{kernel.func.name}' takes {len(kernel.func.params)} parameters, node "
            f"'{node.name}' passes {len(names)} tensors (kernels with scalar parameters need "
            "the graph executor)"
        )
    if kernel.scratch_bytes:
        names.append(f"s{nid}")
    args: list[PrimExpr] = [bufs[n].data for n in names]
    if kernel.scratch_bytes:
        args[-1] = Cast("handle", args[-1])  # the kernel's scratch parameter is a void*
    if calling_convention == "cpacked":
        status = call_cpacked(kernel.func.name, *args)
    elif calling_convention == "packed":
        status = call_packed(kernel.func.name, *args)
    else:
        status = call_extern("int32", kernel.func.name + UNPACKED_SUFFIX, *args)
    return AssertStmt(eq(status, 0), "", seq()), names


def _copy(dst: Buffer, src: Buffer, graph: GraphJSON, eid: int) -> Stmt:
    """dst = src, element by element (nested loops, the innermost vectorized)."""
    shape = graph.shape[eid]
    idx = [Var(f"i{k}", "int64" if d >= 2**31 else "int32") for k, d in enumerate(shape)]
    body: Stmt = store(dst, src[tuple(idx)] if idx else src[()], *idx)
    for k in reversed(range(len(shape))):
        kind = ForKind.VECTORIZED if k == len(shape) - 1 else ForKind.SERIAL
        body = for_range(idx[k], shape[k], body, kind)
    return body


def _renamed_graph(graph: GraphJSON, mod_name: str, ours: Mapping[str, ScratchKernel]) -> GraphJSON:
    """The graph with every node of a kernel in ``ours`` calling its AOT symbol, and its
    scratch size as attribute ``scratch_bytes`` (for per-operator profiles through a graph
    executor); other modules' kernels keep their names."""
    nodes = []
    for node in graph.nodes:
        a = node.attrs
        if a is not None and a.func_name in ours:
            kernel = ours[a.func_name]
            extra = a.extra
            if kernel.scratch_bytes:
                extra = (*extra, (SCRATCH_ATTR, str(kernel.scratch_bytes)))
            renamed = OpAttrs(kernel.func.name, a.num_inputs, a.num_outputs, a.flatten_data, extra)
            node = replace(node, attrs=renamed)
        nodes.append(node)
    return replace(graph, nodes=tuple(nodes))


def kernel_infos(aot: AotProgram) -> tuple[FunctionInfo, ...]:
    """A FunctionInfo per operator function: its tensor arguments, and the scratch bytes it
    needs per call (planned in the workspace, plus any it still allocates in parallel
    loops through the runtime)."""
    arity: dict[str, tuple[int, int]] = {}
    for node in aot.graph.nodes:
        if node.attrs is not None:
            arity[node.attrs.func_name] = (node.attrs.num_inputs, node.attrs.num_outputs)
    infos = []
    for func in aot.kernels:
        if func.attrs.get(HELPER_ATTR):
            continue  # called by a kernel (a control-flow body), not an operator
        n_in, n_out = arity.get(func.name, (len(func.params) - 1, 1))
        params = tuple(
            ParameterInfo(p.name, tuple(const_int(d) or 0 for d in p.shape), p.dtype, p.name)
            for p in func.params
            if isinstance(p, Buffer)
        )
        io = sum(p.nbytes for p in params)
        scratch = aot.scratch_bytes.get(func.name, 0) + _heap_bytes(func)
        infos.append(FunctionInfo(func.name, params, n_in, n_out, scratch, io, 0))
    return tuple(infos)


def _heap_bytes(func: PrimFunc) -> int:
    total = 0

    def visit(node: object) -> None:
        nonlocal total
        if isinstance(node, Allocate) and node.storage is StorageKind.HEAP:
            total += static_nbytes(node.buffer) or 0

    post_order_visit(func.body, visit)
    return total
