"""Classifiers built on grouped 3x3 convolutions (exported inference form, batch norms
folded), with seeded weights:

* :func:`resnext` - ResNeXt (Xie et al. 2017; torchvision's ``resnext50_32x4d`` by
  default): ResNet-50's bottlenecks whose 3x3 convolution has 32 groups of 4, 8, 16 and
  32 channels per stage, the stride on the 3x3.
* :func:`regnetx` - RegNetX (Radosavovic et al. 2020): a 3x3 stem, then stages of
  X blocks (1x1, grouped 3x3 of a fixed group width, 1x1, residual); the published
  RegNetX-200MF (groups of 8 channels, stage widths 24-368) and RegNetX-400MF (groups of
  16, widths 32-384) settings are :data:`REGNETX`.

Grouped convolutions whose groups are a few channels wide take other kernels than dense
ones; these are the families that deploy them.
"""

from __future__ import annotations

import numpy as np
import onnx

from ember.errors import EmberValueError
from ember.examples.blocks import conv, seeded_input
from ember.examples.builder import GraphBuilder

#: RegNetX settings by name: (stage depths, stage widths, group width).
REGNETX: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "200mf": ((1, 1, 4, 7), (24, 56, 152, 368), 8),
    "400mf": ((1, 2, 7, 12), (32, 64, 160, 384), 16),
}


def _classifier(g: GraphBuilder, x: str, channels: int, num_classes: int) -> str:
    """Global average pool, flatten, a ``Gemm`` to ``num_classes`` logits named ``logits``."""
    x = g.node("GlobalAveragePool", [x], "pool")
    x = g.node("Flatten", [x], "flatten", axis=1)
    return g.logits(x, "fc", channels, num_classes)


def _residual(g: GraphBuilder, y: str, shortcut: str, name: str) -> str:
    return g.node("Relu", [g.node("Add", [y, shortcut], f"{name}.add")], f"{name}.out")


def _check_size(name: str, image_size: int) -> None:
    if image_size < 32 or image_size % 32:
        raise EmberValueError(
            f"{name}: image_size must be a positive multiple of 32, got {image_size}"
        )


def resnext(
    image_size: int = 224,
    groups: int = 32,
    group_width: int = 4,
    depths: tuple[int, ...] = (3, 4, 6, 3),
    num_classes: int = 1000,
    seed: int = 0,
) -> onnx.ModelProto:
    """ResNeXt on a ``1x3ximage_sizeximage_size`` input ``image``; output ``logits``.
    Stage ``s`` has bottlenecks of ``groups * group_width * 2**s`` channels around the
    grouped 3x3 and ``256 * 2**s`` outputs."""
    _check_size("resnext", image_size)
    g = GraphBuilder(seed)
    x = conv(g, "image", "stem", 3, 64, 7, 2, act="relu")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for s, depth in enumerate(depths):
        width, cout = groups * group_width * 2**s, 256 * 2**s
        for i in range(depth):
            stride, name = (2 if i == 0 and s > 0 else 1), f"layer{s + 1}.{i}"
            y = conv(g, x, f"{name}.conv1", cin, width, 1, act="relu")
            y = conv(g, y, f"{name}.conv2", width, width, 3, stride, group=groups, act="relu")
            y = conv(g, y, f"{name}.conv3", width, cout, 1, gain=0.5)
            short = (
                conv(g, x, f"{name}.downsample", cin, cout, 1, stride, gain=0.5) if i == 0 else x
            )
            x, cin = _residual(g, y, short, name), cout
    _classifier(g, x, cin, num_classes)
    return g.classifier("resnext", image_size, num_classes)


def regnetx(
    setting: str = "400mf", image_size: int = 224, num_classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """RegNetX of a :data:`REGNETX` ``setting`` on a ``1x3ximage_sizeximage_size`` input
    ``image``; output ``logits``."""
    if setting not in REGNETX:
        raise EmberValueError(f"regnetx: unknown setting {setting!r}; known: {', '.join(REGNETX)}")
    _check_size("regnetx", image_size)
    depths, widths, group_width = REGNETX[setting]
    g = GraphBuilder(seed)
    x, cin = conv(g, "image", "stem", 3, 32, 3, 2, act="relu"), 32
    for s, (depth, width) in enumerate(zip(depths, widths, strict=True)):
        for i in range(depth):
            stride, name = (2 if i == 0 else 1), f"s{s + 1}.b{i + 1}"
            y = conv(g, x, f"{name}.a", cin, width, 1, act="relu")
            y = conv(g, y, f"{name}.b", width, width, 3, stride, width // group_width, "relu")
            y = conv(g, y, f"{name}.c", width, width, 1, gain=0.5)
            short = conv(g, x, f"{name}.proj", cin, width, 1, stride, gain=0.5) if i == 0 else x
            x, cin = _residual(g, y, short, name), width
    _classifier(g, x, cin, num_classes)
    return g.classifier(f"regnetx_{setting}", image_size, num_classes)


def resnext_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """ResNeXt-50 32x4d and a seeded 224x224 image."""
    return resnext(seed=seed), seeded_input((1, 3, 224, 224), "image", seed + 1)


def regnetx_case(setting: str, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """RegNetX of ``setting`` and a seeded 224x224 image."""
    return regnetx(setting, seed=seed), seeded_input((1, 3, 224, 224), "image", seed + 1)
