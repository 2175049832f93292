"""Normalisations: nn.batch_norm, nn.instance_norm, nn.group_norm, nn.layer_norm, nn.lrn,
nn.softmax and nn.log_softmax.

Statistics are reductions with keepdims shapes (``mean``, centred ``var``, softmax's
``max`` and ``sum``), each computed once at root and read by the elementwise output; like
the numpy references the variance is the mean of the squared centred values (two passes,
no ``E[x^2] - E[x]^2`` cancellation). LRN's window sum has the output's shape and is
computed per output row. ``nn.batch_norm`` is plain elementwise arithmetic (the graph
pass ``simplify`` folds it away when its statistics are constants).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import tir
from ember.ir.expr import Call, Constant, Expr, call
from ember.ir.op import Attrs
from ember.ir.ops.common import normalize_axis
from ember.ir.types import TensorType, Type
from ember.ops.common import load_broadcast, scalar, static_shape
from ember.ops.narrow_softmax import narrow_softmax
from ember.ops.nn_common import check_dtype, product
from ember.ops.nn_schedule import MATERIALIZE, schedule_anchor
from ember.ops.nn_softmax_rows import MIN_ROW, row_softmax
from ember.ops.registry import register_compute, register_legalize, register_schedule
from ember.support.dtypes import is_half
from ember.tir import PrimExpr, te


def _keep(index: tuple[Any, ...], axes: range) -> tuple[Any, ...]:
    """``index`` with the reduced ``axes`` replaced by 0 (keepdims statistics)."""
    return tuple(scalar(0, "int32") if k in axes else i for k, i in enumerate(index))


#: a reduction over trailing axes whose last axis is at least MIN_SPLIT long keeps LANES
#: partial results side by side: the partial stage's innermost loop is a vectorised
#: ``acc[l] += x[j * LANES + l]`` with no serial dependency chain. A last axis that LANES
#: does not divide reads its last chunk's missing elements as the combiner's identity:
#: ViT's softmax over 197 scores was a serial chain of 197 additions, 3.4x the time of 192.
#: 16 (an AVX-512 vector, two AVX2 ones, four NEON ones: independent chains) instead of 8,
#: one thread: InstanceNormalization of 1x64x128x128 254 -> 172 us, LayerNormalization of
#: 1x512x768 82 -> 63 (onnxruntime 204, 134); 32 was slower on the LayerNorm.
LANES = 16
MIN_SPLIT = 32


def _reduce_keepdims(
    x: te.Tensor,
    axes: range,
    fn: Any,
    combiner: str,
    name: str,
) -> te.Tensor:
    """combiner over ``axes`` (consecutive) of ``fn(index)``, with keepdims shape."""
    shape = static_shape(x)
    n_last = shape[axes.stop - 1]
    if axes.stop == len(shape) and n_last >= MIN_SPLIT:
        return _reduce_lanes(x, axes, fn, combiner, name)
    red = [te.reduce_axis(shape[k], f"r{k}") for k in axes]
    out_shape = [1 if k in axes else s for k, s in enumerate(shape)]
    reducer = te.sum if combiner == "sum" else te.max

    def body(*i: Any) -> PrimExpr:
        full = list(i)
        for k, r in zip(axes, red, strict=True):
            full[k] = r.var
        return reducer(fn(tuple(full)), axis=red)

    return te.compute(out_shape, body, name, attrs={"reduce_after": axes.start})


def _reduce_lanes(x: te.Tensor, axes: range, fn: Any, combiner: str, name: str) -> te.Tensor:
    """_reduce_keepdims over trailing axes in two steps: LANES interleaved partial results
    (vectorisable), then their combination."""
    shape = static_shape(x)
    last = len(shape) - 1
    red = [te.reduce_axis(shape[k], f"r{k}") for k in axes[:-1]]
    width = shape[last]
    red.append(te.reduce_axis(-(-width // LANES), f"r{last}"))
    reducer = te.sum if combiner == "sum" else te.max
    part_shape = [1 if k in axes else s for k, s in enumerate(shape)]
    part_shape[last] = LANES

    def part(*i: Any) -> PrimExpr:
        full = list(i)
        for k, r in zip(axes[:-1], red[:-1], strict=True):
            full[k] = r.var
        full[last] = red[-1].var * LANES + i[last]
        value = fn(tuple(full))
        if width % LANES:  # the last chunk's lanes past the row: the combiner's identity
            identity = reducer(value, axis=red).identity()
            value = tir.if_then_else(full[last] < width, value, identity)
        return reducer(value, axis=red)

    partial = te.compute(part_shape, part, f"{name}_lanes", attrs={"reduce_after": last})
    lane = te.reduce_axis(LANES, "rl")

    def total(*i: Any) -> PrimExpr:
        return reducer(partial[(*i[:last], lane.var)], axis=lane)

    out_shape = [1 if k in axes else s for k, s in enumerate(shape)]
    return te.compute(out_shape, total, name, attrs={"reduce_after": axes.start})


def _keepdims_stage(shape: Any, fn: Any, name: str) -> te.Tensor:
    """A small per-row stage (statistics) kept in its own buffer, computed once."""
    return te.compute(shape, fn, name, attrs={MATERIALIZE: True})


def _moments(x: te.Tensor, axes: range, eps: float) -> tuple[te.Tensor, te.Tensor]:
    """Mean and 1 / sqrt(var + eps) over ``axes`` (keepdims, in x's dtype); the variance
    is the mean of the squared centred values, like the references."""
    count = scalar(product([static_shape(x)[k] for k in axes]), x.dtype)
    total = _reduce_keepdims(x, axes, lambda i: x[i], "sum", "mean_sum")
    mean = _keepdims_stage(total.shape, lambda *i: total[i] / count, "mean")

    def centred_sq(i: tuple[Any, ...]) -> PrimExpr:
        d = x[i] - mean[_keep(i, axes)]
        return d * d

    sq = _reduce_keepdims(x, axes, centred_sq, "sum", "var_sum")
    one = scalar(1.0, x.dtype)
    rstd = _keepdims_stage(
        sq.shape, lambda *i: one / tir.sqrt(sq[i] / count + scalar(eps, x.dtype)), "rstd"
    )
    return mean, rstd


def _normalized(x: te.Tensor, axes: range, i: tuple[Any, ...], stats: Any) -> PrimExpr:
    mean, rstd = stats
    kept = _keep(i, axes)
    return (x[i] - mean[kept]) * rstd[kept]


@register_compute("nn.batch_norm")
def batch_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """x * scale + shift with scale = gamma / sqrt(var + eps), shift = beta - mean * scale."""
    x, gamma, beta, mean, var = inputs
    check_dtype("nn.batch_norm", x.dtype)
    axis = normalize_axis(attrs["axis"], len(x.shape))
    eps = scalar(attrs["epsilon"], x.dtype)
    channels = static_shape(x)[axis]
    # per-channel scale and shift: kept in buffers under an nn anchor, else inlined
    scale = _keepdims_stage(
        (channels,), lambda c: gamma[c] / tir.sqrt(var[c] + eps), "batch_norm_scale"
    )
    shift = _keepdims_stage((channels,), lambda c: beta[c] - mean[c] * scale[c], "batch_norm_shift")

    def body(*i: Any) -> PrimExpr:
        return x[i] * scale[i[axis]] + shift[i[axis]]

    return te.compute(x.shape, body, "batch_norm")


@register_compute("nn.instance_norm")
def instance_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Normalise each (n, c) plane over its spatial axes, then scale and shift per channel."""
    x, scale, bias = inputs
    check_dtype("nn.instance_norm", x.dtype)
    axes = range(2, len(x.shape))
    stats = _moments(x, axes, float(attrs["epsilon"]))

    def body(*i: Any) -> PrimExpr:
        return _normalized(x, axes, i, stats) * scale[i[1]] + bias[i[1]]

    return te.compute(x.shape, body, "instance_norm")


def _group_total(sums: te.Tensor, axis: int, size: int, name: str) -> te.Tensor:
    """Per channel: the total of ``sums`` over the ``size`` channels of its group."""
    k = te.reduce_axis(size, "rg")

    def body(*i: Any) -> PrimExpr:
        first = i[axis] // size * size
        return te.sum(sums[(*i[:axis], first + k.var, *i[axis + 1 :])], axis=[k])

    return te.compute(sums.shape, body, name)


@register_compute("nn.group_norm")
def group_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Per-channel sums over the spatial axes (vectorised over channels when channels are
    last), totalled per group; the centred squares likewise; then one multiply-add a value
    with a per-channel factor and offset."""
    x, scale, bias = inputs
    check_dtype("nn.group_norm", x.dtype)
    shape = static_shape(x)
    last = attrs["data_layout"] == "NHWC"
    axis = len(shape) - 1 if last else 1
    spatial = range(1, axis) if last else range(2, len(shape))
    size = shape[axis] // int(attrs["num_groups"])
    count = scalar(size * product([shape[k] for k in spatial]), x.dtype)
    sums = _reduce_keepdims(x, spatial, lambda i: x[i], "sum", "group_sum")
    totals = _group_total(sums, axis, size, "group_total")
    mean = _keepdims_stage(totals.shape, lambda *i: totals[i] / count, "group_mean")

    def centred_sq(i: tuple[Any, ...]) -> PrimExpr:
        d = x[i] - mean[_keep(i, spatial)]
        return d * d

    squares = _reduce_keepdims(x, spatial, centred_sq, "sum", "group_var_sum")
    var = _group_total(squares, axis, size, "group_var_total")
    eps, one = scalar(float(attrs["epsilon"]), x.dtype), scalar(1.0, x.dtype)

    def factor_of(*i: Any) -> PrimExpr:
        return one / tir.sqrt(var[i] / count + eps) * scale[i[axis]]

    factor = _keepdims_stage(var.shape, factor_of, "group_factor")
    offset = _keepdims_stage(
        var.shape, lambda *i: bias[i[axis]] - mean[i] * factor[i], "group_offset"
    )

    def body(*i: Any) -> PrimExpr:
        kept = _keep(i, spatial)
        return x[i] * factor[kept] + offset[kept]

    return te.compute(x.shape, body, "group_norm")


@register_compute("nn.layer_norm")
def layer_norm(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Normalise over the axes from ``axis`` to the end, then scale (and shift)."""
    x = inputs[0]
    check_dtype("nn.layer_norm", x.dtype)
    axes = range(normalize_axis(attrs["axis"], len(x.shape)), len(x.shape))
    stats = _moments(x, axes, float(attrs["epsilon"]))

    def body(*i: Any) -> PrimExpr:
        y = _normalized(x, axes, i, stats) * load_broadcast(inputs[1], i)
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


#: whether a float32 softmax over a last axis of MIN_ROW or more runs row by row
#: (ember.ops.nn_softmax_rows: each row's passes in the L1); False: te's whole-tensor passes.
ROW_SOFTMAX = True


def _by_rows(shape: tuple[int, ...], dtype: str, axis: int) -> bool:
    """Whether a softmax of ``shape`` and ``dtype`` over ``axis`` runs row by row."""
    last = normalize_axis(axis, len(shape)) == len(shape) - 1 if shape else False
    return ROW_SOFTMAX and last and dtype == "float32" and shape[-1] >= MIN_ROW


def _softmax_parts(
    x: te.Tensor, attrs: Attrs, keep_exp: bool
) -> tuple[range, te.Tensor, te.Tensor, te.Tensor | None]:
    """The axis, the row max, the row sum of exp(x - max) and (with ``keep_exp``) the
    exponentials themselves, kept in a buffer so each is computed once."""
    axis = normalize_axis(attrs["axis"], len(x.shape))
    axes = range(axis, axis + 1)
    peak = _reduce_keepdims(x, axes, lambda i: x[i], "max", "softmax_max")

    def shifted_exp(*i: Any) -> PrimExpr:
        return tir.exp(x[i] - peak[_keep(i, axes)])

    if keep_exp:
        e = te.compute(x.shape, shifted_exp, "softmax_exp", attrs={MATERIALIZE: True})
        total = _reduce_keepdims(x, axes, lambda i: e[i], "sum", "softmax_sum")
        return axes, peak, total, e
    total = _reduce_keepdims(x, axes, lambda i: shifted_exp(*i), "sum", "softmax_sum")
    return axes, peak, total, None


@register_compute("nn.softmax")
def softmax(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """exp(x - max) / sum(exp(x - max)) along ``axis`` (one exp per element)."""
    x = inputs[0]
    if is_half(x.dtype):  # rounded step by step like onnx's reference (narrow_softmax)
        return narrow_softmax(x, attrs["axis"])
    check_dtype("nn.softmax", x.dtype)
    if _by_rows(static_shape(x), x.dtype, attrs["axis"]):
        return row_softmax(x)
    axes, _, total, e = _softmax_parts(x, attrs, keep_exp=True)
    assert e is not None
    one = scalar(1.0, x.dtype)
    inv = _keepdims_stage(total.shape, lambda *i: one / total[i], "softmax_inv")

    def body(*i: Any) -> PrimExpr:
        return e[i] * inv[_keep(i, axes)]

    return te.compute(x.shape, body, "softmax")


@register_compute("nn.softmax_rows")
def softmax_rows(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The row softmax over each row's first ``width`` elements (nn_softmax_rows)."""
    return row_softmax(inputs[0], int(attrs["width"]))


@register_legalize("nn.softmax")
def softmax_of_padded_rows(node: Call) -> Expr:
    """``softmax(slice(P))`` or ``softmax(slice(P) * c)`` over the last axis, the slice
    dropping P's padded columns (long float32 rows): ``softmax_rows(P [* c])``, which reads
    the padded rows in place."""
    x = node.args[0]
    ty = node.type
    if not isinstance(ty, TensorType) or not _by_rows(ty.shape, ty.dtype, node.attrs["axis"]):
        return node
    scale = None
    if isinstance(x, Call) and x.op_name == "multiply":
        lhs, rhs = x.args
        if isinstance(rhs, Constant) and np.size(rhs.data) == 1:
            x, scale = lhs, rhs
    padded = _last_axis_prefix(x)
    if padded is None:
        return node
    if scale is not None:
        padded = call("multiply", padded, Constant(np.asarray(scale.data).reshape(())))
    return call("nn.softmax_rows", padded, width=int(ty.shape[-1]), name=node.name)


def _last_axis_prefix(x: Expr) -> Expr | None:
    """P when ``x`` is ``strided_slice(P)`` keeping a prefix of P's last axis only."""
    if not isinstance(x, Call) or x.op_name != "strided_slice":
        return None
    p = x.args[0]
    pty = p.type
    if not isinstance(pty, TensorType):
        return None
    begin, end, strides = (tuple(x.attrs[k]) for k in ("begin", "end", "strides"))
    if any(begin) or any(s != 1 for s in strides) or tuple(end[:-1]) != pty.shape[:-1]:
        return None
    return p


@register_compute("nn.log_softmax")
def log_softmax(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """(x - max) - log(sum(exp(x - max))) along ``axis``."""
    x = inputs[0]
    check_dtype("nn.log_softmax", x.dtype)
    if _by_rows(static_shape(x), x.dtype, attrs["axis"]):
        return row_softmax(x, log=True)
    axes, peak, total, _ = _softmax_parts(x, attrs, keep_exp=False)
    lse = _keepdims_stage(total.shape, lambda *i: tir.log(total[i]), "softmax_lse")

    def body(*i: Any) -> PrimExpr:
        kept = _keep(i, axes)
        return (x[i] - peak[kept]) - lse[kept]

    return te.compute(x.shape, body, "log_softmax")


_NORMS = ("nn.instance_norm", "nn.group_norm", "nn.layer_norm", "nn.lrn", "nn.softmax_rows")
for _name in (*_NORMS, "nn.softmax", "nn.log_softmax"):
    register_schedule(_name)(schedule_anchor)
