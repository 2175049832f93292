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
  (ember.ir.ops.nn_conv_transpose_form), and ``nn.depth_to_space`` itself.

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
from ember.ir.ops.common import channels_first_axes, channels_last_axes
from ember.ir.ops.nn_conv_transpose_form import pointwise_form
from ember.ir.ops.nn_conv_weights import lane_group_block, packed_block, split_block
from ember.ir.types import TensorType
from ember.transform._util import map_bodies

#: the PassContext config key naming the layout ("NHWC"; "NCHW" or unset: no change).
CONFIG_KEY = "convert_layout"

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


def _float32_rank4(node: Expr) -> bool:
    ty = node.type
    return isinstance(ty, TensorType) and ty.ndim == 4 and ty.dtype == "float32"


def _converts(node: Call) -> bool:
    """Whether ``node`` is a convolution convert_layout lays out channels last."""
    op = _op(node)
    if op is None or op.name != "nn.conv" or node.attrs["data_layout"] != "NCHW":
        return False
    x, w = node.args
    if not _float32_rank4(x) or not isinstance(w, Constant):
        return False
    # a conv the legalizer cannot pack stays NCHW between two transposes (nn_conv_nhwc);
    # one whose groups do not pack is split into convs that do (ember.ops.nn_conv_groups),
    # or packs with several groups a block (ember.ops.nn_conv_lane_groups)
    shape, groups = np.shape(w.data), int(node.attrs["groups"])
    if packed_block(shape, groups) > 0 or split_block(shape, groups) > 0:
        return True
    return lane_group_block(shape, groups) > 0


def permute_constant(data: np.ndarray) -> np.ndarray:
    """A constant that broadcasts against an NCHW tensor, as one that broadcasts the same
    way against its NHWC transpose (rank 4 after prepending unit axes)."""
    full = np.reshape(data, (1,) * (4 - data.ndim) + data.shape)
    return np.ascontiguousarray(np.transpose(full, _TO_LAST))


def _last_axis(axis: int) -> int:
    """The NHWC axis of NCHW axis ``axis``."""
    return _TO_LAST.index(axis)


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
        """``node``'s replacement in NCHW (a transpose back, made once, if it is NHWC)."""
        key = id(node)
        if key not in self.last:
            return self.new[key]
        if key not in self.firsts:
            self.firsts[key] = call("transpose", self.new[key], axes=_TO_FIRST)
        return self.firsts[key]

    def to_last(self, node: Expr) -> Expr:
        """``node``'s replacement in NHWC (a transpose, made once, if it is NCHW)."""
        key = id(node)
        if key in self.last:
            return self.new[key]
        if key not in self.lasts:
            self.lasts[key] = call("transpose", self.new[key], axes=_TO_LAST)
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
            x, w = node.args
            attrs = {**dict(node.attrs), "data_layout": "NHWC"}
            conv = call("nn.conv", self.to_last(x), w, name=node.name, **attrs)
            return self.channels_last(node, conv)
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
        if op.name == "nn.conv_transpose" and _float32_rank4(node.args[0]):
            pointwise = pointwise_form(node, self.to_last(node.args[0]), "NHWC")
            if pointwise is not None:
                return self.channels_last(node, pointwise)
        if op.name == "nn.depth_to_space" and node.attrs["data_layout"] == "NCHW":
            attrs = {**dict(node.attrs), "data_layout": "NHWC"}
            value = call(op.name, self.to_last(node.args[0]), name=node.name, **attrs)
            return self.channels_last(node, value)
        if op.name == "concatenate" and all(_rank4(a) for a in node.args):
            args = [self.to_last(a) for a in node.args]
            axis = _last_axis(int(node.attrs["axis"]))
            value = call("concatenate", *args, name=node.name, axis=axis)
            return self.channels_last(node, value)
        if op.name == "split" and _rank4(node.args[0]):
            attrs = {"sizes": node.attrs["sizes"], "axis": _last_axis(int(node.attrs["axis"]))}
            value = call("split", self.to_last(node.args[0]), name=node.name, **attrs)
            return self.channels_last(node, value)
        if op.name == "strided_slice" and _rank4(node.args[0]):
            attrs = {k: _permuted(node.attrs[k]) for k in ("begin", "end", "strides")}
            value = call("strided_slice", self.to_last(node.args[0]), name=node.name, **attrs)
            return self.channels_last(node, value)
        return self.keep(node)

    def broadcast(self, node: Call) -> Expr:
        """An elementwise or broadcasting op channels last, when its operands allow."""
        out = node.type
        if not isinstance(out, TensorType) or out.ndim != 4:
            return self.keep(node)
        args: list[Expr] = []
        for a in node.args:
            ty = a.type
            if id(a) in self.last:  # rank 4 (a tuple item of a split may not be)
                if not isinstance(ty, TensorType) or ty.ndim != 4:
                    return self.keep(node)
                args.append(self.new[id(a)])
            elif isinstance(a, Constant) and np.ndim(a.data) <= 4:
                args.append(const(permute_constant(np.asarray(a.data))))
            elif isinstance(ty, TensorType) and ty.ndim == 0:
                args.append(self.new[id(a)])
            elif _small(ty, out):
                args.append(self.to_last(a))
            else:
                return self.keep(node)
        value = with_children(node, tuple(args))
        return self.channels_last(node, value)


def _small(ty: object, out: TensorType) -> bool:
    """Whether ``ty`` is a rank-4 tensor small enough to transpose (SMALL_OPERAND)."""
    if not isinstance(ty, TensorType) or ty.ndim != 4:
        return False
    return ty.size * SMALL_OPERAND <= out.size


def _permuted(values: Sequence[Any]) -> tuple[Any, ...]:
    """Per-axis NCHW attribute values in NHWC order."""
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
