"""ONNX sequences and optionals inside a model, resolved at import time.

A sequence whose length is known at build time is an ir ``Tuple`` of its tensors (the
elements may differ in shape); every sequence op takes its positions as constants and
builds a new tuple, and SequenceMap applies its body to each element (converted once per
element, so its cost is bounded by the static length). An optional is its value when
present and :class:`EmptyOptional` when not, so OptionalHasElement is a constant.

Sequences and optionals as inputs or outputs of the whole model are refused by the
importer: a compiled model takes and returns tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import onnx_op
from ember.ir.expr import Constant, Expr, Tuple, TupleGetItem, call
from ember.ir.ops.common import normalize_axis
from ember.ir.types import TensorType, TupleType


@dataclass(frozen=True, eq=False)
class EmptyOptional(Expr):
    """An optional without a value; exists only during import (it never reaches the IR)."""

    type: TupleType = field(default=TupleType(()))


def _seq(ctx: ConvertContext, node: NodeView, i: int = 0) -> Tuple:
    value = node.input(i)
    if not isinstance(value, Tuple) or isinstance(value, EmptyOptional):
        kind = "omitted" if value is None else str(value.type)
        ctx.fail(node, f"input {i} must be a sequence known at build time, got {kind}")
    return value


def _position(ctx: ConvertContext, node: NodeView, i: int, size: int, default: int) -> int:
    """A constant position in ``[-size, size)`` (``size`` allowed when inserting)."""
    if node.input(i) is None:
        return default
    pos = int(np.asarray(ctx.require_const(node.input(i), "the sequence position")).reshape(-1)[0])
    top = size + (1 if node.op_type == "SequenceInsert" else 0)
    if not -size <= pos < top:
        ctx.fail(node, f"position {pos} is outside the sequence of length {size}")
    return pos + size if pos < 0 else pos


@onnx_op("SequenceEmpty", since=11)
def sequence_empty(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SequenceEmpty: a tuple of no tensors."""
    return [Tuple(())]


