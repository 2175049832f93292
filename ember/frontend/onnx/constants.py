"""ONNX handlers for constants and structure: Constant, Identity, Dropout, Shape,
Size, ConstantOfShape, Range.

Shapes are static in ember, so Shape, Size and Range (over constant inputs) become
constants, which the importer's folding then propagates through shape sub-graphs.
"""

from __future__ import annotations

import math

import numpy as np

from ember.frontend.onnx import random
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import ALL_TYPES, NUMERIC_TYPES, onnx_op
from ember.ir.expr import Constant, Expr, call
from ember.ir.op import list_ops
from ember.ir.types import TensorType
from ember.support.dtypes import numpy_dtype as _np

#: ConstantOfShape results up to this many elements are plain constants; larger ones are a
#: broadcast of the scalar so the module does not carry a huge literal.
_MATERIALIZE_LIMIT = 1 << 16

_VALUE_ATTRS = (
    "value",
    "sparse_value",
    "value_float",
    "value_floats",
    "value_int",
    "value_ints",
    "value_string",
    "value_strings",
)


def _input(ctx: ConvertContext, node: NodeView, i: int, what: str) -> Expr:
    """Input ``i`` of ``node``; FrontendError when it is omitted."""
    expr = node.input(i)
    if expr is None:
        ctx.fail(node, f"{what} (input {i}) is required but omitted")
    return expr


def _tensor_type(ctx: ConvertContext, node: NodeView, expr: Expr) -> TensorType:
    if not isinstance(expr.type, TensorType):
        ctx.fail(node, f"expected a tensor input, got {expr.type}")
    return expr.type


@onnx_op("Constant", since=1)
def constant(ctx: ConvertContext, node: NodeView) -> Expr:
    """Constant: exactly one of the value attributes (tensor, sparse, scalar or list forms)."""
    present = [a for a in _VALUE_ATTRS if node.has_attr(a)]
    if len(present) != 1:
        ctx.fail(
            node,
            f"a Constant needs exactly one value attribute, found {present or 'none'}; "
            f"expected one of {', '.join(_VALUE_ATTRS)}",
        )
    kind = present[0]
    value = node.attr(kind)
    if kind in ("value_string", "value_strings"):
        ctx.fail(node, "string constants are not supported (ember tensors are numeric)")
    if kind == "value_float":
        return Constant(np.array(value, dtype=np.float32))
    if kind == "value_floats":
        return Constant(np.array(value, dtype=np.float32).reshape(len(value)))
    if kind == "value_int":
        return Constant(np.array(value, dtype=np.int64))
    if kind == "value_ints":
        return Constant(np.array(value, dtype=np.int64).reshape(len(value)))
    return Constant(np.asarray(value))  # value / sparse_value: already decoded to numpy


@onnx_op("Identity", since=1, dtypes=ALL_TYPES)
def identity(ctx: ConvertContext, node: NodeView) -> Expr:
    """Identity: the input itself."""
    return _input(ctx, node, 0, "the input")


