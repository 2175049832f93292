"""Kernel scratch in a graph-executor build: planned once, not allocated per call.

The graph build's counterpart of :mod:`ember.lowering.aot_scratch`: every kernel's heap
buffers outside parallel loops move into a last ``scratch`` parameter
(:func:`~ember.lowering.aot_scratch.plan_scratch`), and each graph node calling such a
kernel carries its size as attribute :data:`~ember.formats.graph_json.SCRATCH_ATTR`. The
graph executor places each node's scratch in its workspace, live for that node's call
(:mod:`ember.formats.graph_memory`, the AOT build's plan), so a run allocates nothing.
Kernels called by other kernels (``HELPER_ATTR``) and other modules' kernels are left as
they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ember.formats.graph_json import SCRATCH_ATTR, GraphJSON, OpAttrs
from ember.lowering.aot import HELPER_ATTR
from ember.lowering.aot_scratch import plan_scratch
from ember.tir import PrimFunc


def plan_graph_scratch(
    graph: GraphJSON, funcs: Sequence[PrimFunc], alignment: int
) -> tuple[GraphJSON, tuple[PrimFunc, ...]]:
    """``graph`` with each kernel node's scratch size, and ``funcs`` with their top-level
    heap buffers in a scratch parameter (functions without any are returned as they are)."""
    sizes: dict[str, int] = {}
    out: list[PrimFunc] = []
    for func in funcs:
        if func.attrs.get(HELPER_ATTR):
            out.append(func)
            continue
        kernel = plan_scratch(func, alignment)
        out.append(kernel.func)
        if kernel.scratch_bytes:
            sizes[func.name] = kernel.scratch_bytes
    if not sizes:
        return graph, tuple(out)
    nodes = []
    for node in graph.nodes:
        a = node.attrs
        if a is not None and a.func_name in sizes:
            extra = (
                *(kv for kv in a.extra if kv[0] != SCRATCH_ATTR),
                (SCRATCH_ATTR, str(sizes[a.func_name])),
            )
            attrs = OpAttrs(a.func_name, a.num_inputs, a.num_outputs, a.flatten_data, extra)
            node = replace(node, attrs=attrs)
        nodes.append(node)
    return replace(graph, nodes=tuple(nodes)), tuple(out)
