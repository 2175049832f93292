"""Convolution and matrix product ops: nn.conv, nn.conv_transpose, nn.dense, nn.matmul and
the post-legalization nn.conv_packed, nn.conv_depthwise_packed and nn.conv_winograd.

Layouts are ONNX's: data ``(N, C, *spatial)``, conv weight ``(O, C/groups, *kernel)``,
transposed-conv weight ``(C, O/groups, *kernel)``. Padding is ``(begin..., end...)``.
References compute half types in float32 and convolve by im2col + one batched matmul.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    broadcast_shapes,
    check_data_dtype,
    layout_reference,
    layout_rule,
    padding,
    spatial,
    tensor_arg,
    widen,
)
from ember.ir.ops.nn_conv_weights import (
    conv_reference,
    unpack_conv_weight,
    unpack_depthwise_weight,
)
from ember.ir.ops.nn_conv_winograd_form import (
    KINDS,
    STRIDE_TAPS,
    phase_padding,
    space_to_depth,
    winograd_reference,
)
from ember.ir.types import TensorType, Type

_CONV_ATTRS = {
    "strides": Attr("ints", (), "stride per spatial axis (empty: all 1)"),
    "padding": Attr("ints", (), "begin paddings then end paddings (empty: none)"),
    "dilation": Attr("ints", (), "dilation per spatial axis (empty: all 1)"),
    "groups": Attr("int", 1, "number of channel groups"),
}
_LAYOUT = {"data_layout": Attr("str", "NCHW", "NCHW, or NHWC (data, result channels last)")}


def _conv_operands(types: Sequence[Type]) -> tuple[TensorType, TensorType, int]:
    data = tensor_arg(types, 0, "data")
    weight = tensor_arg(types, 1, "weight")
    check_data_dtype(data, weight, "weight")
    if data.ndim < 3:
        raise IRError(f"data must be (N, C, spatial...) with at least one spatial axis, got {data}")
    if weight.ndim != data.ndim:
        raise IRError(f"weight {weight} must have the rank of data {data}")
    return data, weight, data.ndim - 2


def _conv_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data, weight, nsp = _conv_operands(types)
    groups = attrs["groups"]
    strides = spatial(attrs, "strides", nsp, 1)
    dilation = spatial(attrs, "dilation", nsp, 1)
    pads = padding(attrs, nsp)
    if groups < 1 or data.shape[1] % groups or weight.shape[0] % groups:
        raise IRError(
            f"groups={groups} must divide the input channels {data.shape[1]} "
            f"and the output channels {weight.shape[0]}"
        )
    if weight.shape[1] * groups != data.shape[1]:
        raise IRError(
            f"weight {weight} expects {weight.shape[1] * groups} input channels "
            f"(weight.shape[1] * groups), data has {data.shape[1]}"
        )
    out = []
    for i in range(nsp):
        extent = dilation[i] * (weight.shape[2 + i] - 1) + 1
        size = data.shape[2 + i] + pads[i][0] + pads[i][1]
        if size < extent:
            raise IRError(
                f"spatial axis {i}: padded input size {size} is smaller than the "
                f"dilated kernel extent {extent}"
            )
        out.append((size - extent) // strides[i] + 1)
    return TensorType((data.shape[0], weight.shape[0], *out), data.dtype)


def _conv_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = xs
    nsp = x.ndim - 2
    return conv_reference(
        x,
        w,
        spatial(attrs, "strides", nsp, 1),
        padding(attrs, nsp),
        spatial(attrs, "dilation", nsp, 1),
        attrs["groups"],
    )


def _conv_transpose_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data, weight, nsp = _conv_operands(types)
    groups = attrs["groups"]
    strides = spatial(attrs, "strides", nsp, 1)
    dilation = spatial(attrs, "dilation", nsp, 1)
    pads = padding(attrs, nsp)
    extra = spatial(attrs, "output_padding", nsp, 0)
    if groups < 1 or data.shape[1] % groups:
        raise IRError(f"groups={groups} must divide the input channels {data.shape[1]}")
    if weight.shape[0] != data.shape[1]:
        raise IRError(
            f"weight {weight} must have shape (C_in, C_out/groups, k...) with "
            f"C_in = {data.shape[1]} (the data channels)"
        )
    out = []
    for i in range(nsp):
        size = (
            strides[i] * (data.shape[2 + i] - 1)
            + extra[i]
            + dilation[i] * (weight.shape[2 + i] - 1)
            + 1
            - pads[i][0]
            - pads[i][1]
        )
        if size < 1:
            raise IRError(f"spatial axis {i}: the output size {size} is not positive")
        out.append(size)
    return TensorType((data.shape[0], weight.shape[1] * groups, *out), data.dtype)


def _conv_transpose_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """Transposed conv = conv of the stride-dilated input with the flipped, swapped kernel."""
    x, w = xs
    nsp = x.ndim - 2
    groups = attrs["groups"]
    strides = spatial(attrs, "strides", nsp, 1)
    dilation = spatial(attrs, "dilation", nsp, 1)
    pads = padding(attrs, nsp)
    extra = spatial(attrs, "output_padding", nsp, 0)
    n, c = x.shape[:2]
    kernel = w.shape[2:]
    og = w.shape[1]
    up_shape = [(s - 1) * st + 1 for s, st in zip(x.shape[2:], strides, strict=True)]
    up = np.zeros((n, c, *up_shape), dtype=x.dtype)
    up[(slice(None), slice(None), *(slice(None, None, st) for st in strides))] = x
    full = [
        (d * (k - 1) - b, d * (k - 1) - e + p)
        for d, k, (b, e), p in zip(dilation, kernel, pads, extra, strict=True)
    ]
    cg = c // groups
    wt = w.reshape(groups, cg, og, *kernel).swapaxes(1, 2).reshape(groups * og, cg, *kernel)
    wt = wt[(slice(None), slice(None), *(slice(None, None, -1) for _ in kernel))]
    return conv_reference(up, wt, (1,) * nsp, full, dilation, groups)


def _dense_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    weight = tensor_arg(types, 1, "weight")
    check_data_dtype(data, weight, "weight")
    if data.ndim < 1 or weight.ndim != 2:
        raise IRError(f"dense needs data (..., K) and weight (N, K); got {data} and {weight}")
    if data.shape[-1] != weight.shape[1]:
        raise IRError(
            f"reduction sizes differ: data {data} has K={data.shape[-1]}, "
            f"weight {weight} has K={weight.shape[1]}"
        )
    return TensorType((*data.shape[:-1], weight.shape[0]), data.dtype)


def _dense_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, w = xs
    return np.matmul(widen(x), widen(w).T).astype(x.dtype, copy=False)


def _matmul_type(types: Sequence[Type], attrs: Attrs) -> Type:
    a = tensor_arg(types, 0, "lhs")
    b = tensor_arg(types, 1, "rhs")
    check_data_dtype(a, b, "rhs")
    if a.ndim == 0 or b.ndim == 0:
        raise IRError(f"matmul operands must have rank >= 1, got {a} and {b}")
    ashape = (1, *a.shape) if a.ndim == 1 else a.shape
    bshape = (*b.shape, 1) if b.ndim == 1 else b.shape
    if ashape[-1] != bshape[-2]:
        raise IRError(
            f"reduction sizes differ: lhs {a} has K={ashape[-1]}, rhs {b} has K={bshape[-2]}"
        )
    batch = broadcast_shapes(ashape[:-2], bshape[:-2], what="matmul batch dimensions")
    out = [*batch]
    if a.ndim > 1:
        out.append(ashape[-2])
    if b.ndim > 1:
        out.append(bshape[-1])
    return TensorType(tuple(out), a.dtype)


def _matmul_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = xs
    return np.asarray(np.matmul(widen(a), widen(b))).astype(a.dtype, copy=False)


register_op(
    OpDef(
        name="nn.conv",
        num_inputs=2,
        infer_type=layout_rule(_conv_type),
        reference=layout_reference(_conv_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={**_CONV_ATTRS, **_LAYOUT},
        doc="N-d grouped convolution of (N, C, *sp) data with an (O, C/groups, *k) weight.",
    )
)

register_op(
    OpDef(
        name="nn.conv_transpose",
        num_inputs=2,
        infer_type=_conv_transpose_type,
        reference=_conv_transpose_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={
            **_CONV_ATTRS,
            "output_padding": Attr("ints", (), "extra size added at the end of each axis"),
        },
        doc="N-d transposed convolution with a (C, O/groups, *k) weight.",
    )
)

register_op(
    OpDef(
        name="nn.dense",
        num_inputs=2,
        infer_type=_dense_type,
        reference=_dense_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        doc="x (..., K) times the transpose of w (N, K): x @ w.T.",
    )
)

register_op(
    OpDef(
        name="nn.matmul",
        num_inputs=2,
        infer_type=_matmul_type,
        reference=_matmul_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        doc="numpy matmul: 1-D operands are promoted and batch dimensions broadcast.",
    )
)


# --- post-legalization: the nn.conv legalizer (ember.ops.nn_conv) makes these two ops ---
def _taps_first(attrs: Attrs) -> bool:
    """nn.conv_packed's ``taps_first`` (False for ops sharing its rules without it)."""
    return bool(dict(attrs).get("taps_first", 0))


