"""convert_layout: IRModule -> IRModule, activations kept channels last (NHWC) across chains
of convolutions (TVM's ConvertLayout).

Every 2-D float32 ``nn.conv`` with a constant weight gets ``data_layout="NHWC"``:
its data and result are channels last (the packed kernels then need no channels-last copy
of their input nor a transposed store, ember.ops.nn_conv_nhwc). The layout then flows
forward through the ops that have a channels-last form:

* elementwise ops, and broadcasting ones whose other operands are channels last too,
  scalars, constants (permuted at build time: a (C, 1, 1) bias becomes (1, 1, 1, C)) or
  small rank-4 tensors (transposed: an SE block's (N, C, 1, 1) scale);
* the pools (max, average, global; their data_layout attribute) and ``image.resize``
  (per-axis sizes, scales and region of interest permuted);
* ``concatenate``, ``split`` and ``strided_slice`` (the axis attributes permuted);
* ``nn.conv_transpose`` whose kernel equals its stride (DBNet's upsampling head): a
  channels-last 1x1 conv and a channels-last ``nn.depth_to_space``
  (ember.ir.ops.nn_conv_transpose_form), and ``nn.depth_to_space`` itself;
* ``nn.group_norm`` (its per-channel scale and shift are vectors either way), and
  ``nn.instance_norm`` as a group norm of one channel a group.

Rank-3 (NCW) convolutions and the chains between them take the same path: their values
are channels-last rank-4 tensors with a unit H, (N, 1, W, C), the convolutions 2-D ones of
kernel (1, k). ``transpose(x, (0, 2, 1))`` of such a value (audio models' features into
their transformer, NCW -> NWC) is a reshape of it. Likewise a model's own NCHW -> NHWC
transpose of a channels-last value is that value, and a convolution reading an NHWC tensor
through the model's own NHWC -> NCHW transpose reads the NHWC tensor (ConvNeXt's blocks
move their channels last for a LayerNorm and an MLP, and back): no transpose is left.

Every other use of a channels-last value reads it through one ``transpose`` back to NCHW
(made once per value), as do the function's results: the layout changes only at the borders
of the chains. A channels-last conv whose input is NCHW reads it through one transpose to
NHWC. The result equals the unconverted graph's; the same micro-kernels compute it.

Selected by the PassContext config key ``convert_layout`` ("NHWC"; "NCHW" or "" leave the
graph unchanged) or by naming the pass in ``required`` (NHWC). Example::

    ctx = PassContext(opt_level=3, config={"convert_layout": "NHWC"})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.expr import (
    Call,
    Constant,
    Expr,
    TupleGetItem,
    call,
    children,
    const,
    post_order,
    with_children,
)
from ember.ir.module import IRModule
from ember.ir.op import OpDef, OpPattern
from ember.ir.ops.common import channels_first_axes, channels_last_axes, padding, spatial
from ember.ir.ops.nn_conv_transpose_form import phase_taps, pointwise_form
from ember.ir.ops.nn_conv_weights import lane_group_block, packed_block, split_block
from ember.ir.types import TensorType
from ember.transform._util import map_bodies

#: the PassContext config key naming the layout ("NHWC"; "NCHW" or unset: no change).
CONFIG_KEY = "convert_layout"

#: ops with a ``data_layout`` attribute whose other operands do not depend on it.
LAYOUT_OPS = ("nn.depth_to_space", "nn.group_norm")

#: the layouts convert_layout plans ("NCHW": the frontend's, nothing to do).
LAYOUTS: tuple[str, ...] = ("NCHW", "NHWC")

#: the pools with a channels-last form (attribute data_layout, ember.ops.nn_pool).
POOLS = frozenset({"nn.max_pool", "nn.avg_pool", "nn.global_avg_pool", "nn.global_max_pool"})

#: a broadcast operand that is neither channels last nor constant is transposed to join a
#: channels-last op when it has at most 1/SMALL_OPERAND of the result's elements (an SE
#: block's per-channel scale); larger ones leave the op channels first.
SMALL_OPERAND = 8

_TO_LAST = channels_last_axes(4)
_TO_FIRST = channels_first_axes(4)


#: the lowest opt level at which convert_layout runs (NHWC) without being asked; None: only
#: when asked. One thread, CPU time, pass on / off (layout's A/B): mobilenet_v2 0.87x,
#: dbnet 0.87x, pp_lcnet 0.77x, resnet50 0.90x, yolo 0.93x, crnn 1.00x. The build driver
#: keeps NCHW (config NCHW) for targets with hooks or external kinds, which see the
#: convolutions as imported, and for CPUs other than x86 with AVX2 or wider (unmeasured).
DEFAULT_LEVEL: int | None = 2


def chosen_layout(config: Mapping[str, Any], required: bool, opt_level: int) -> str:
    """The layout a PassContext asks for: its config key ``convert_layout`` when set, else
    NHWC when the pass is required or ``opt_level`` >= DEFAULT_LEVEL, else NCHW."""
    value = config.get(CONFIG_KEY)
    if value:
        return check_layout(str(value))
    default = DEFAULT_LEVEL is not None and opt_level >= DEFAULT_LEVEL
    return "NHWC" if required or default else "NCHW"


def check_layout(layout: str) -> str:
    """``layout`` if convert_layout knows it (IRError naming the known ones otherwise)."""
    if layout not in LAYOUTS:
        raise IRError(
            f"convert_layout: unknown layout {layout!r}; known: {', '.join(LAYOUTS)} "
            "(set PassContext config {'convert_layout': 'NHWC'})"
        )
    return layout


def convert_layout(mod: IRModule, layout: str = "NHWC") -> IRModule:
    """``mod`` with its 2-D convolutions and the chains between them in ``layout``."""
    if check_layout(layout) == "NCHW":
        return mod
    return map_bodies(mod, lambda body: _Planner().run(body))


def _op(node: Expr) -> OpDef | None:
    return node.op if isinstance(node, Call) and isinstance(node.op, OpDef) else None


def _rank4(node: Expr) -> bool:
    return isinstance(node.type, TensorType) and node.type.ndim == 4


def _planned(node: Expr) -> bool:
    """Whether ``node`` has a rank convert_layout plans: 4 (NCHW), or 3 (NCW, whose
    channels-last form is the rank-4 (N, 1, W, C))."""
    return isinstance(node.type, TensorType) and node.type.ndim in (3, 4)


def _float32_rank4(node: Expr) -> bool:
    ty = node.type
    return isinstance(ty, TensorType) and ty.ndim == 4 and ty.dtype == "float32"


def _converts(node: Call) -> bool:
    """Whether ``node`` is a convolution convert_layout lays out channels last."""
    op = _op(node)
    if op is None or op.name != "nn.conv" or node.attrs["data_layout"] != "NCHW":
        return False
    x, w = node.args
    ty = x.type
    planned = isinstance(ty, TensorType) and ty.ndim in (3, 4) and ty.dtype == "float32"
    if not planned or not isinstance(w, Constant):
        return False
    # a conv the legalizer cannot pack stays NCHW between two transposes (nn_conv_nhwc);
    # one whose groups do not pack is split into convs that do (ember.ops.nn_conv_groups),
    # or packs with several groups a block (ember.ops.nn_conv_lane_groups)
    shape, groups = _weight_2d(np.shape(w.data)), int(node.attrs["groups"])
    if packed_block(shape, groups) > 0 or split_block(shape, groups) > 0:
        return True
    return lane_group_block(shape, groups) > 0


def _weight_2d(shape: tuple[int, ...]) -> tuple[int, ...]:
    """A conv weight's shape as a 2-D conv's: a 1-D (O, I, k) is (O, I, 1, k)."""
    return (*shape[:2], 1, shape[2]) if len(shape) == 3 else shape


def _conv_2d(node: Call, x: Expr) -> Call:
    """The channels-last 2-D form of conv ``node`` on NHWC ``x``; a 1-D conv's spatial axis
    becomes W under a unit H (its weight, strides, dilation and padding extended)."""
    w = node.args[1]
    assert isinstance(w, Constant)
    attrs = {**dict(node.attrs), "data_layout": "NHWC"}
    if w.type.ndim == 3:
        w = const(np.reshape(np.asarray(w.data), _weight_2d(np.shape(w.data))))
        for name in ("strides", "dilation"):
            attrs[name] = (1, *spatial(node.attrs, name, 1, 1))
        ((begin, end),) = padding(node.attrs, 1)
        attrs["padding"] = (0, begin, 0, end)
    return call("nn.conv", x, w, name=node.name, **attrs)


def permute_constant(data: np.ndarray, ndim: int = 4) -> np.ndarray:
    """A constant that broadcasts against an NCHW tensor (NCW when ``ndim`` is 3), as one
    that broadcasts the same way against its NHWC form (rank 4 after prepending unit axes;
    an NCW one gains a unit H)."""
    full = np.reshape(data, (1,) * (ndim - data.ndim) + data.shape)
    if ndim == 3:
        full = full[:, :, None, :]
    return np.ascontiguousarray(np.transpose(full, _TO_LAST))


def _last_axis(axis: int, ndim: int = 4) -> int:
    """The NHWC axis of NCHW axis ``axis`` (of NCW when ``ndim`` is 3: W is NHWC's W)."""
    axis %= ndim
    if ndim == 3 and axis == 2:
        return 2
    return _TO_LAST.index(axis)


def _ndim(node: Expr) -> int:
    ty = node.type
    assert isinstance(ty, TensorType)
    return ty.ndim


def _last_form(ty: TensorType) -> tuple[int, ...]:
    """An NCW shape's channels-last form (N, 1, W, C)."""
    n, c, w = ty.shape
    return (n, 1, w, c)


def _transpose_of(node: Expr, axes: tuple[int, ...]) -> bool:
    """Whether ``node`` is ``transpose(x, axes)`` (NCHW of an NHWC x for (0, 3, 1, 2),
    NCW of an NWC x for (0, 2, 1))."""
    if not isinstance(node, Call) or _op(node) is None or node.op_name != "transpose":
        return False
    return tuple(node.attrs["axes"]) == axes


def _rank4_form(ty: TensorType) -> tuple[int, ...]:
    """An NCW shape as NCHW with a unit H (a rank-4 shape unchanged)."""
    return (*ty.shape[:2], 1, ty.shape[2]) if ty.ndim == 3 else ty.shape


class _Planner:
    """One pass over a function body: each node's replacement and whether it is NHWC."""

    def __init__(self) -> None:
        self.new: dict[int, Expr] = {}
        self.last: set[int] = set()
        self.firsts: dict[int, Expr] = {}
        self.lasts: dict[int, Expr] = {}

    def run(self, root: Expr) -> Expr:
        """The converted body; unchanged (the same object) when nothing converts."""
        for node in post_order(root):
            self.new[id(node)] = self.visit(node)
        if not self.last:
            return root
        return self.first(root)

    def first(self, node: Expr) -> Expr:
        """``node``'s replacement in NCHW (a transpose back, made once, if it is NHWC; an
        NCW value's then drops its unit H)."""
        key = id(node)
        if key not in self.last:
            return self.new[key]
        if key not in self.firsts:
            ty = node.type
            if isinstance(ty, TensorType) and ty.ndim == 3:  # (N, 1, W, C) -> (N, W, C) first,
                # so that the transpose reads its input's innermost axis plainly (in tiles)
                n, c, w = ty.shape
                flat = call("reshape", self.new[key], newshape=(n, w, c))
                self.firsts[key] = call("transpose", flat, axes=(0, 2, 1))
            else:
                self.firsts[key] = call("transpose", self.new[key], axes=_TO_FIRST)
        return self.firsts[key]

    def to_last(self, node: Expr) -> Expr:
        """``node``'s replacement in NHWC (a transpose, made once, if it is NCHW; an NCW
        value gains a unit H first)."""
        key = id(node)
        if key in self.last:
            return self.new[key]
        if key not in self.lasts:
            value = self.new[key]
            ty = node.type
            if (
                isinstance(ty, TensorType)
                and ty.ndim == 3
                and isinstance(value, Call)
                and _transpose_of(value, (0, 2, 1))
            ):
                # NWC -> NCW -> NHWC (wav2vec2's position convolution): the two transposes
                # cancel; the NWC tensor gains a unit H
                self.lasts[key] = call("reshape", value.args[0], newshape=_last_form(ty))
            elif _transpose_of(value, _TO_FIRST):  # NHWC -> NCHW -> NHWC (ConvNeXt): they cancel
                assert isinstance(value, Call)
                self.lasts[key] = value.args[0]
            elif isinstance(ty, TensorType) and ty.ndim == 3:
                value = call("reshape", value, newshape=_rank4_form(ty))
                self.lasts[key] = call("transpose", value, axes=_TO_LAST)
            else:
                self.lasts[key] = call("transpose", value, axes=_TO_LAST)
        return self.lasts[key]

    def keep(self, node: Expr) -> Expr:
        """``node`` with its children's NCHW replacements (the border)."""
        kids = tuple(self.first(c) for c in children(node))
        if all(k is c for k, c in zip(kids, children(node), strict=True)):
            return node
        return with_children(node, kids)

    def channels_last(self, node: Expr, value: Expr) -> Expr:
        """``value``, recorded as ``node``'s channels-last replacement."""
        self.last.add(id(node))
        return value

    def visit(self, node: Expr) -> Expr:
        """``node``'s replacement, recording whether it is channels last."""
        value: Expr
        if isinstance(node, TupleGetItem) and id(node.tuple_value) in self.last:
            value = TupleGetItem(self.new[id(node.tuple_value)], node.index)
            return self.channels_last(node, value)
        op = _op(node)
        if op is None or not isinstance(node, Call):
            return self.keep(node)
        if _converts(node):
            return self.channels_last(node, _conv_2d(node, self.to_last(node.args[0])))
        if op.name == "nn.conv_transpose" and _float32_rank4(node.args[0]) and phase_taps(node):
            # like a conv, a transposed one starts a chain (U-Net's up-convolutions)
            pointwise = pointwise_form(node, self.to_last(node.args[0]), "NHWC")
            if pointwise is not None:
                return self.channels_last(node, pointwise)
        if not any(id(a) in self.last for a in node.args):
            return self.keep(node)
        if op.pattern in (OpPattern.ELEMWISE, OpPattern.BROADCAST) and "axis" not in op.attrs:
            return self.broadcast(node)
        if op.name in POOLS and _rank4(node.args[0]):
            attrs = {**dict(node.attrs), "data_layout": "NHWC"}
            value = call(op.name, self.to_last(node.args[0]), name=node.name, **attrs)
            return self.channels_last(node, value)
        if op.name == "image.resize" and _rank4(node.args[0]):
            value = call(op.name, self.to_last(node.args[0]), name=node.name, **_resized(node))
            return self.channels_last(node, value)
        if op.name == "transpose" and tuple(node.attrs["axes"]) == channels_last_axes(_ndim(node)):
            # the model's own move of the channels last (ConvNeXt's LayerNorm and MLP over
            # NHWC; wav2vec2's and Whisper's NCW features into their transformer): the
            # channels-last value itself (an NCW one without its unit H)
            value = self.new[id(node.args[0])]
            if _ndim(node) == 3:
                return call("reshape", value, newshape=node.tensor_type.shape)
            return value
        if op.name == "nn.instance_norm" and _planned(node):  # a group norm of 1 channel a group
            x, scale, bias = node.args
            attrs = {"epsilon": node.attrs["epsilon"], "data_layout": "NHWC"}
            groups = node.tensor_type.shape[1]
            value = call(
                "nn.group_norm",
                self.to_last(x),
                scale,
                bias,
                num_groups=groups,
                name=node.name,
                **attrs,
            )
            return self.channels_last(node, value)
        if op.name in LAYOUT_OPS and node.attrs["data_layout"] == "NCHW" and _planned(node):
            attrs = {**dict(node.attrs), "data_layout": "NHWC"}
            moved = [self.to_last(node.args[0]), *node.args[1:]]
            value = call(op.name, *moved, name=node.name, **attrs)
            return self.channels_last(node, value)
        if op.name == "concatenate" and _planned(node):
            args = [self.to_last(a) for a in node.args]
            axis = _last_axis(int(node.attrs["axis"]), _ndim(node))
            value = call("concatenate", *args, name=node.name, axis=axis)
            return self.channels_last(node, value)
        if op.name == "split" and _planned(node.args[0]):
            axis = _last_axis(int(node.attrs["axis"]), _ndim(node.args[0]))
            attrs = {"sizes": node.attrs["sizes"], "axis": axis}
            value = call("split", self.to_last(node.args[0]), name=node.name, **attrs)
            return self.channels_last(node, value)
        if op.name == "strided_slice" and _planned(node.args[0]):
            ndim = _ndim(node.args[0])
            units = {"begin": 0, "end": 1, "strides": 1}  # H of an NCW value: all of it
            attrs = {k: _permuted(node.attrs[k], ndim, u) for k, u in units.items()}
            value = call("strided_slice", self.to_last(node.args[0]), name=node.name, **attrs)
            return self.channels_last(node, value)
        return self.keep(node)

    def broadcast(self, node: Call) -> Expr:
        """An elementwise or broadcasting op channels last, when its operands allow."""
        out = node.type
        if not isinstance(out, TensorType) or out.ndim not in (3, 4):
            return self.keep(node)
        args: list[Expr] = []
        for a in node.args:
            ty = a.type
            if id(a) in self.last:  # the result's rank (a split's tuple item may not be)
                if not isinstance(ty, TensorType) or ty.ndim != out.ndim:
                    return self.keep(node)
                args.append(self.new[id(a)])
            elif isinstance(a, Constant) and np.ndim(a.data) <= out.ndim:
                args.append(const(permute_constant(np.asarray(a.data), out.ndim)))
            elif isinstance(ty, TensorType) and ty.ndim == 0:
                args.append(self.new[id(a)])
            elif _small(ty, out) or (out.ndim == 4 and _transpose_of(self.new[id(a)], _TO_FIRST)):
                args.append(self.to_last(a))  # a transpose, or the NHWC tensor it reads
            else:
                return self.keep(node)
        value = with_children(node, tuple(args))
        return self.channels_last(node, value)


def _small(ty: object, out: TensorType) -> bool:
    """Whether ``ty`` is a tensor of the result's rank small enough to transpose
    (SMALL_OPERAND)."""
    if not isinstance(ty, TensorType) or ty.ndim != out.ndim:
        return False
    return ty.size * SMALL_OPERAND <= out.size


def _permuted(values: Sequence[Any], ndim: int = 4, unit: Any = 0) -> tuple[Any, ...]:
    """Per-axis NCHW attribute values in NHWC order (NCW ones with ``unit`` for H)."""
    if ndim == 3:
        values = (*values[:2], unit, values[2])
    return tuple(values[a] for a in _TO_LAST)


def _resized(node: Call) -> dict[str, Any]:
    """image.resize's attributes for NHWC data: its per-axis sizes, scales and region of
    interest (starts then ends) permuted (the op is N-d, axis by axis)."""
    attrs = dict(node.attrs)
    attrs["sizes"] = _permuted(attrs["sizes"])
    if attrs["scales"]:
        attrs["scales"] = _permuted(attrs["scales"])
    roi = tuple(attrs["roi"])
    if roi:
        attrs["roi"] = (*_permuted(roi[:4]), *_permuted(roi[4:]))
    return attrs
