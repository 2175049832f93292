"""ONNX handlers for control flow whose shapes stay static: If, Loop and Scan.

If with a condition known at build time folds away (the taken branch is converted inline;
both branches' ops were checked up front by the unsupported-op report). A data-dependent
If, and every Loop and Scan, become ``control.*`` ops holding their bodies as ir Functions
(``subgraph.convert_body``); lowering compiles each body like a model and the op into one
kernel with a branch or a loop around the body's calls, never an unrolled copy.

Shapes stay static: loop-carried values and scan states keep their shapes, and a Loop's
scan outputs (which grow by one row per iteration) need a trip count known at build time
that nothing ends early (the condition is constant true and the body passes it through
or returns true).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import FrontendError
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import ALL_TYPES, onnx_op
from ember.frontend.onnx.subgraph import Body, convert_body
from ember.ir.expr import Constant, Expr, Function, Tuple, TupleGetItem, Var, call
from ember.ir.ops.common import normalize_axis
from ember.ir.types import TensorType, Type


def _tensor(ctx: ConvertContext, node: NodeView, value: Expr | None, what: str) -> TensorType:
    if value is None or not isinstance(value.type, TensorType):
        kind = "omitted" if value is None else str(value.type)
        ctx.fail(node, f"{what} must be a tensor, got {kind}")
    return value.type


def _outputs(result: Expr, count: int) -> list[Expr | None]:
    return [TupleGetItem(result, i) for i in range(count)]


@onnx_op("If", since=1, dtypes=ALL_TYPES)
def if_(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """If: a constant condition converts the taken branch inline; a data-dependent one
    becomes ``control.if`` over both branches."""
    cond_expr = node.input(0)
    cond = ctx.const_value(cond_expr)
    if cond is None:
        return _dynamic_if(ctx, node)
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


def _dynamic_if(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    cond = node.input(0)
    ty = _tensor(ctx, node, cond, "the If condition")
    if ty.size != 1:
        ctx.fail(node, f"the condition must hold one element, got {ty}")
    assert cond is not None
    if ty.dtype != "bool":
        cond = call("cast", cond, dtype="bool")
    then_b = convert_body(ctx, node.attr("then_branch"), [], "the then_branch")
    else_b = convert_body(ctx, node.attr("else_branch"), [], "the else_branch")
    captured: list[Expr] = []
    for body in (then_b, else_b):
        captured += [c for c in body.captured if not any(c is d for d in captured)]
    then_f = _branch(then_b, captured)
    else_f = _branch(else_b, captured)
    then_t = [o.type for o in then_b.outputs]
    else_t = [o.type for o in else_b.outputs]
    if then_t != else_t:
        ctx.fail(
            node,
            f"the branches return different types ({', '.join(map(str, then_t))} vs "
            f"{', '.join(map(str, else_t))}); with a data-dependent condition ember needs "
            "both branches to return the same shapes (ember compiles static shapes); make "
            "the condition constant (an initializer) to fold the If",
        )
    result = call(
        "control.if", cond, *captured, then_branch=then_f, else_branch=else_f, name=node.name
    )
    return _outputs(result, len(then_b.outputs))


def _branch(body: Body, captured: Sequence[Expr]) -> Function:
    """A branch as a Function taking every captured value of both branches, in order."""
    own = {id(v): var for v, var in zip(body.captured, body.captured_vars, strict=True)}
    params = [own.get(id(c)) or Var(f"unused{i}", c.type) for i, c in enumerate(captured)]
    return Function(tuple(params), Tuple(tuple(body.outputs)))


@onnx_op("Scan", since=8, dtypes=ALL_TYPES)
def scan(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """Scan: ``control.scan``; opset 8's batch axis becomes one scan per batch element."""
    m = int(node.attr("num_scan_inputs"))
    if node.opset < 9:
        return _scan8(ctx, node, m)
    values = [v for v in node.inputs]
    n = len(values) - m
    axes = list(node.attr("scan_input_axes", [0] * m))
    dirs = list(node.attr("scan_input_directions", [0] * m))
    results = _scan(ctx, node, values, n, m, axes, dirs)
    return list(results)


