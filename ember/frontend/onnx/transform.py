"""ONNX handlers for shape and layout: Reshape Flatten Squeeze Unsqueeze Transpose Concat
Split Slice Expand Tile CenterCropPad ReverseSequence Pad.

Shapes are static, so shape-like inputs (Reshape's shape, Slice's starts/ends, Split's
split, Squeeze's axes, ...) must be constant after folding; Flatten, Squeeze and Unsqueeze
become ``reshape``. Attributes that turned into inputs (Reshape 5, Slice 10, Split 13,
Squeeze/Unsqueeze 13) are read from wherever the node's opset puts them.

Pad takes its pads as attributes before opset 11 and as a constant input after (plus
``axes`` from 18 and ``wrap`` mode from 19); negative pads crop, which becomes a
``strided_slice`` before the ``nn.pad``.
"""

from __future__ import annotations

import math

import numpy as np

from ember.frontend.onnx.common import arg, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import ALL_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, TupleGetItem, call
from ember.ir.ops.common import broadcast_shapes, normalize_axes, normalize_axis
from ember.ir.ops.transform import normalize_slice


def const_ints(ctx: ConvertContext, node: NodeView, i: int, what: str) -> list[int] | None:
    """Optional constant input ``i`` as a list of Python ints (None when omitted)."""
    expr = node.input(i)
    if expr is None:
        return None
    return [int(v) for v in np.asarray(ctx.require_const(expr, what)).reshape(-1)]


def reshape_to(x: Expr, shape: tuple[int, ...], name: str = "") -> Expr:
    """``x`` reshaped to ``shape`` (``x`` itself when the shape already matches)."""
    if ttype(x).shape == shape:
        return x
    return call("reshape", x, newshape=shape, name=name)


