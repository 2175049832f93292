"""Which model node went where: the partition map of a composite target's build, as
``partition.json`` (a metadata artifact: ``ember inspect OUT --show partition.json``) and as
the ``## partition`` section of ``Lowered.as_text()``."""

from __future__ import annotations

import json

from ember.ir.expr import Call, post_order
from ember.ir.op import OpDef
from ember.lowering.graph_plan import GraphPlan
from ember.runtime.artifact import METADATA_LOADER, Artifact
from ember.target import Target
from ember.transform.partition import COMPILER_ATTR

#: the metadata artifact that records which node went where.
PARTITION_FILE = "partition.json"
PARTITION_CODEGEN = "partition"


def partition_map(plan: GraphPlan, target: Target) -> list[dict[str, str]]:
    """Which model node went where: one row per op of each graph node's kernel (the ONNX
    node name, the op, the kind that runs it, the pattern that claimed it, the kernel)."""
    rows = []
    host = target.kind.name
    for node in plan.graph.nodes:
        func = plan.kernels.get(node.attrs.func_name) if node.attrs is not None else None
        if func is None:
            continue
        attrs = dict(func.attrs)
        where = str(attrs.get(COMPILER_ATTR, host))
        pattern = str(attrs.get("Composite", ""))
        for call in post_order(func.body):
            if isinstance(call, Call) and isinstance(call.op, OpDef):
                rows.append(
                    {
                        "node": call.name or "<unnamed>",
                        "op": call.op.name,
                        "where": where,
                        "pattern": pattern,
                        "kernel": node.name,
                    }
                )
    return rows


def partition_artifacts(plan: GraphPlan, target: Target) -> list[Artifact]:
    """``partition.json`` (a metadata artifact; ``ember inspect --show partition.json``)
    for a composite target; nothing for a plain one."""
    if not target.externals:
        return []
    doc = {"target": str(target), "nodes": partition_map(plan, target)}
    text = json.dumps(doc, indent=1).encode()
    return [Artifact(PARTITION_CODEGEN, METADATA_LOADER, PARTITION_FILE, text)]


def partition_lines(plan: GraphPlan, target: Target) -> list[str]:
    """The partition map as text lines for ``Lowered.as_text``."""
    return [
        f"  {r['node']:<24} {r['op']:<14} -> {r['where']:<10} {r['pattern']:<28} {r['kernel']}"
        for r in partition_map(plan, target)
    ]
