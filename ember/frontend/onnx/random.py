"""ONNX handlers of the random family: RandomUniform, RandomNormal, RandomUniformLike,
RandomNormalLike, Bernoulli, Multinomial (and the generator of training-mode Dropout).

Every op is numpy's legacy ``RandomState(seed)`` (ember/ir/ops/random.py), reseeded at
each run, so a model gives the same numbers on every run, and the numbers onnx's reference
implementation (``onnx.reference``) gives for the same seed. The ``seed`` attribute (a
float in ONNX) is truncated to an integer, as onnx's reference does; it must lie in
0..2**32-1. A node without a seed gets one from the build: the CRC-32 of its op type and
first output name (``seed_of``), so two builds of a model give the same artifacts and the
same numbers, and two unseeded nodes of one model differ.
"""

from __future__ import annotations

import math
import zlib

from ember.frontend.onnx.common import arg, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView, onnx_elem_dtype
from ember.frontend.onnx.registry import onnx_op
from ember.ir.expr import Expr, call
from ember.ir.ops.random import SEED_LIMIT

#: the input types of Bernoulli and Multinomial (ONNX's T1).
_PROB_TYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
#: ONNX's default output type of RandomUniform/RandomNormal (FLOAT) and Multinomial (INT32).
_FLOAT, _INT32 = 1, 6


def seed_of(ctx: ConvertContext, node: NodeView) -> int:
    """The node's ``seed`` as numpy's RandomState takes it, or one derived from the node."""
    if not node.has_attr("seed"):
        name = node.output_names[0] if node.output_names else node.name
        return zlib.crc32(f"{node.op_type}:{name}".encode())
    value = float(node.attr("seed"))
    if not math.isfinite(value) or not 0 <= int(value) < SEED_LIMIT:
        ctx.fail(
            node,
            f"seed {value} is out of range; ember's generator is numpy's RandomState(seed), "
            f"which takes seeds 0..{SEED_LIMIT - 1}: change the seed attribute",
        )
    return int(value)


def _out_dtype(ctx: ConvertContext, node: NodeView, default: str | int) -> str:
    """The ``dtype`` attribute as an ember dtype, else ``default`` (a dtype or ONNX code)."""
    code = node.attr("dtype", None)
    if code is None:
        return default if isinstance(default, str) else onnx_elem_dtype(default, ctx.where(node))
    return onnx_elem_dtype(int(code), ctx.where(node))


def _cast(x: Expr, dtype: str, node: NodeView) -> Expr:
    return x if ttype(x).dtype == dtype else call("cast", x, dtype=dtype, name=node.name)


def uniform(shape: tuple[int, ...], low: float, high: float, seed: int, name: str) -> Expr:
    """float64 ``RandomState(seed).uniform(low, high, shape)`` as a graph expression."""
    return call("random.uniform", shape=shape, low=low, high=high, seed=seed, name=name)


def _uniform(ctx: ConvertContext, node: NodeView, shape: tuple[int, ...], dtype: str) -> Expr:
    low, high = float(node.attr("low", 0.0)), float(node.attr("high", 1.0))
    return _cast(uniform(shape, low, high, seed_of(ctx, node), node.name), dtype, node)


def _normal(ctx: ConvertContext, node: NodeView, shape: tuple[int, ...], dtype: str) -> Expr:
    mean, scale = float(node.attr("mean", 0.0)), float(node.attr("scale", 1.0))
    seed = seed_of(ctx, node)
    value = call("random.normal", shape=shape, mean=mean, scale=scale, seed=seed, name=node.name)
    return _cast(value, dtype, node)


def _static_shape(ctx: ConvertContext, node: NodeView) -> tuple[int, ...]:
    shape = tuple(int(d) for d in node.attr("shape"))
    if any(d < 0 for d in shape):
        ctx.fail(node, f"the shape {shape} has a negative dim")
    return shape


@onnx_op("RandomUniform", since=1)
def random_uniform(ctx: ConvertContext, node: NodeView) -> Expr:
    """RandomUniform: ``RandomState(seed).uniform(low, high, shape)`` cast to ``dtype``."""
    return _uniform(ctx, node, _static_shape(ctx, node), _out_dtype(ctx, node, _FLOAT))


@onnx_op("RandomNormal", since=1)
def random_normal(ctx: ConvertContext, node: NodeView) -> Expr:
    """RandomNormal: ``RandomState(seed).normal(mean, scale, shape)`` cast to ``dtype``."""
    return _normal(ctx, node, _static_shape(ctx, node), _out_dtype(ctx, node, _FLOAT))


@onnx_op("RandomUniformLike", since=1)
def random_uniform_like(ctx: ConvertContext, node: NodeView) -> Expr:
    """RandomUniformLike: RandomUniform of the input's shape (and dtype, by default)."""
    xt = ttype(arg(ctx, node, 0))
    return _uniform(ctx, node, xt.shape, _out_dtype(ctx, node, xt.dtype))


@onnx_op("RandomNormalLike", since=1)
def random_normal_like(ctx: ConvertContext, node: NodeView) -> Expr:
    """RandomNormalLike: RandomNormal of the input's shape (and dtype, by default)."""
    xt = ttype(arg(ctx, node, 0))
    return _normal(ctx, node, xt.shape, _out_dtype(ctx, node, xt.dtype))


@onnx_op("Bernoulli", since=15, dtypes=_PROB_TYPES)
def bernoulli(ctx: ConvertContext, node: NodeView) -> Expr:
    """Bernoulli: ``RandomState(seed).binomial(1, p)`` (onnx's reference), cast to ``dtype``."""
    p = arg(ctx, node, 0, "the probabilities")
    dtype = _out_dtype(ctx, node, ttype(p).dtype)
    drawn = call("random.bernoulli", _cast(p, "float64", node), seed=seed_of(ctx, node))
    return _cast(drawn, dtype, node)


@onnx_op("Multinomial", since=7, dtypes=_PROB_TYPES)
def multinomial(ctx: ConvertContext, node: NodeView) -> Expr:
    """Multinomial: ``sample_size`` class indices per row of log-probabilities."""
    x = arg(ctx, node, 0, "the log-probabilities")
    if len(ttype(x).shape) != 2:
        ctx.fail(node, f"the input must be [batch_size, class_size], got shape {ttype(x).shape}")
    dtype = _out_dtype(ctx, node, _INT32)
    if dtype not in ("int32", "int64"):
        ctx.fail(node, f"dtype must be int32 or int64, got {dtype}")
    drawn = call(
        "random.multinomial",
        _cast(x, "float64", node),
        sample_size=int(node.attr("sample_size", 1)),
        seed=seed_of(ctx, node),
        name=node.name,
    )
    return _cast(drawn, dtype, node)
