"""Normalisations: nn.batch_norm, nn.instance_norm, nn.layer_norm, nn.lrn, nn.softmax and
nn.log_softmax.

Statistics are reductions with keepdims shapes (``mean``, centred ``var``, softmax's
``max`` and ``sum``), each computed once at root and read by the elementwise output; like
the numpy references the variance is the mean of the squared centred values (two passes,
no ``E[x^2] - E[x]^2`` cancellation). LRN's window sum has the output's shape and is
computed per output row. ``nn.batch_norm`` is plain elementwise arithmetic (the graph
pass ``simplify`` folds it away when its statistics are constants).
"""

from __future__ import annotations

from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.ops.nn_util import normalize_axis
from ember.ir.types import Type
from ember.ops.common import load_broadcast, scalar, static_shape
from ember.ops.nn_common import check_dtype, product
from ember.ops.nn_schedule import schedule_anchor
from ember.ops.registry import register_compute, register_schedule
from ember.tir import PrimExpr, te


def _keep(index: tuple[Any, ...], axes: range) -> tuple[Any, ...]:
    """``index`` with the reduced ``axes`` replaced by 0 (keepdims statistics)."""
    return tuple(scalar(0, "int32") if k in axes else i for k, i in enumerate(index))


def _reduce_keepdims(
    x: te.Tensor,
    axes: range,
    fn: Any,
    combiner: str,
    name: str,
) -> te.Tensor:
    """combiner over ``axes`` (consecutive) of ``fn(index)``, with keepdims shape."""
    shape = static_shape(x)
    red = [te.reduce_axis(shape[k], f"r{k}") for k in axes]
    out_shape = [1 if k in axes else s for k, s in enumerate(shape)]
    reducer = te.sum if combiner == "sum" else te.max

    def body(*i: Any) -> PrimExpr:
        full = list(i)
        for k, r in zip(axes, red, strict=True):
            full[k] = r.var
        return reducer(fn(tuple(full)), axis=red)

    return te.compute(out_shape, body, name, attrs={"reduce_after": axes.start})


def _moments(x: te.Tensor, axes: range) -> tuple[te.Tensor, te.Tensor]:
    """Mean and (biased) variance over ``axes``, both keepdims, computed in x's dtype."""
    count = scalar(product([static_shape(x)[k] for k in axes]), x.dtype)
    total = _reduce_keepdims(x, axes, lambda i: x[i], "sum", "mean_sum")
    mean = te.compute(total.shape, lambda *i: total[i] / count, "mean")

    def centred_sq(i: tuple[Any, ...]) -> PrimExpr:
        d = x[i] - mean[_keep(i, axes)]
        return d * d

    sq = _reduce_keepdims(x, axes, centred_sq, "sum", "var_sum")
    var = te.compute(sq.shape, lambda *i: sq[i] / count, "var")
    return mean, var


def _normalized(
    x: te.Tensor, axes: range, eps: float, i: tuple[Any, ...], mean: te.Tensor, var: te.Tensor
) -> PrimExpr:
    kept = _keep(i, axes)
    return (x[i] - mean[kept]) / tir.sqrt(var[kept] + scalar(eps, x.dtype))


@register_compute("nn.batch_norm")
def batch_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """x * scale + shift with scale = gamma / sqrt(var + eps), shift = beta - mean * scale."""
    x, gamma, beta, mean, var = inputs
    check_dtype("nn.batch_norm", x.dtype)
    axis = normalize_axis(attrs["axis"], len(x.shape))
    eps = scalar(attrs["epsilon"], x.dtype)

    def body(*i: Any) -> PrimExpr:
        c = i[axis]
        scale = gamma[c] / tir.sqrt(var[c] + eps)
        return x[i] * scale + (beta[c] - mean[c] * scale)

    return te.compute(x.shape, body, "batch_norm")