def resolve_shape(
    ctx: ConvertContext, node: NodeView, in_shape: tuple[int, ...], spec: list[int], allowzero: bool
) -> tuple[int, ...]:
    """ONNX Reshape semantics: 0 copies the input dim (unless allowzero), one -1 is inferred."""
    out = []
    for i, d in enumerate(spec):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                ctx.fail(node, f"shape {spec} copies dimension {i} (0) beyond input rank")
            d = in_shape[i]
        out.append(d)
    size = math.prod(in_shape)
    if out.count(-1) > 1:
        ctx.fail(node, f"shape {spec} has more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        if known == 0 or size % known:
            ctx.fail(node, f"cannot infer the -1 in shape {spec} for an input of shape {in_shape}")
        out[out.index(-1)] = size // known
    if any(d < 0 for d in out) or math.prod(out) != size:
        ctx.fail(node, f"cannot reshape an input of shape {in_shape} to {spec}")
    return tuple(out)


@onnx_op("Reshape", since=1, dtypes=ALL_TYPES)
def reshape(ctx: ConvertContext, node: NodeView) -> Expr:
    """Reshape with 0 (copy) and -1 (infer) placeholders; ``allowzero`` from opset 14."""
    x = arg(ctx, node, 0)
    if node.opset < 5:
        spec = [int(d) for d in node.attr("shape")]
    else:
        given = const_ints(ctx, node, 1, "the target shape")
        if given is None:
            ctx.fail(node, "the target shape (input 1) is required")
        spec = given
    shape = resolve_shape(ctx, node, ttype(x).shape, spec, bool(node.attr("allowzero", 0)))
    return call("reshape", x, newshape=shape, name=node.name)


@onnx_op("Flatten", since=1, dtypes=ALL_TYPES)
def flatten(ctx: ConvertContext, node: NodeView) -> Expr:
    """Flatten to 2-D around ``axis`` (negative axes from opset 11)."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    axis = int(node.attr("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        ctx.fail(node, f"axis {node.attr('axis', 1)} is out of range for rank {len(shape)}")
    out = (math.prod(shape[:axis]), math.prod(shape[axis:]))
    return call("reshape", x, newshape=out, name=node.name)


def _axes_of(ctx: ConvertContext, node: NodeView) -> list[int] | None:
    """Squeeze/Unsqueeze axes: an attribute before opset 13, an input after."""
    if node.opset >= 13:
        return const_ints(ctx, node, 1, "axes")
    attr = node.attr("axes", None)
    return None if attr is None else [int(a) for a in attr]


@onnx_op("Squeeze", since=1, dtypes=ALL_TYPES)
def squeeze(ctx: ConvertContext, node: NodeView) -> Expr:
    """Squeeze the given size-1 axes (all size-1 axes when none are given)."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    given = _axes_of(ctx, node)
    if given is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = normalize_axes(given, len(shape))
    bad = [a for a in axes if shape[a] != 1]
    if bad:
        ctx.fail(node, f"cannot squeeze axes {bad} of shape {shape}: their size is not 1")
    out = tuple(d for i, d in enumerate(shape) if i not in axes)
    return reshape_to(x, out, node.name)


@onnx_op("Unsqueeze", since=1, dtypes=ALL_TYPES)
def unsqueeze(ctx: ConvertContext, node: NodeView) -> Expr:
    """Insert size-1 axes at the given positions of the output."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    given = _axes_of(ctx, node)
    if given is None:
        ctx.fail(node, "axes are required")
    rank = len(shape) + len(given)
    axes = normalize_axes(given, rank)
    dims = iter(shape)
    out = tuple(1 if i in axes else next(dims) for i in range(rank))
    return call("reshape", x, newshape=out, name=node.name)


@onnx_op("Transpose", since=1, dtypes=ALL_TYPES)
def transpose(ctx: ConvertContext, node: NodeView) -> Expr:
    """Permute axes by ``perm`` (reversed when absent)."""
    x = arg(ctx, node, 0)
    ndim = ttype(x).ndim
    perm = node.attr("perm", None)
    axes = tuple(reversed(range(ndim))) if perm is None else tuple(int(p) for p in perm)
    axes = tuple(a + ndim if a < 0 else a for a in axes)
    return call("transpose", x, axes=axes, name=node.name)


@onnx_op("Concat", since=1, dtypes=ALL_TYPES)
def concat(ctx: ConvertContext, node: NodeView) -> Expr:
    """Concatenate along ``axis`` (default 1 in opset 1)."""
    inputs = [arg(ctx, node, i) for i in range(len(node.inputs))]
    ndim = ttype(inputs[0]).ndim
    axis = normalize_axis(int(node.attr("axis", 1)), ndim)
    return call("concatenate", *inputs, axis=axis, name=node.name)


@onnx_op("Split", since=1, dtypes=ALL_TYPES)
def split(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """Split by sizes (attribute before 13, input after) or into equal parts."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    axis = normalize_axis(int(node.attr("axis", 0)), len(shape))
    dim = shape[axis]
    if node.opset >= 13:
        sizes = const_ints(ctx, node, 1, "split")
    else:
        attr = node.attr("split", None)
        sizes = None if attr is None else [int(s) for s in attr]
        if sizes is None and node.opset < 2:
            sizes = const_ints(ctx, node, 1, "split")
    if sizes is None:
        parts = int(node.attr("num_outputs", node.num_outputs))
        if parts <= 0:
            ctx.fail(node, f"cannot split into {parts} parts")
        if node.opset < 18 and dim % parts:
            ctx.fail(node, f"axis {axis} of size {dim} does not split into {parts} equal parts")
        chunk = -(-dim // parts)
        sizes = [min(chunk, max(dim - i * chunk, 0)) for i in range(parts)]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        ctx.fail(node, f"split sizes {sizes} do not add up to {dim} (axis {axis})")
    out = call("split", x, sizes=tuple(sizes), axis=axis, name=node.name)
    return [TupleGetItem(out, i) for i in range(len(sizes))]


@onnx_op("Slice", since=1, dtypes=ALL_TYPES)
def slice_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Slice: attributes before opset 10, inputs (with steps) after; ONNX clamping."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    if node.opset < 10:
        starts = [int(v) for v in node.attr("starts")]
        ends = [int(v) for v in node.attr("ends")]
        axes_l = node.attr("axes", None)
        axes = None if axes_l is None else [int(a) for a in axes_l]
        steps = None
    else:
        starts = const_ints(ctx, node, 1, "starts") or []
        ends = const_ints(ctx, node, 2, "ends") or []
        axes = const_ints(ctx, node, 3, "axes")
        steps = const_ints(ctx, node, 4, "steps")
    if axes is None:
        axes = list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        ctx.fail(node, "starts, ends, axes and steps must have the same length")
    begin = [0] * len(shape)
    end = list(shape)
    strides = [1] * len(shape)
    seen: set[int] = set()
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        axis = normalize_axis(a, len(shape))
        if axis in seen:
            ctx.fail(node, f"axis {a} is sliced twice")
        seen.add(axis)
        if st == 0:
            ctx.fail(node, f"step of axis {a} is 0")
        begin[axis], end[axis] = normalize_slice(s, e, st, shape[axis])
        strides[axis] = st
    if begin == [0] * len(shape) and end == list(shape) and strides == [1] * len(shape):
        return x
    return call("strided_slice", x, begin=begin, end=end, strides=strides, name=node.name)


@onnx_op("Expand", since=8, dtypes=ALL_TYPES)
def expand(ctx: ConvertContext, node: NodeView) -> Expr:
    """Expand: broadcast the input with the (constant) shape, bidirectionally."""
    x = arg(ctx, node, 0)
    given = const_ints(ctx, node, 1, "the target shape")
    if given is None:
        ctx.fail(node, "the target shape (input 1) is required")
    shape = broadcast_shapes(ttype(x).shape, given)
    if shape == ttype(x).shape:
        return x
    return call("broadcast_to", x, shape=shape, name=node.name)


@onnx_op("Tile", since=6, dtypes=ALL_TYPES)
def tile(ctx: ConvertContext, node: NodeView) -> Expr:
    """Tile by the (constant) repeats."""
    x = arg(ctx, node, 0)
    reps = const_ints(ctx, node, 1, "repeats")
    if reps is None or len(reps) != ttype(x).ndim:
        ctx.fail(node, f"repeats must have one entry per axis of the rank-{ttype(x).ndim} input")
    return call("tile", x, reps=tuple(reps), name=node.name)


@onnx_op("CenterCropPad", since=18, dtypes=ALL_TYPES)
def center_crop_pad(ctx: ConvertContext, node: NodeView) -> Expr:
    """Crop (centred) axes longer than the target and zero-pad (centred) shorter ones."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    target = const_ints(ctx, node, 1, "the target shape")
    given = node.attr("axes", None)
    axes = list(range(len(shape))) if given is None else [int(a) for a in given]
    if target is None or len(target) != len(axes):
        ctx.fail(node, f"the target shape needs one entry per axis in {axes}")
    begin, end = [0] * len(shape), list(shape)
    pads = [0] * (2 * len(shape))
    for a, size in zip(axes, target, strict=True):
        axis = normalize_axis(a, len(shape))
        dim = shape[axis]
        if size < dim:
            begin[axis] = (dim - size) // 2
            end[axis] = begin[axis] + size
        elif size > dim:
            pads[axis] = (size - dim) // 2
            pads[len(shape) + axis] = size - dim - pads[axis]
    out = x
    if begin != [0] * len(shape) or end != list(shape):
        out = call("strided_slice", out, begin=begin, end=end, strides=[1] * len(shape))
    if any(pads):
        out = call("nn.pad", out, pad_width=pads, pad_value=0.0)
    return out


@onnx_op("ReverseSequence", since=10, dtypes=ALL_TYPES)
def reverse_sequence(ctx: ConvertContext, node: NodeView) -> Expr:
    """Reverse the first ``sequence_lens[b]`` steps of each batch entry: a gather along the
    time axis at ``len - 1 - t`` (``t`` past the length stays)."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    batch = normalize_axis(int(node.attr("batch_axis", 1)), len(shape))
    time = normalize_axis(int(node.attr("time_axis", 0)), len(shape))
    if batch == time:
        ctx.fail(node, f"batch_axis and time_axis must differ, both are {batch}")
    lens = arg(ctx, node, 1, "sequence_lens")
    if ttype(lens).dtype != "int64":
        lens = call("cast", lens, dtype="int64")
    view = [1] * len(shape)
    view[batch] = shape[batch]
    lens = call("reshape", lens, newshape=tuple(view))
    view = [1] * len(shape)
    view[time] = shape[time]
    steps = Constant(np.arange(shape[time], dtype=np.int64).reshape(view))
    flipped = call("subtract", call("subtract", lens, Constant(np.array(1, np.int64))), steps)
    idx = call("where", call("less", steps, lens), flipped, steps)
    idx = call("broadcast_to", idx, shape=shape)
    return call("gather_elements", x, idx, axis=time, name=node.name)


_PAD_MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect", "wrap": "wrap"}


def _pads_and_value(
    ctx: ConvertContext, node: NodeView, ndim: int
) -> tuple[list[int], float | Expr]:
    """Full-rank pads ``[begin..., end...]`` and the constant value (an Expr when it is
    only known at run time), for every opset."""
    if node.opset < 11:
        name = "pads" if node.opset >= 2 else "paddings"
        pads = [int(p) for p in node.attr(name)]
        return pads, float(node.attr("value", 0.0))
    given = const_ints(ctx, node, 1, "pads")
    if given is None:
        ctx.fail(node, "pads (input 1) are required")
    value_expr = node.input(2)
    value: float | Expr = 0.0
    if value_expr is not None:
        known = ctx.const_value(value_expr)
        if known is None:
            value = value_expr  # a run-time value: applied with a mask in ``pad``
        else:
            raw = np.asarray(known).reshape(-1)
            value = float(raw[0]) if raw.size else 0.0
    axes_given = const_ints(ctx, node, 3, "axes")
    if axes_given is None:
        return given, value
    axes = normalize_axes(axes_given, ndim)
    if len(given) != 2 * len(axes):
        ctx.fail(node, f"{len(given)} pads do not match {len(axes)} axes (need twice as many)")
    pads = [0] * (2 * ndim)
    for j, a in enumerate(axes_given):
        a = a + ndim if a < 0 else a
        pads[a] = given[j]
        pads[ndim + a] = given[len(axes) + j]
    return pads, value


@onnx_op("Pad", since=1, dtypes=ALL_TYPES)
def pad(ctx: ConvertContext, node: NodeView) -> Expr:
    """Pad in constant, edge, reflect or wrap mode; negative pads crop."""
    x = arg(ctx, node, 0)
    shape = ttype(x).shape
    ndim = len(shape)
    pads, value = _pads_and_value(ctx, node, ndim)
    if len(pads) != 2 * ndim:
        ctx.fail(node, f"{len(pads)} pads given for a rank-{ndim} input; need {2 * ndim}")
    mode = str(node.attr("mode", "constant"))
    if mode not in _PAD_MODES:
        ctx.fail(node, f"pad mode {mode!r} is not supported; supported: {', '.join(_PAD_MODES)}")
    if any(p < 0 for p in pads):
        begin = [max(-p, 0) for p in pads[:ndim]]
        end = [d - max(-p, 0) for d, p in zip(shape, pads[ndim:], strict=True)]
        if any(e < b for b, e in zip(begin, end, strict=True)):
            ctx.fail(node, f"negative pads {pads} crop more than the input shape {shape}")
        x = call("strided_slice", x, begin=begin, end=end, strides=[1] * ndim)
        pads = [max(p, 0) for p in pads]
    if not any(pads):
        return x
    if isinstance(value, Expr) and mode == "constant":
        return _pad_dynamic_value(x, pads, value, node.name)
    fill = value if isinstance(value, float) else 0.0
    return call(
        "nn.pad", x, pad_width=pads, pad_value=fill, pad_mode=_PAD_MODES[mode], name=node.name
    )


def _pad_dynamic_value(x: Expr, pads: list[int], value: Expr, name: str) -> Expr:
    """Constant padding with a run-time value: pad with 0, then select the value where a
    (constant) mask marks the padding."""
    shape = ttype(x).shape
    inside = Constant(np.ones(shape, dtype=bool))
    mask = call("nn.pad", inside, pad_width=pads, pad_value=0.0)
    padded = call("nn.pad", x, pad_width=pads, pad_value=0.0)
    scalar = call("reshape", value, newshape=())
    return call("where", mask, padded, scalar, name=name)