@onnx_op("SequenceConstruct", since=11)
def sequence_construct(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SequenceConstruct: the tensors as a tuple."""
    values = [v for v in node.inputs if v is not None]
    return [Tuple(tuple(values))]


@onnx_op("SequenceInsert", since=11)
def sequence_insert(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SequenceInsert: at a constant position (default: the end)."""
    seq = _seq(ctx, node)
    value = node.input(1)
    if value is None:
        ctx.fail(node, "the tensor to insert is omitted")
    fields = list(seq.fields)
    fields.insert(_position(ctx, node, 2, len(fields), len(fields)), value)
    return [Tuple(tuple(fields))]


@onnx_op("SequenceAt", since=11)
def sequence_at(ctx: ConvertContext, node: NodeView) -> Expr:
    """SequenceAt: the element at a constant position."""
    seq = _seq(ctx, node)
    return seq.fields[_position(ctx, node, 1, len(seq.fields), 0)]


@onnx_op("SequenceErase", since=11)
def sequence_erase(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SequenceErase: without the element at a constant position (default: the last)."""
    seq = _seq(ctx, node)
    fields = list(seq.fields)
    if not fields:
        ctx.fail(node, "cannot erase from an empty sequence")
    del fields[_position(ctx, node, 1, len(fields), len(fields) - 1)]
    return [Tuple(tuple(fields))]


@onnx_op("SequenceLength", since=11)
def sequence_length(ctx: ConvertContext, node: NodeView) -> Expr:
    """SequenceLength: a constant."""
    return Constant(np.array(len(_seq(ctx, node).fields), "int64"))


@onnx_op("SplitToSequence", since=11)
def split_to_sequence(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SplitToSequence: parts of constant sizes (or of size one, optionally squeezed)."""
    x = node.input(0)
    if x is None or not isinstance(x.type, TensorType):
        ctx.fail(node, "the input must be a tensor")
    ty = x.type
    axis = normalize_axis(int(node.attr("axis", 0)), ty.ndim)
    length = ty.shape[axis]
    if node.input(1) is None:
        sizes = [1] * length
    else:
        split = np.asarray(ctx.require_const(node.input(1), "the split"), np.int64)
        if split.ndim == 0:
            chunk = int(split)
            sizes = [chunk] * (length // chunk) + ([length % chunk] if length % chunk else [])
        else:
            sizes = [int(s) for s in split]
    if sum(sizes) != length:
        ctx.fail(node, f"split sizes {sizes} do not add up to {length}")
    parts = _split(x, axis, sizes)
    if node.input(1) is None and not node.attr("keepdims", 1):
        shape = ty.shape[:axis] + ty.shape[axis + 1 :]
        parts = [call("reshape", p, newshape=shape) for p in parts]
    return [Tuple(tuple(parts))]


def _split(x: Expr, axis: int, sizes: Sequence[int]) -> list[Expr]:
    if len(sizes) == 1:
        return [x]
    parts = call("split", x, sizes=sizes, axis=axis)
    return [TupleGetItem(parts, i) for i in range(len(sizes))]


@onnx_op("ConcatFromSequence", since=11)
def concat_from_sequence(ctx: ConvertContext, node: NodeView) -> Expr:
    """ConcatFromSequence: concatenate (or, with ``new_axis``, stack) the elements."""
    seq = _seq(ctx, node)
    if not seq.fields:
        ctx.fail(node, "cannot concatenate an empty sequence")
    first = seq.fields[0].tensor_type
    new_axis = bool(node.attr("new_axis", 0))
    axis = normalize_axis(int(node.attr("axis")), first.ndim + int(new_axis))
    values = list(seq.fields)
    if new_axis:
        shapes = [v.tensor_type.shape for v in values]
        values = [
            call("reshape", v, newshape=s[:axis] + (1,) + s[axis:])
            for v, s in zip(values, shapes, strict=True)
        ]
    return values[0] if len(values) == 1 else call("concatenate", *values, axis=axis)


@onnx_op("SequenceMap", since=17)
def sequence_map(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """SequenceMap: the body converted once per element (sequence inputs give element i,
    tensor inputs themselves); each output is the sequence of the body's results."""
    graph = node.attr("body")
    seqs = [v for v in node.inputs if isinstance(v, Tuple)]
    if node.input(0) is None or not isinstance(node.input(0), Tuple) or not seqs:
        ctx.fail(node, "the first input must be a sequence known at build time")
    length = len(_seq(ctx, node).fields)
    if any(len(s.fields) != length for s in seqs):
        ctx.fail(node, "the input sequences differ in length")
    if ctx.convert_subgraph is None:
        ctx.fail(node, "subgraphs can only be converted by the importer (from_onnx)")
    results: list[list[Expr]] = [[] for _ in graph.output]
    saved = ctx.env
    for j in range(length):
        bound = {}
        for vi, value in zip(graph.input, node.inputs, strict=True):
            bound[vi.name] = value.fields[j] if isinstance(value, Tuple) else value
        ctx.env = {**saved, **bound}  # type: ignore[dict-item]
        try:
            outs = ctx.convert_subgraph(ctx, graph)
        finally:
            ctx.env = saved
        for k, out in enumerate(outs):
            results[k].append(out)
    return [Tuple(tuple(r)) for r in results]


@onnx_op("Optional", since=15)
def optional(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """Optional: the value itself, or an empty optional."""
    value = node.input(0)
    return [EmptyOptional() if value is None else value]


@onnx_op("OptionalHasElement", since=15)
def optional_has_element(ctx: ConvertContext, node: NodeView) -> Expr:
    """OptionalHasElement: known at build time."""
    value = node.input(0)
    return Constant(np.array(value is not None and not isinstance(value, EmptyOptional)))


@onnx_op("OptionalGetElement", since=15)
def optional_get_element(ctx: ConvertContext, node: NodeView) -> list[Expr | None]:
    """OptionalGetElement: the value; an empty optional is an error at build time."""
    value = node.input(0)
    if value is None or isinstance(value, EmptyOptional):
        ctx.fail(node, "the optional is empty (known at build time), so it has no element")
    return [value]