@onnx_op("Dropout", since=1, dtypes=ALL_TYPES)
def dropout(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """Dropout: in inference the input unchanged and (if used) a mask of ones.

    From opset 12 ``ratio`` and ``training_mode`` are inputs, constant or fed at run time.
    Training mode draws onnx's reference mask, numpy's ``RandomState(seed).uniform(0, 1,
    x.shape) >= ratio`` (the random family's generator, reseeded at each run), and gives
    ``mask * x * (1 / (1 - ratio))``; ``training_mode`` false (or ``ratio`` 0) keeps ``x``.
    """
    x = _input(ctx, node, 0, "the data")
    ty = _tensor_type(ctx, node, x)
    ratio, training = node.input(1), node.input(2)
    if node.opset >= 12 and training is not None and not _is_inference(ctx, ratio, training):
        return _training_dropout(ctx, node, x, ratio, training)
    if node.opset < 7 and node.attr("is_test", 1) == 0:
        ctx.fail(node, "Dropout with is_test=0 is training mode; export in eval mode")
    mask: Expr | None = None
    if node.output_used(1):
        mask_dtype = "bool" if node.opset >= 10 else ty.dtype
        mask = _filled(ty.shape, np.ones((), dtype=_np(mask_dtype)), node)
    return [x, mask]


def _is_inference(ctx: ConvertContext, ratio: Expr | None, training: Expr) -> bool:
    """True when ``training_mode`` is a constant false or ``ratio`` a constant 0."""
    mode = ctx.const_value(training)
    if mode is not None and not bool(np.asarray(mode).reshape(-1)[0]):
        return True
    rate = None if ratio is None else ctx.const_value(ratio)
    return rate is not None and float(np.asarray(rate).reshape(-1)[0]) == 0.0


def _training_dropout(
    ctx: ConvertContext, node: NodeView, x: Expr, ratio: Expr | None, training: Expr
) -> list[Expr | None]:
    """``keep = uniform >= ratio`` (or all kept when training_mode is false at run time);
    ``y = x * keep * scale`` with ``scale = 1 / (1 - ratio)`` in ratio's dtype, as numpy."""
    ty = _tensor_type(ctx, node, x)
    rate = Constant(np.array(0.5, dtype=np.float32)) if ratio is None else ratio
    rtype = _tensor_type(ctx, node, rate)
    if rtype.size != 1 or _tensor_type(ctx, node, training).size != 1:
        ctx.fail(node, "ratio and training_mode must be scalars")
    rate = call("reshape", rate, newshape=())
    mode = call("reshape", training, newshape=())
    u = random.uniform(ty.shape, 0.0, 1.0, random.seed_of(ctx, node), node.name)
    keep = call("greater_equal", u, call("cast", rate, dtype="float64"))
    one = Constant(np.ones((), dtype=_np(rtype.dtype)))
    scale = call("divide", one, call("subtract", one, rate))
    if not ctx.is_const(training):  # fed at run time: false keeps every element, scale 1
        keep = call("logical_or", keep, call("logical_not", mode))
        scale = call("where", mode, scale, one)
    y = call("multiply", x, call("cast", keep, dtype=ty.dtype))
    y = call("multiply", y, call("cast", scale, dtype=ty.dtype), name=node.name)
    return [y, keep if node.output_used(1) else None]


@onnx_op("Shape", since=1, dtypes=ALL_TYPES)
def shape(ctx: ConvertContext, node: NodeView) -> Expr:
    """Shape (opset 15 adds start/end): a constant int64 vector, since shapes are static."""
    ty = _tensor_type(ctx, node, _input(ctx, node, 0, "the data"))
    dims = list(ty.shape)
    start = int(node.attr("start", 0))
    end = node.attr("end", None)
    rank = len(dims)
    lo = min(max(start + rank if start < 0 else start, 0), rank)
    if end is None:
        hi = rank
    else:
        end = int(end)
        hi = min(max(end + rank if end < 0 else end, 0), rank)
    return Constant(np.array(dims[lo:hi], dtype=np.int64).reshape(max(hi - lo, 0)))


@onnx_op("Size", since=1, dtypes=ALL_TYPES)
def size(ctx: ConvertContext, node: NodeView) -> Expr:
    """Size: a constant int64 scalar, the number of elements."""
    ty = _tensor_type(ctx, node, _input(ctx, node, 0, "the data"))
    return Constant(np.array(ty.size, dtype=np.int64))


@onnx_op("ConstantOfShape", since=9, dtypes=frozenset({"int64"}))
def constant_of_shape(ctx: ConvertContext, node: NodeView) -> Expr:
    """ConstantOfShape: a tensor of the (static) input shape filled with ``value``."""
    dims = ctx.require_const(_input(ctx, node, 0, "the shape"), "the output shape")
    dims_list = [int(d) for d in np.asarray(dims).reshape(-1)]
    if any(d < 0 for d in dims_list):
        ctx.fail(node, f"the output shape {dims_list} has a negative dim")
    value = node.attr("value", None)
    scalar = np.zeros((), dtype=np.float32) if value is None else np.asarray(value)
    if scalar.size != 1:
        ctx.fail(node, f"'value' must hold exactly one element, got shape {scalar.shape}")
    return _filled(tuple(dims_list), scalar.reshape(()), node)


@onnx_op("Range", since=11, dtypes=NUMERIC_TYPES)
def range_(ctx: ConvertContext, node: NodeView) -> Expr:
    """Range: start, limit, delta must be static (the output length depends on them)."""
    start = ctx.require_const(_input(ctx, node, 0, "start"), "Range's start")
    limit = ctx.require_const(_input(ctx, node, 1, "limit"), "Range's limit")
    delta = ctx.require_const(_input(ctx, node, 2, "delta"), "Range's delta")
    dtype = start.dtype
    s, lim, d = (np.asarray(v).reshape(()).item() for v in (start, limit, delta))
    if d == 0:
        ctx.fail(node, "delta is 0, so the range would be infinite")
    count = max(int(math.ceil((lim - s) / d)), 0)
    # ONNX defines element i as start + i * delta computed in the input type.
    values = np.asarray(start).reshape(()) + np.arange(count).astype(dtype) * np.asarray(
        delta
    ).reshape(())
    return Constant(values.astype(dtype, copy=False).reshape(count))


def _filled(shape: tuple[int, ...], scalar: np.ndarray, node: NodeView) -> Expr:
    """A tensor of ``shape`` filled with ``scalar``: a Constant when small, else a broadcast."""
    count = math.prod(shape)
    if count <= _MATERIALIZE_LIMIT or "broadcast_to" not in list_ops():
        return Constant(np.full(shape, scalar, dtype=scalar.dtype))
    return call("broadcast_to", Constant(scalar), shape=shape, name=node.name)
