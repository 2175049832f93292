"""One fused ``relu(nn.conv_packed(x, wp) + b)`` group lowered for a target: what the packed
float32 convolution tests inspect (the loop IR text, the PrimFunc) and run."""

from __future__ import annotations

from typing import Any

import numpy as np

from ember import tir
from ember.ir import Attrs, Function, IRModule, TensorType, Var, call, const
from ember.lowering.lower_group import lower_group


def v(name: str, shape: tuple[int, ...]) -> Var:
    """A float32 variable of ``shape``."""
    return Var(name, TensorType(shape, "float32"))


def lower_conv_bias_relu(
    xshape: tuple[int, ...],
    wshape: tuple[int, ...],
    target: str,
    pass_channels: bool = False,
    **attrs: Any,
) -> tuple[str, tir.PrimFunc, list[Var], Function]:
    """The group lowered as ``kernel``: (IR text, PrimFunc, params, the Relay function).
    ``channels`` (default: the packed weight's, padding included) sizes the bias, and is
    passed to the convolution too with ``pass_channels``."""
    x, wp = v("x", xshape), v("wp", wshape)
    channels = attrs.pop("channels", wshape[0] * wshape[-1])
    b = v("b", (channels, 1, 1))
    conv_attrs = {**attrs, "channels": channels} if pass_channels else attrs
    body = call("relu", call("add", call("nn.conv_packed", x, wp, **conv_attrs), b))
    func = Function((x, wp, b), body, Attrs({"Primitive": 1}))
    prim = lower_group(func, "kernel", target)
    return str(prim), prim, [x, wp, b], func


def nhwc_conv_module(xshape: tuple[int, ...], w: np.ndarray, **attrs: Any) -> IRModule:
    """``relu(nn.conv(x, w, data_layout="NHWC", **attrs) + bias)`` with constant ``w`` and a
    seeded bias (nhwc_bias) as a module of one input ``x``."""
    x = Var("x", TensorType(xshape, "float32"))
    y = call("nn.conv", x, const(w), data_layout="NHWC", **attrs)
    bias = const(nhwc_bias(w.shape[0]))
    return IRModule({"main": Function((x,), call("relu", call("add", y, bias)))})


def nhwc_bias(channels: int) -> np.ndarray:
    """The seeded bias of nhwc_conv_module."""
    return np.random.default_rng(9).standard_normal(channels).astype(np.float32)