def _scan(
    ctx: ConvertContext,
    node: NodeView,
    values: Sequence[Expr | None],
    n: int,
    m: int,
    axes: Sequence[int],
    dirs: Sequence[int],
) -> list[Expr | None]:
    types = [_tensor(ctx, node, v, f"Scan input {i}") for i, v in enumerate(values)]
    if n < 0 or m < 1:
        ctx.fail(node, f"num_scan_inputs={m} does not fit the {len(values)} inputs")
    axes = [normalize_axis(a, types[n + k].ndim) for k, a in enumerate(axes)]
    slices: list[Type] = []
    for k, ty in enumerate(types[n:]):
        slices.append(TensorType(ty.shape[: axes[k]] + ty.shape[axes[k] + 1 :], ty.dtype))
    body = convert_body(ctx, node.attr("body"), [*types[:n], *slices], "the Scan body")
    k_out = len(body.outputs) - n
    out_types = [o.tensor_type for o in body.outputs]
    for i in range(n):
        if out_types[i] != types[i]:
            ctx.fail(
                node,
                f"state {i} enters the body as {types[i]} and leaves it as {out_types[i]}; "
                "ember compiles static shapes, so a state must keep its shape and dtype",
            )
    out_axes = list(node.attr("scan_output_axes", [0] * k_out))
    out_axes = [normalize_axis(a, out_types[n + k].ndim + 1) for k, a in enumerate(out_axes)]
    result = call(
        "control.scan",
        *values,  # type: ignore[arg-type]
        *body.captured,
        body=body.function(),
        num_states=n,
        num_scan_inputs=m,
        scan_input_axes=axes,
        scan_input_directions=dirs,
        scan_output_axes=out_axes,
        scan_output_directions=list(node.attr("scan_output_directions", [0] * k_out)),
        name=node.name,
    )
    return _outputs(result, n + k_out)


def _scan8(ctx: ConvertContext, node: NodeView, m: int) -> list[Expr | None]:
    """Scan-8: inputs carry a leading batch axis (and optional sequence lengths, which
    must be the full length); each batch element scans on its own, results stacked."""
    values = list(node.inputs[1:])
    lens = ctx.const_value(node.input(0))
    n = len(values) - m
    types = [_tensor(ctx, node, v, f"Scan input {i + 1}") for i, v in enumerate(values)]
    batch = types[0].shape[0] if types else 0
    if node.input(0) is not None:
        full = types[n].shape[1] if types[n].ndim > 1 else -1
        if lens is None or not np.all(np.asarray(lens) == full):
            ctx.fail(node, "sequence_lens must be constant and equal to the full length")
    dirs = list(node.attr("directions", [0] * m))
    per_batch: list[list[Expr | None]] = []
    for b in range(batch):
        parts = [_take(v, t, b) for v, t in zip(values, types, strict=True)]
        per_batch.append(_scan(ctx, node, parts, n, m, [0] * m, dirs))
    outs: list[Expr | None] = []
    for i in range(node.num_outputs):
        rows = []
        for b in range(batch):
            row = per_batch[b][i]
            assert row is not None
            rows.append(call("reshape", row, newshape=(1, *row.tensor_type.shape)))
        outs.append(rows[0] if len(rows) == 1 else call("concatenate", *rows, axis=0))
    return outs


def _take(value: Expr | None, ty: TensorType, b: int) -> Expr:
    """Batch element ``b`` of ``value``, without its batch axis."""
    assert value is not None
    begin = [b] + [0] * (ty.ndim - 1)
    end = [b + 1, *ty.shape[1:]]
    part = call("strided_slice", value, begin=begin, end=end, strides=[1] * ty.ndim)
    return call("reshape", part, newshape=ty.shape[1:])