@register_compute("nn.instance_norm")
def instance_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Normalise each (n, c) plane over its spatial axes, then scale and shift per channel."""
    x, scale, bias = inputs
    check_dtype("nn.instance_norm", x.dtype)
    axes = range(2, len(x.shape))
    mean, var = _moments(x, axes)
    eps = float(attrs["epsilon"])

    def body(*i: Any) -> PrimExpr:
        return _normalized(x, axes, eps, i, mean, var) * scale[i[1]] + bias[i[1]]

    return te.compute(x.shape, body, "instance_norm")


@register_compute("nn.layer_norm")
def layer_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Normalise over the axes from ``axis`` to the end, then scale (and shift)."""
    x = inputs[0]
    check_dtype("nn.layer_norm", x.dtype)
    axes = range(normalize_axis(attrs["axis"], len(x.shape)), len(x.shape))
    mean, var = _moments(x, axes)
    eps = float(attrs["epsilon"])

    def body(*i: Any) -> PrimExpr:
        y = _normalized(x, axes, eps, i, mean, var) * load_broadcast(inputs[1], i)
        if len(inputs) > 2:
            y = y + load_broadcast(inputs[2], i)
        return y

    return te.compute(x.shape, body, "layer_norm")


@register_compute("nn.lrn")
def lrn(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """x / (bias + alpha / size * window sum of x^2 across ``axis``) ** beta."""
    x = inputs[0]
    check_dtype("nn.lrn", x.dtype)
    shape = static_shape(x)
    axis = normalize_axis(attrs["axis"], len(shape))
    size = int(attrs["size"])
    before = (size - 1) // 2
    r = te.reduce_axis(size, "rw")

    def window(*i: Any) -> PrimExpr:
        c = i[axis] + r.var - before
        src = tuple(c if k == axis else v for k, v in enumerate(i))
        inside = tir.logical_and(c >= 0, c < shape[axis])
        value = tir.if_then_else(inside, x[src], scalar(0, x.dtype))
        return te.sum(value * value, axis=r)

    sq = te.compute(shape, window, "lrn_sum")
    bias = scalar(attrs["bias"], x.dtype)
    alpha = scalar(attrs["alpha"] / size, x.dtype)
    beta = scalar(attrs["beta"], x.dtype)

    def body(*i: Any) -> PrimExpr:
        return x[i] / tir.pow(bias + alpha * sq[i], beta)

    return te.compute(shape, body, "lrn")


def _softmax_parts(x: te.Tensor, attrs: Attrs) -> tuple[range, te.Tensor, te.Tensor]:
    axis = normalize_axis(attrs["axis"], len(x.shape))
    axes = range(axis, axis + 1)
    peak = _reduce_keepdims(x, axes, lambda i: x[i], "max", "softmax_max")

    def shifted_exp(i: tuple[Any, ...]) -> PrimExpr:
        return tir.exp(x[i] - peak[_keep(i, axes)])

    total = _reduce_keepdims(x, axes, shifted_exp, "sum", "softmax_sum")
    return axes, peak, total


@register_compute("nn.softmax")
def softmax(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """exp(x - max) / sum(exp(x - max)) along ``axis``."""
    x = inputs[0]
    check_dtype("nn.softmax", x.dtype)
    axes, peak, total = _softmax_parts(x, attrs)

    def body(*i: Any) -> PrimExpr:
        kept = _keep(i, axes)
        return tir.exp(x[i] - peak[kept]) / total[kept]

    return te.compute(x.shape, body, "softmax")


@register_compute("nn.log_softmax")
def log_softmax(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    x = inputs[0]
    check_dtype("nn.log_softmax", x.dtype)
    axes, peak, total = _softmax_parts(x, attrs)

    def body(*i: Any) -> PrimExpr:
        kept = _keep(i, axes)
        return (x[i] - peak[kept]) - tir.log(total[kept])

    return te.compute(x.shape, body, "log_softmax")


for _name in ("nn.instance_norm", "nn.layer_norm", "nn.lrn", "nn.softmax", "nn.log_softmax"):
    register_schedule(_name)(schedule_anchor)
