"""ConvNeXt-T (Liu et al. 2022) as torchvision exports it, with seeded weights.

:func:`convnext_tiny`: a 4x4 stride-4 stem of 96 channels and a channels-first LayerNorm;
four stages of 3, 3, 9 and 3 blocks of 96, 192, 384 and 768 channels, each stage after
the first entered through a channels-first LayerNorm and a 2x2 stride-2 convolution. A
block is a 7x7 depthwise convolution, a ``Transpose`` to NHWC, a LayerNormalization over
the channels, an MLP of 4x the channels (MatMul, Erf-based GELU, MatMul), a per-channel
layer scale, a ``Transpose`` back and the residual. A channels-first LayerNorm is exported
as ``Transpose``, LayerNormalization, ``Transpose``. Then global average pooling, a
LayerNormalization and a 1000-way classifier.
"""

from __future__ import annotations

import numpy as np
import onnx

from ember.errors import EmberValueError
from ember.examples.audio import gelu, layer_norm
from ember.examples.blocks import conv, linear, seeded_input
from ember.examples.builder import GraphBuilder

#: ConvNeXt-T's stages: (blocks, channels).
CONVNEXT_TINY_STAGES: tuple[tuple[int, int], ...] = ((3, 96), (3, 192), (9, 384), (3, 768))


def _norm_2d(g: GraphBuilder, x: str, name: str, channels: int) -> str:
    """torchvision's LayerNorm2d: the channels moved last, normalised, moved back."""
    y = g.node("Transpose", [x], f"{name}.to_last", perm=[0, 2, 3, 1])
    y = layer_norm(g, y, f"{name}.norm", channels)
    return g.node("Transpose", [y], f"{name}.to_first", perm=[0, 3, 1, 2])


def _block(g: GraphBuilder, x: str, name: str, dim: int) -> str:
    y = conv(g, x, f"{name}.dwconv", dim, dim, 7, group=dim)
    y = g.node("Transpose", [y], f"{name}.to_last", perm=[0, 2, 3, 1])
    y = layer_norm(g, y, f"{name}.norm", dim)
    y = gelu(g, linear(g, y, f"{name}.fc1", dim, 4 * dim), f"{name}.gelu")
    y = linear(g, y, f"{name}.fc2", 4 * dim, dim)
    scale = g.const(f"{name}.gamma", np.full(dim, 0.5, np.float32))
    y = g.node("Mul", [y, scale], f"{name}.layer_scale")
    y = g.node("Transpose", [y], f"{name}.to_first", perm=[0, 3, 1, 2])
    return g.node("Add", [x, y], f"{name}.add")


def convnext_tiny(image_size: int = 224, num_classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """ConvNeXt-T on a ``1x3ximage_sizeximage_size`` input ``image``; output ``logits``."""
    if image_size < 32 or image_size % 32:
        raise EmberValueError(
            f"convnext_tiny: image_size must be a positive multiple of 32, got {image_size}"
        )
    g = GraphBuilder(seed)
    x = conv(g, "image", "stem", 3, 96, 4, 4, pads=(0, 0, 0, 0))
    x, cin = _norm_2d(g, x, "stem.norm", 96), 96
    for stage, (blocks, dim) in enumerate(CONVNEXT_TINY_STAGES):
        if stage:
            x = _norm_2d(g, x, f"downsample.{stage}.norm", cin)
            x = conv(g, x, f"downsample.{stage}", cin, dim, 2, 2, pads=(0, 0, 0, 0))
        for i in range(blocks):
            x = _block(g, x, f"stages.{stage}.{i}", dim)
        cin = dim
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x], "pool")], "flatten", axis=1)
    x = layer_norm(g, x, "head.norm", cin)
    g.logits(x, "head", cin, num_classes)
    return g.classifier("convnext_tiny", image_size, num_classes)


def convnext_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """ConvNeXt-T and a seeded 224x224 image."""
    return convnext_tiny(seed=seed), seeded_input((1, 3, 224, 224), "image", seed + 1)