def _packed_conv_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    weight = tensor_arg(types, 1, "weight")
    if weight.ndim != data.ndim + 1:
        raise IRError(
            f"nn.conv_packed: weight {weight} must be (O/b, I, *kernel, b), one rank more "
            f"than data {data}"
        )
    padded = weight.shape[0] * weight.shape[-1]
    channels = int(attrs["channels"]) or padded
    # the last block, or the one before it (a zero block more: ember.ops.nn_conv_flat)
    if not padded - 2 * weight.shape[-1] < channels <= padded:
        raise IRError(
            f"nn.conv_packed: channels={channels} must lie in the last two blocks of weight "
            f"{weight} ({padded - 2 * weight.shape[-1] + 1}..{padded})"
        )
    lane_groups = int(attrs["groups"]) > weight.shape[0]  # several groups a block
    if int(attrs["groups"]) > 1 and channels != padded and not lane_groups:
        raise IRError(
            f"nn.conv_packed: a grouped convolution cannot have padded channels "
            f"(channels={channels}, weight {weight})"
        )
    inner = weight.shape[1:-1]
    if _taps_first(attrs):  # (O/b, *k, I, b)
        inner = (inner[-1], *inner[:-1])
    plain = TensorType((channels, *inner), weight.dtype)
    conv_attrs = {k: v for k, v in attrs.items() if k not in ("channels", "taps_first")}
    return _conv_type([data, plain], Attrs(conv_attrs))


