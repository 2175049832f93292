"""ONNX handlers for control flow whose shapes stay static: If with a condition known at
build time folds away (the taken branch is converted inline; both branches' ops were
checked up front by the unsupported-op report).

A data-dependent condition is refused with the node named: ember compiles one static
graph; bind the inputs the condition depends on (make them initializers) to fold it.
"""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import ALL_TYPES, onnx_op
from ember.ir.expr import Expr


@onnx_op("If", since=1, dtypes=ALL_TYPES)
def if_(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """If: the branch the (constant) condition selects, converted inline."""
    cond = ctx.require_const(node.input(0), "the If condition")
    flat = np.asarray(cond).reshape(-1)
    if flat.size != 1:
        ctx.fail(node, f"the condition must hold one element, got shape {np.shape(cond)}")
    branch = "then_branch" if bool(flat[0]) else "else_branch"
    graph = node.attr(branch)
    if ctx.convert_subgraph is None:
        ctx.fail(node, "subgraphs can only be converted by the importer (from_onnx)")
    outputs = ctx.convert_subgraph(ctx, graph)
    if len(outputs) != node.num_outputs:
        ctx.fail(
            node,
            f"the {branch} has {len(outputs)} outputs but the node has {node.num_outputs}",
        )
    return list(outputs)
