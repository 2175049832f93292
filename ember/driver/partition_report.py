"""Which model node went where: the partition map of a composite target's build, as
``partition.json`` (a metadata artifact: ``ember inspect OUT --show partition.json``) and as
the ``## partition`` section of ``Lowered.as_text()``."""

from __future__ import annotations

import json

from ember.ir.expr import Call, Function, post_order
from ember.ir.module import IRModule
from ember.ir.op import OpDef
from ember.lowering.graph_plan import GraphPlan
from ember.runtime.artifact import METADATA_LOADER, Artifact
from ember.target import Target
from ember.transform.partition import COMPILER_ATTR

#: the metadata artifact that records which node went where.
PARTITION_FILE = "partition.json"
PARTITION_CODEGEN = "partition"


def partition_map(ir: IRModule, plan: GraphPlan, target: Target) -> list[dict[str, str]]:
    """Which model node went where: one row per op of every fused group of ``ir`` (the
    ONNX node name, the op, the kind that runs it, the pattern that claimed it, the graph
    node that calls its kernel)."""
    groups = [
        n for n in post_order(ir.main.body) if isinstance(n, Call) and isinstance(n.op, Function)
    ]
    calls = [n.name for n in plan.graph.nodes if n.attrs is not None]
    names = calls if len(calls) == len(groups) else [""] * len(groups)
    rows = []
    for group, kernel in zip(groups, names, strict=True):
        assert isinstance(group.op, Function)
        attrs = dict(group.op.attrs)
        where = str(attrs.get(COMPILER_ATTR, target.kind.name))
        pattern = str(attrs.get("Composite", ""))
        for call in post_order(group.op.body):
            if isinstance(call, Call) and isinstance(call.op, OpDef):
                name = call.name or "<unnamed>"
                row = {"node": name, "op": call.op.name, "where": where, "pattern": pattern}
                rows.append({**row, "kernel": kernel})
    return rows


def partition_artifacts(ir: IRModule, plan: GraphPlan, target: Target) -> list[Artifact]:
    """``partition.json`` (a metadata artifact; ``ember inspect --show partition.json``)
    for a composite target; nothing for a plain one."""
    if not target.externals:
        return []
    doc = {"target": str(target), "nodes": partition_map(ir, plan, target)}
    text = json.dumps(doc, indent=1).encode()
    return [Artifact(PARTITION_CODEGEN, METADATA_LOADER, PARTITION_FILE, text)]


def partition_lines(ir: IRModule, plan: GraphPlan, target: Target) -> list[str]:
    """The partition map as text lines for ``Lowered.as_text``."""
    return [
        f"  {r['node']:<24} {r['op']:<14} -> {r['where']:<10} {r['pattern']:<28} {r['kernel']}"
        for r in partition_map(ir, plan, target)
    ]