def _packed_conv_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, wp = xs
    nsp = x.ndim - 2
    w = unpack_conv_weight(wp, int(attrs["channels"]), _taps_first(attrs))
    return conv_reference(
        x,
        w,
        spatial(attrs, "strides", nsp, 1),
        padding(attrs, nsp),
        spatial(attrs, "dilation", nsp, 1),
        int(attrs["groups"]),
    )


register_op(
    OpDef(
        name="nn.conv_packed",
        num_inputs=2,
        infer_type=layout_rule(_packed_conv_type),
        reference=layout_reference(_packed_conv_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={
            **_CONV_ATTRS,
            **_LAYOUT,
            "channels": Attr("int", 0, "output channels (0: all of the weight's blocks)"),
            "taps_first": Attr("int", 0, "1: the weight is (O/b, *k, C/groups, b)"),
        },
        doc="N-d convolution of (N, C, *sp) data with an (O/b, C/groups, *k, b) weight "
        "(b output channels innermost, b dividing O/groups; taps_first: (O/b, *k, C/groups, "
        "b)); produced by the nn.conv legalizer.",
    )
)


def _depthwise_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    weight = tensor_arg(types, 1, "weight")
    if weight.ndim != data.ndim:
        raise IRError(
            f"nn.conv_depthwise_packed: weight {weight} must be (C/b, *kernel, b), the rank "
            f"of data {data}"
        )
    channels = weight.shape[0] * weight.shape[-1]
    plain = TensorType((channels, 1, *weight.shape[1:-1]), weight.dtype)
    attrs = Attrs({**dict(attrs), "groups": channels})
    return _conv_type([data, plain], attrs)


def _depthwise_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, wp = xs
    nsp = x.ndim - 2
    w = unpack_depthwise_weight(wp)
    strides = spatial(attrs, "strides", nsp, 1)
    dilation = spatial(attrs, "dilation", nsp, 1)
    return conv_reference(x, w, strides, padding(attrs, nsp), dilation, w.shape[0])


register_op(
    OpDef(
        name="nn.conv_depthwise_packed",
        num_inputs=2,
        infer_type=layout_rule(_depthwise_type),
        reference=layout_reference(_depthwise_ref),
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={**{k: a for k, a in _CONV_ATTRS.items() if k != "groups"}, **_LAYOUT},
        doc="Depthwise N-d convolution (one filter per channel) with a (C/b, *k, b) weight; "
        "produced by the nn.conv legalizer for narrow images.",
    )
)


def _winograd_type(types: Sequence[Type], attrs: Attrs) -> Type:
    data = tensor_arg(types, 0, "data")
    weight = tensor_arg(types, 1, "weight")
    m, stride = int(attrs["tile"]), int(attrs["strides"])
    r = STRIDE_TAPS.get(stride, 0)
    if (m, r) not in KINDS:
        raise IRError(
            f"nn.conv_winograd: tile {m} with strides {stride}: F({m},{r}) is none of {KINDS}"
        )
    if data.ndim != 4 or weight.ndim != 4 or weight.shape[0] != (m + r - 1) ** 2:
        raise IRError(
            f"nn.conv_winograd: NHWC data {data} and a ((m+r-1)^2, O/b, C, b) weight "
            f"{weight} (tile m={m}, r={r})"
        )
    n, h, w, c = data.shape
    if weight.shape[2] != c * stride * stride or (stride == 2 and (h % 2 or w % 2)):
        raise IRError(
            f"nn.conv_winograd: weight {weight} does not take {c} channels at strides {stride}"
            " (stride 2: 4 x the channels, of even height and width)"
        )
    top, left, bottom, right = (int(p) for p in attrs["padding"])
    out_hw = ((h + top + bottom - 3) // stride + 1, (w + left + right - 3) // stride + 1)
    padded = weight.shape[1] * weight.shape[3]
    channels = int(attrs.get("channels", 0)) or padded
    if not padded - 16 < channels <= padded:
        raise IRError(f"nn.conv_winograd: {channels} channels of a weight {weight} padded to 16")
    return TensorType((n, *out_hw, channels), data.dtype)


def _winograd_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, u = xs
    pads = tuple(int(p) for p in attrs["padding"])
    stride = int(attrs["strides"])
    out_hw = tuple((x.shape[1 + i] + pads[i] + pads[2 + i] - 3) // stride + 1 for i in (0, 1))
    if stride == 2:
        pads = phase_padding(pads, x.shape[1:3], out_hw)  # type: ignore[arg-type]
        x = space_to_depth(x)
    m, r = int(attrs["tile"]), STRIDE_TAPS[stride]
    y = winograd_reference(x, u, m, pads, out_hw, r)  # type: ignore[arg-type]
    channels = int(attrs.get("channels", 0)) or y.shape[-1]
    return np.ascontiguousarray(y[..., :channels])


register_op(
    OpDef(
        name="nn.conv_winograd",
        num_inputs=2,
        infer_type=_winograd_type,
        reference=_winograd_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={
            "padding": Attr("ints", (0, 0, 0, 0), "top, left, bottom, right"),
            "tile": Attr("int", 4, "output tile m of F(m x m, r x r): 2 or 4"),
            "strides": Attr(
                "int",
                1,
                "1, or 2: F(4 x 4, 2 x 2) over the four phases of the input (even "
                "sizes, channels a multiple of 16; ember.ir.ops.nn_conv_winograd_form."
                "stride2_weight)",
            ),
            "channels": Attr("int", 0, "output channels (0: the weight's, a multiple of 16)"),
            "epilogue": Attr(
                "int", 1, "1: the kernel applies the group's bias/residual/ReLU epilogue"
            ),
        },
        doc="3x3 convolution (stride 1, or 2 as a 2x2 one of the input's phases) of NHWC "
        "float32 data by Winograd F(m x m, r x r) with a weight transformed at build time "
        "((m+r-1)^2, O/b, C, b: ember.ir.ops."
        "nn_conv_winograd_form); produced by the nn.conv legalizer (TVM's "
        "conv2d_winograd_without_weight_transform).",
    )
)
