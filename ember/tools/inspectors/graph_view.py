"""The fused graph of a build, read from its ``graph.json``: what each kernel computes.

Every kernel node of a graph JSON records the source (ONNX) nodes fused into it, their op
types and the IR ops (``ember.lowering.graph_plan.source_attrs``), so the fused graph can
be shown from any build output (a package, a saved directory, a library) without the ONNX
file. Three renderings: rows as plain data (:func:`kernel_rows`, for ``--json`` and the
HTML report), text (:func:`graph_text`) and a memory map of the graph executor's workspace
(:func:`graph_memory_map`, drawn by :mod:`ember.tools.memory_svg`)::

    graph = find_graph(source.artifacts)
    print(graph_text(graph))
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ember.executor.metadata_module import GRAPH_JSON_FILE
from ember.executor.profile import node_sources
from ember.formats.graph_json import OP_NULL, GraphJSON, load_graph_json
from ember.formats.graph_memory import graph_buffers, kernel_steps, plan_graph_memory
from ember.formats.memory_map import BufferPlacement, MemoryMap
from ember.formats.metadata import STORAGE_ALIGNMENT
from ember.runtime.artifact import AnyArtifact, Artifact


def find_graph(artifacts: Iterable[AnyArtifact]) -> GraphJSON | None:
    """The graph of the first ``graph.json`` artifact, or None when there is none."""
    for art in artifacts:
        if isinstance(art, Artifact) and art.file_name == GRAPH_JSON_FILE:
            return load_graph_json(art.content)
    return None


def _entry_name(graph: GraphJSON, eid: int) -> str:
    nid = max(n for n in range(len(graph.nodes)) if graph.node_row_ptr[n] <= eid)
    index = eid - graph.node_row_ptr[nid]
    name = graph.nodes[nid].name
    return name if graph.nodes[nid].num_outputs == 1 else f"{name}.{index}"


def kernel_rows(graph: GraphJSON) -> list[dict[str, Any]]:
    """One dict per kernel node, in run order: names, ONNX nodes, op types, IR ops,
    inputs (by producer name) and outputs (shape, dtype, storage id)."""
    rows = []
    outputs = set(graph.output_entry_ids())
    for nid, node in enumerate(graph.nodes):
        if node.op == OP_NULL or node.attrs is None:
            continue
        onnx_nodes, op_types = node_sources(node.attrs.extra)
        try:
            ops = json.loads(dict(node.attrs.extra).get("ops", "[]"))
        except ValueError:
            ops = []
        first = graph.node_row_ptr[nid]
        rows.append(
            {
                "node_id": nid,
                "name": node.name,
                "func_name": node.attrs.func_name,
                "onnx_nodes": list(onnx_nodes),
                "op_types": list(op_types),
                "ops": [str(o) for o in ops] if isinstance(ops, list) else [],
                "inputs": [_entry_name(graph, graph.entry_id(e)) for e in node.inputs],
                "outputs": [
                    {
                        "entry": e,
                        "shape": list(graph.shape[e]),
                        "dtype": graph.dltype[e],
                        "storage_id": graph.storage_id[e],
                        "graph_output": e in outputs,
                    }
                    for e in range(first, first + node.num_outputs)
                ],
            }
        )
    return rows


def graph_text(graph: GraphJSON) -> str:
    """The fused graph as text: one block per kernel with the ONNX nodes fused into it."""
    inputs = [graph.nodes[n].name for n in graph.arg_nodes]
    lines = [f"fused graph: {len(kernel_rows(graph))} kernels, {len(inputs)} inputs/params"]
    names = graph.output_names or tuple(f"output{i}" for i in range(len(graph.heads)))
    for row in kernel_rows(graph):
        outs = ", ".join(f"{o['shape']} {o['dtype']} @s{o['storage_id']}" for o in row["outputs"])
        lines.append(f"  {row['node_id']:>3} {row['name']}({', '.join(row['inputs'])}) -> {outs}")
        if row["func_name"] != row["name"]:
            lines.append(f"        kernel:     {row['func_name']}")
        if row["onnx_nodes"]:
            lines.append(f"        onnx nodes: {', '.join(row['onnx_nodes'])}")
        if row["op_types"]:
            lines.append(f"        op types:   {', '.join(row['op_types'])}")
        lines.append(f"        ir ops:     {', '.join(row['ops'])}")
    heads = [_entry_name(graph, e) for e in graph.output_entry_ids()]
    lines.append("  outputs: " + ", ".join(f"{n} = {h}" for n, h in zip(names, heads, strict=True)))
    return "\n".join(lines) + "\n"


def graph_memory_map(graph: GraphJSON) -> MemoryMap:
    """The graph executor's workspace as a memory map (the placement it computes when it
    loads ``graph``, :func:`ember.formats.graph_memory.plan_graph_memory`): each intermediate
    live from the step that writes it to its last reader, each kernel's scratch (listed as
    ``<node> scratch`` with the node's id as entry) for its step; inputs, parameters and
    outputs keep storages of their own and are not drawn."""
    memory = plan_graph_memory(graph, STORAGE_ALIGNMENT)
    owner = {}
    for nid, node in enumerate(graph.nodes):
        for eid in range(graph.node_row_ptr[nid], graph.node_row_ptr[nid + 1]):
            owner[eid] = node.name
    rows = []
    for b in graph_buffers(graph):
        eid = int(b.name[1:])
        offset = memory.entry_offsets.get(eid)
        if offset is not None:
            rows.append(BufferPlacement(eid, owner[eid], offset, b.size, b.start, b.end))
    steps = kernel_steps(graph)
    for nid, (offset, nbytes) in memory.scratch.items():
        name = graph.nodes[nid].name + " scratch"
        rows.append(BufferPlacement(nid, name, offset, nbytes, steps[nid], steps[nid]))
    rows.sort(key=lambda r: (r.offset, r.first_step, r.entry))
    plan = memory.plan
    return MemoryMap(plan.size, plan.lower_bound, plan.alignment, plan.algorithm, tuple(rows))
