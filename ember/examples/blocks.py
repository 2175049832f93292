"""Building blocks of the zoo models (exported inference form, batch norms folded).

Convolutions carry a bias (a folded batch norm) and one activation; weights are
He-normal for the activation's gain so that activations stay O(1) through depth:

* :func:`conv` - Conv (+ bias) + ``relu``, ``relu6``, ``hardswish``, ``silu`` (as
  ``Sigmoid`` then ``Mul``, what PyTorch exports at opset 17) or nothing;
* :func:`squeeze_excite` - GlobalAveragePool, 1x1 reduce + ReLU, 1x1 expand + HardSigmoid,
  Mul (MobileNetV3 / PP-LCNet);
* :func:`upsample` - ``Resize`` by an integer factor, nearest (YOLO) or bilinear (DBNet);
* :func:`linear` - ``MatMul`` + ``Add`` over the last axis.
"""

from __future__ import annotations

import math

import numpy as np

from ember.errors import EmberValueError
from ember.examples.builder import GraphBuilder

#: activation -> the He gain^2 of its weights' fan-in (2 for ReLU-like, 1 otherwise).
ACTIVATIONS: dict[str, float] = {
    "": 1.0,
    "relu": 2.0,
    "relu6": 2.0,
    "hardswish": 2.0,
    "silu": 2.0,
    "sigmoid": 1.0,
}


def activation(g: GraphBuilder, x: str, name: str, act: str) -> str:
    """``act`` applied to ``x`` (see :data:`ACTIVATIONS`); the empty name is the identity."""
    if act == "":
        return x
    if act == "relu":
        return g.node("Relu", [x], f"{name}.relu")
    if act == "relu6":
        lo = g.const(f"{name}.relu6.min", np.array(0.0, "float32"))
        hi = g.const(f"{name}.relu6.max", np.array(6.0, "float32"))
        return g.node("Clip", [x, lo, hi], f"{name}.relu6")
    if act == "hardswish":
        return g.node("HardSwish", [x], f"{name}.hardswish")
    if act == "silu":
        gate = g.node("Sigmoid", [x], f"{name}.sigmoid")
        return g.node("Mul", [x, gate], f"{name}.silu")
    if act == "sigmoid":
        return g.node("Sigmoid", [x], f"{name}.sigmoid")
    raise EmberValueError(f"unknown activation {act!r}; known: {', '.join(ACTIVATIONS)}")


def conv(
    g: GraphBuilder,
    x: str,
    name: str,
    cin: int,
    cout: int,
    k: int | tuple[int, int] = 1,
    stride: int | tuple[int, int] = 1,
    group: int = 1,
    act: str = "",
    pads: tuple[int, int, int, int] | None = None,
    gain: float | None = None,
) -> str:
    """A Conv with a folded-batch-norm bias, then ``act``; ``same`` padding by default."""
    kh, kw = (k, k) if isinstance(k, int) else k
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    fan_in = cin // group * kh * kw
    scale = ACTIVATIONS[act] if gain is None else gain
    w = g.weight(f"{name}.weight", (cout, cin // group, kh, kw), math.sqrt(scale / fan_in))
    b = g.weight(f"{name}.bias", (cout,), 0.05)
    if pads is None:
        pads = ((kh - 1) // 2, (kw - 1) // 2, kh // 2, kw // 2)
    y = g.node(
        "Conv",
        [x, w, b],
        name,
        kernel_shape=[kh, kw],
        strides=[sh, sw],
        pads=list(pads),
        group=group,
    )
    return activation(g, y, name, act)


def squeeze_excite(g: GraphBuilder, x: str, name: str, channels: int, reduction: int = 4) -> str:
    """Squeeze-excitation: ``x * hardsigmoid(W2 relu(W1 mean(x)))`` per channel."""
    pooled = g.node("GlobalAveragePool", [x], f"{name}.pool")
    mid = max(8, channels // reduction)
    y = conv(g, pooled, f"{name}.reduce", channels, mid, act="relu")
    y = conv(g, y, f"{name}.expand", mid, channels, gain=4.0)
    gate = g.node("HardSigmoid", [y], f"{name}.gate", alpha=1.0 / 6.0, beta=0.5)
    return g.node("Mul", [x, gate], f"{name}.scale")


def upsample(g: GraphBuilder, x: str, name: str, factor: int, mode: str = "nearest") -> str:
    """``Resize`` by ``factor`` in both spatial axes (scales input, no sizes)."""
    scales = g.const(f"{name}.scales", np.array([1, 1, factor, factor], "float32"))
    if mode == "nearest":
        return g.node(
            "Resize",
            [x, "", scales],
            name,
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )
    return g.node(
        "Resize", [x, "", scales], name, mode="linear", coordinate_transformation_mode="half_pixel"
    )


def linear(g: GraphBuilder, x: str, name: str, cin: int, cout: int, gain: float = 1.0) -> str:
    """``x @ W + b`` over the last axis (what PyTorch exports for ``nn.Linear`` on 3-D)."""
    w = g.weight(f"{name}.weight", (cin, cout), math.sqrt(gain / cin))
    b = g.weight(f"{name}.bias", (cout,), 0.02)
    return g.node("Add", [g.node("MatMul", [x, w], f"{name}.matmul"), b], name)


def seeded_input(shape: tuple[int, ...], name: str, seed: int) -> dict[str, np.ndarray]:
    """A seeded normalized image (or feature map) for ``name``."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(np.float32)}
