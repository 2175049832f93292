"""A PP-LCNet-style classifier, built in memory with seeded weights (inference form).

:func:`pp_lcnet` follows PaddleClas' PP-LCNet x1.0 (2021): a 3x3 stride-2 stem of 16
channels with HardSwish, thirteen depthwise-separable blocks (depthwise kxk + HardSwish,
in the last two a squeeze-excitation with HardSigmoid, then a pointwise 1x1 + HardSwish)
growing 16 -> 512 channels at strides 2 to 32, global average pooling, a 1x1 "last conv"
to 1280 channels with HardSwish, and a 1000-way classifier. Batch norms are folded into
the convolutions' biases, as in the exported inference model; a final Softmax makes the
output a distribution (calibrated, see ``models.calibrate_softmax``).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ember.errors import EmberValueError
from ember.examples.blocks import conv, seeded_input, squeeze_excite
from ember.examples.builder import GraphBuilder

#: PP-LCNet's blocks: (kernel, in channels, out channels, stride, squeeze-excitation).
PP_LCNET_BLOCKS: tuple[tuple[int, int, int, int, bool], ...] = (
    (3, 16, 32, 1, False),
    (3, 32, 64, 2, False),
    (3, 64, 64, 1, False),
    (3, 64, 128, 2, False),
    (3, 128, 128, 1, False),
    (3, 128, 256, 2, False),
    *((5, 256, 256, 1, False),) * 5,
    (5, 256, 512, 2, True),
    (5, 512, 512, 1, True),
)


def pp_lcnet(
    image_size: int = 224, scale: float = 1.0, num_classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """PP-LCNet on a ``1x3ximage_sizeximage_size`` input ``image``; output ``probs``."""
    if image_size < 32 or image_size % 32:
        raise EmberValueError(
            f"pp_lcnet: image_size must be a positive multiple of 32, got {image_size}"
        )
    g = GraphBuilder(seed)

    def width(c: int) -> int:
        return max(8, int(c * scale + 4) // 8 * 8)

    x = conv(g, "image", "stem", 3, width(16), 3, 2, act="hardswish")
    for i, (k, cin, cout, stride, se) in enumerate(PP_LCNET_BLOCKS):
        c_in, c_out = width(cin), width(cout)
        x = conv(g, x, f"blocks.{i}.dw", c_in, c_in, k, stride, group=c_in, act="hardswish")
        if se:
            x = squeeze_excite(g, x, f"blocks.{i}.se", c_in)
        x = conv(g, x, f"blocks.{i}.pw", c_in, c_out, 1, act="hardswish")
    last = width(PP_LCNET_BLOCKS[-1][2])
    x = g.node("GlobalAveragePool", [x], "pool")
    x = conv(g, x, "last_conv", last, 1280, 1, act="hardswish")
    x = g.node("Flatten", [x], "flatten", axis=1)
    w = g.weight("fc.weight", (num_classes, 1280), math.sqrt(1.0 / 1280))
    b = g.weight("fc.bias", (num_classes,), 0.05)
    logits = g.node("Gemm", [x, w, b], "fc", transB=1)
    g.node("Softmax", [logits], "probs", axis=-1)
    return g.classifier("pp_lcnet", image_size, num_classes, "probs")


def pp_lcnet_case(
    image_size: int = 224, seed: int = 0
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """PP-LCNet and a seeded image (``models`` calibrates its softmax when registering it)."""
    return pp_lcnet(image_size, seed=seed), seeded_input(
        (1, 3, image_size, image_size), "image", seed + 1
    )
