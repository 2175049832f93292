"""EfficientNet-B0 (Tan and Le 2019) as exported for inference, with seeded weights.

:func:`efficientnet_b0`: a 3x3 stride-2 stem of 32 channels, sixteen MBConv blocks
(a 1x1 expansion by 6 except in the first, a 3x3 or 5x5 depthwise convolution, a
squeeze-excitation whose reduction is a quarter of the block's input channels with SiLU
and whose gate is a Sigmoid, a 1x1 projection, a residual where the shape allows), a 1x1
head to 1280 channels, global average pooling and a 1000-way classifier. SiLU is
``x * Sigmoid(x)``, as PyTorch exports it at opset 17; batch norms are folded.
"""

from __future__ import annotations

import numpy as np
import onnx

from ember.errors import EmberValueError
from ember.examples.blocks import conv, seeded_input
from ember.examples.builder import GraphBuilder

#: EfficientNet-B0's stages: (expansion, output channels, blocks, first stride, kernel).
EFFICIENTNET_B0_STAGES: tuple[tuple[int, int, int, int, int], ...] = (
    (1, 16, 1, 1, 3),
    (6, 24, 2, 2, 3),
    (6, 40, 2, 2, 5),
    (6, 80, 3, 2, 3),
    (6, 112, 3, 1, 5),
    (6, 192, 4, 2, 5),
    (6, 320, 1, 1, 3),
)


def _squeeze_excite(g: GraphBuilder, x: str, name: str, channels: int, reduced: int) -> str:
    """EfficientNet's squeeze-excitation: ``x * sigmoid(W2 silu(W1 mean(x)))``."""
    pooled = g.node("GlobalAveragePool", [x], f"{name}.pool")
    y = conv(g, pooled, f"{name}.reduce", channels, reduced, act="silu")
    gate = conv(g, y, f"{name}.expand", reduced, channels, act="sigmoid")
    return g.node("Mul", [x, gate], f"{name}.scale")


def efficientnet_b0(
    image_size: int = 224, num_classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """EfficientNet-B0 on a ``1x3ximage_sizeximage_size`` input ``image``; output ``logits``."""
    if image_size < 32 or image_size % 32:
        raise EmberValueError(
            f"efficientnet_b0: image_size must be a positive multiple of 32, got {image_size}"
        )
    g = GraphBuilder(seed)
    x, cin, index = conv(g, "image", "stem", 3, 32, 3, 2, act="silu"), 32, 0
    for expand, cout, blocks, stride, kernel in EFFICIENTNET_B0_STAGES:
        for i in range(blocks):
            name, step = f"blocks.{index}", stride if i == 0 else 1
            mid = cin * expand
            y = conv(g, x, f"{name}.expand", cin, mid, act="silu") if expand != 1 else x
            y = conv(g, y, f"{name}.dw", mid, mid, kernel, step, group=mid, act="silu")
            y = _squeeze_excite(g, y, f"{name}.se", mid, max(1, cin // 4))
            y = conv(g, y, f"{name}.project", mid, cout, gain=0.5)
            if step == 1 and cin == cout:
                y = g.node("Add", [y, x], f"{name}.add")
            x, cin, index = y, cout, index + 1
    x = conv(g, x, "head", cin, 1280, act="silu")
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    g.logits(x, "classifier", 1280, num_classes)
    return g.classifier("efficientnet_b0", image_size, num_classes)


def efficientnet_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """EfficientNet-B0 and a seeded 224x224 image."""
    return efficientnet_b0(seed=seed), seeded_input((1, 3, 224, 224), "image", seed + 1)