@onnx_op("Loop", since=1, dtypes=ALL_TYPES)
def loop(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """Loop: ``control.loop``; scan outputs need a static count (see the module docstring)."""
    trip_in, cond_in = node.input(0), node.input(1)
    carried = list(node.inputs[2:])
    trip_v = ctx.const_value(trip_in) if trip_in is not None else np.array(2**63 - 1)
    cond_v = ctx.const_value(cond_in) if cond_in is not None else np.array(True)
    if any(v is not None and not isinstance(v.type, TensorType) for v in carried):
        return _unrolled_loop(ctx, node, trip_v, cond_v)
    types = [_tensor(ctx, node, v, f"Loop input {i + 2}") for i, v in enumerate(carried)]
    trip = Constant(np.array(2**63 - 1, "int64")) if trip_in is None else trip_in
    cond = Constant(np.array(True)) if cond_in is None else cond_in
    if trip.tensor_type.dtype != "int64":
        trip = call("cast", trip, dtype="int64")
    if cond.tensor_type.dtype != "bool":
        cond = call("cast", cond, dtype="bool")
    scalars: list[Type] = [TensorType((), "int64"), TensorType((), "bool")]
    try:
        body = convert_body(ctx, node.attr("body"), [*scalars, *types], "the Loop body")
    except FrontendError as err:
        if not _unrollable(trip_v, cond_v) or "must be constant" not in str(err):
            raise
        # the body needs its iteration number as a constant (a slice at i): with a small
        # static count, convert it once per iteration instead
        return _unrolled_loop(ctx, node, trip_v, cond_v)
    n = len(carried)
    outs = body.outputs
    if len(outs) < 1 + n:
        ctx.fail(node, f"the body returns {len(outs)} values; it needs a condition and {n}")
    for i in range(n):
        if outs[1 + i].type != types[i]:
            ctx.fail(
                node,
                f"loop-carried value {i} enters the body as {types[i]} and leaves it as "
                f"{outs[1 + i].type}; ember compiles static shapes, so it must keep its shape "
                "and dtype",
            )
    count = -1
    if len(outs) > 1 + n:
        count = _static_count(ctx, node, trip_v, cond_v, body)
    bound = -1 if trip_v is None else int(np.asarray(trip_v).reshape(-1)[0])
    result = call(
        "control.loop",
        trip,
        cond,
        *carried,  # type: ignore[arg-type]
        *body.captured,
        body=body.function(),
        num_carried=n,
        iterations=count,
        trip_bound=max(bound, 0) if bound >= 0 else -1,
        name=node.name,
    )
    return _outputs(result, len(outs) - 1)


def _static_count(
    ctx: ConvertContext,
    node: NodeView,
    trip: np.ndarray | None,
    cond: np.ndarray | None,
    body: Body,
) -> int:
    """The number of iterations of a Loop with scan outputs, which must be static."""
    out_cond = body.outputs[0]
    passes = out_cond is body.params[1]
    const = ctx.const_value(out_cond)
    always = passes or (const is not None and bool(np.asarray(const).reshape(-1)[0]))
    if trip is None or cond is None or not always:
        ctx.fail(
            node,
            "the Loop has scan outputs, which grow by one row per iteration, so its trip "
            "count must be constant (static) and nothing may end the loop early (a constant "
            "true condition the body passes through); ember compiles static shapes. Make the "
            "trip count and condition initializers, or carry a preallocated buffer instead",
        )
    if not bool(np.asarray(cond).reshape(-1)[0]):
        return 0
    return max(0, int(np.asarray(trip).reshape(-1)[0]))


#: a Loop carrying sequences or optionals (resolved at build time) runs at most this often.
MAX_UNROLLED_ITERATIONS = 1024
#: a Loop whose body needs its iteration number as a constant is converted once per
#: iteration when its static trip count is at most this.
MAX_UNROLLED_BODY = 64


def _unrollable(trip: np.ndarray | None, cond: np.ndarray | None) -> bool:
    """True when a Loop's count and condition are constant and the count is small."""
    if trip is None or cond is None:
        return False
    return int(np.asarray(trip).reshape(-1)[0]) <= MAX_UNROLLED_BODY


def _unrolled_loop(
    ctx: ConvertContext, node: NodeView, trip: np.ndarray | None, cond: np.ndarray | None
) -> list[Expr | None]:
    """A Loop carrying sequences or optionals: they exist only at build time, so the body
    is converted once per iteration, which needs a constant trip count and conditions, and
    at most MAX_UNROLLED_ITERATIONS iterations."""
    if trip is None or cond is None:
        ctx.fail(
            node,
            "the Loop carries a sequence or an optional, which ember resolves at build time, "
            "so its trip count and condition must be constant (static); make them initializers",
        )
    graph = node.attr("body")
    if ctx.convert_subgraph is None or len(graph.input) != len(node.inputs):
        ctx.fail(node, "the body's inputs do not match the Loop's values")
    values = list(node.inputs[2:])
    rows: list[list[Expr]] = []
    count, go = int(np.asarray(trip).reshape(-1)[0]), bool(np.asarray(cond).reshape(-1)[0])
    while go and len(rows) < count:
        if len(rows) == MAX_UNROLLED_ITERATIONS:
            ctx.fail(
                node, f"the Loop runs more than {MAX_UNROLLED_ITERATIONS} iterations at build time"
            )
        names = [vi.name for vi in graph.input]
        bound: list[Expr] = [Constant(np.array(len(rows), "int64")), Constant(np.array(go))]
        bound += [v for v in values if v is not None]
        if len(bound) != len(names):
            ctx.fail(node, "a loop-carried value is omitted")
        saved = ctx.env
        ctx.env = {**saved, **dict(zip(names, bound, strict=True))}
        try:
            outs = ctx.convert_subgraph(ctx, graph)
        finally:
            ctx.env = saved
        flag = ctx.const_value(outs[0])
        if flag is None:
            ctx.fail(node, "the condition the body returns must be constant (static) here")
        go = bool(np.asarray(flag).reshape(-1)[0])
        values = list(outs[1 : 1 + len(values)])
        rows.append(list(outs[1 + len(values) :]))
    stacked: list[Expr | None] = []
    for k in range(len(graph.output) - 1 - len(values)):
        if not rows:
            ctx.fail(node, "the Loop runs no iteration, so its scan outputs have no shape")
        parts = [call("reshape", r[k], newshape=(1, *r[k].tensor_type.shape)) for r in rows]
        stacked.append(parts[0] if len(parts) == 1 else call("concatenate", *parts, axis=0))
    return [*values, *stacked]
