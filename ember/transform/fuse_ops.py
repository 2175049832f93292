"""fuse_ops: IRModule -> IRModule, grouping operators into primitive functions (TVM's
operator fusion).

Grouping follows TVM's rules (see ``_fusion_graph``): each op may join the group of its
immediate post-dominator when every op on the paths between them allows it;
elementwise/broadcast/injective ops fuse into their consumers, a conv/dense/matmul
(OUT_ELEMWISE_FUSABLE) takes its elementwise/broadcast epilogue (bias add, batch-norm
scale, relu, residual add), reductions take injective inputs, opaque ops stay alone, and
no group holds more than ``max_depth`` ops.

The result, consumed by graph planning and lowering, has this structure:

* every op call of a top-level function body is replaced by a call of a nested
  ``Function`` with attribute ``Primitive=1`` (``Call(fn, args)``); a group of one op is
  a function too;
* a group's parameters ``%p0, %p1, ...`` are its inputs (variables, constants with more
  than one element, outputs of other groups) in order of first use; single-element
  constants stay inside the body;
* each group has exactly one output (the body's result, a tensor or a tuple for
  multi-output ops);
* Tuples and TupleGetItems stay in the caller, between group calls;
* a body that is already fused (calls of functions) is left as it is.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.errors import IRError
from ember.ir.expr import Call, Constant, Expr, Function, Var, children, with_children
from ember.ir.module import IRModule
from ember.ir.op import Attrs
from ember.transform._fusion_graph import GraphNode, Partitioner, build_graph
from ember.transform._util import map_bodies

#: TVM's default bound on the number of ops in one fused group.
DEFAULT_MAX_DEPTH = 256

#: constants with at most this many elements are copied into the groups that use them.
MAX_INLINE_CONSTANT = 1


def fuse_ops(mod: IRModule, max_depth: int = DEFAULT_MAX_DEPTH) -> IRModule:
    """Fuse the ops of every top-level function into ``Primitive=1`` functions."""
    if max_depth < 1:
        raise IRError(f"fuse_ops: max_depth must be at least 1, got {max_depth}")
    return map_bodies(mod, lambda body: fuse_body(body, max_depth))


def fuse_body(body: Expr, max_depth: int = DEFAULT_MAX_DEPTH) -> Expr:
    """Fuse one function body (see the module docstring)."""
    nodes = build_graph(body)
    if not nodes:
        return body
    roots = Partitioner(nodes, max_depth).run()
    members: dict[int, list[int]] = {}
    for i, r in enumerate(roots):
        members.setdefault(r, []).append(i)
    outer: dict[int, Expr] = {}  # id(original expr) -> its value in the new caller body

    def value(expr: Expr) -> Expr:
        if isinstance(expr, (Var, Constant)):
            return expr
        try:
            return outer[id(expr)]
        except KeyError:
            raise IRError(
                "fuse_ops: an op inside a fused group is used outside it; "
                "this is a bug in the partitioner"
            ) from None

    for node in nodes:
        group = members[roots[node.index]]
        if node.index != group[-1]:
            continue  # built together with the group's output node
        exprs = [nodes[i].expr for i in group]
        if len(exprs) == 1 and not _needs_function(exprs[0]):
            outer[id(node.expr)] = with_children(
                node.expr, tuple(value(c) for c in children(node.expr))
            )
            continue
        _check_single_output(nodes, group, body)
        outer[id(node.expr)] = make_group_call(exprs, value)
    return value(body)


def _needs_function(expr: Expr) -> bool:
    """A lone node becomes a function unless it is a tuple, a tuple item or a call of an
    already fused function."""
    return isinstance(expr, Call) and not isinstance(expr.op, Function)


def _check_single_output(nodes: list[GraphNode], group: list[int], body: Expr) -> None:
    inside = set(group)
    for i in group[:-1]:
        if nodes[i].expr is body or any(c not in inside for c, _ in nodes[i].outputs):
            raise IRError(
                f"fuse_ops: group of {[nodes[j].expr.__class__.__name__ for j in group]} "
                "has more than one output; this is a bug in the partitioner"
            )


def make_group_call(
    exprs: list[Expr],
    value: Callable[[Expr], Expr],
    attrs: Attrs | None = None,
    inline_limit: int = MAX_INLINE_CONSTANT,
) -> Call:
    """Build the primitive function of one group (``exprs`` in order, the last one its
    output; constants up to ``inline_limit`` elements stay inside) and its call."""
    member_ids = {id(e) for e in exprs}
    params: list[Var] = []
    args: list[Expr] = []
    param_of: dict[int, Var] = {}
    inner: dict[int, Expr] = {}

    def inside(arg: Expr) -> Expr:
        if id(arg) in member_ids:
            return inner[id(arg)]
        small = isinstance(arg, Constant) and arg.type.size <= inline_limit
        if small and arg.tensor_type.dtype != "string":  # strings stay params (strings.md)
            return arg
        p = param_of.get(id(arg))
        if p is None:
            p = Var(f"p{len(params)}", arg.type)
            param_of[id(arg)] = p
            params.append(p)
            args.append(value(arg))
        return p

    for expr in exprs:
        inner[id(expr)] = with_children(expr, tuple(inside(c) for c in children(expr)))
    out = exprs[-1]
    func = Function(tuple(params), inner[id(out)], attrs or Attrs({"Primitive": 1}))
    return Call(func, tuple(args), name=out.name if isinstance(out, Call) else "")
