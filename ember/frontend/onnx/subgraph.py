"""ONNX subgraphs (Loop, Scan and If bodies, SequenceMap) as closed ir Functions.

A subgraph may read any value of the enclosing scopes by name. :func:`convert_body` finds
those names (nested subgraphs included) and turns each into something the body owns: a
constant stays a constant (so shape computations fold inside the body), anything else
becomes an extra parameter, and the caller passes the outer value as an extra argument
(``Body.captured``). Initializers of the enclosing graph become parameters whose values
the context still knows, so handlers inside the body may read them as constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import onnx

from ember.frontend.onnx.context import ConvertContext
from ember.ir.expr import Constant, Expr, Function, Tuple, Var
from ember.ir.types import TensorType, Type

#: a captured value computed from constants becomes a body constant up to this many elements.
MAX_CAPTURED_CONSTANT = 1 << 16


@dataclass
class Body:
    """A converted subgraph: its declared inputs, the outer values it reads and its outputs."""

    params: list[Var]
    captured_vars: list[Var]
    captured: list[Expr]
    outputs: list[Expr]

    def function(self, extra: Sequence[Var] = ()) -> Function:
        """The body as a Function of (declared inputs, captured values, ``extra``)."""
        params = (*self.params, *self.captured_vars, *extra)
        return Function(params, Tuple(tuple(self.outputs)))


def free_names(graph: onnx.GraphProto) -> list[str]:
    """Names ``graph`` (or a subgraph nested in it) reads but does not define, in order."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.name for t in graph.sparse_initializer}
    out: list[str] = []
    for node in graph.node:
        reads = [n for n in node.input if n]
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else []) + list(
                attr.graphs
            ):
                reads += free_names(sub)
        out += [n for n in reads if n not in defined and n not in out]
        defined.update(o for o in node.output if o)
    out += [o.name for o in graph.output if o.name not in defined and o.name not in out]
    return out


def convert_body(
    ctx: ConvertContext, graph: onnx.GraphProto, types: Sequence[Type], what: str
) -> Body:
    """Convert ``graph`` with its inputs typed ``types`` (see the module docstring)."""
    if len(graph.input) != len(types):
        ctx.fail(None, f"{what} declares {len(graph.input)} inputs but takes {len(types)}")
    if ctx.convert_subgraph is None:
        ctx.fail(None, "subgraphs can only be converted by the importer (from_onnx)")
    params = [Var(vi.name, ty) for vi, ty in zip(graph.input, types, strict=True)]
    env: dict[str, Expr] = {}
    captured_vars: list[Var] = []
    captured: list[Expr] = []
    for name in free_names(graph):
        outer = ctx.env.get(name)
        if outer is None:
            ctx.fail(None, f"{what} reads '{name}', which is not defined in an enclosing scope")
        env[name] = _capture(ctx, name, outer, captured_vars, captured)
    env.update((p.name, p) for p in params)
    saved = ctx.env
    ctx.env = env
    try:
        outputs = ctx.convert_subgraph(ctx, graph)
    finally:
        ctx.env = saved
    for out, vi in zip(outputs, graph.output, strict=True):
        if not isinstance(out.type, TensorType):
            ctx.fail(
                None,
                f"{what} output '{vi.name}' is a sequence or an optional ({out.type}); a "
                "compiled If, Loop or Scan body returns tensors, so its condition or trip "
                "count must be constant (static) to resolve it at build time",
            )
    return Body(params, captured_vars, captured, list(outputs))


def _capture(
    ctx: ConvertContext, name: str, outer: Expr, variables: list[Var], values: list[Expr]
) -> Expr:
    """What the body sees for an outer value: a constant, or a new parameter."""
    if isinstance(outer, Constant):
        return outer
    if isinstance(outer, Tuple):  # a sequence: each element captured on its own
        items = [
            _capture(ctx, f"{name}.{i}", item, variables, values)
            for i, item in enumerate(outer.fields)
        ]
        return Tuple(tuple(items))
    if not isinstance(outer.type, TensorType):
        return outer  # an empty optional: nothing to pass
    init = ctx.initializer_values.get(outer) if isinstance(outer, Var) else None
    value = None if init is not None else ctx.const_value(outer)
    if value is not None and value.size <= MAX_CAPTURED_CONSTANT:
        return Constant(value)
    var = Var(name, outer.type)
    if init is not None:
        ctx.initializer_values[var] = init  # still readable as a constant by handlers
    variables.append(var)
    values.append(outer)
    return var
