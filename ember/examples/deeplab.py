"""A DeepLabV3-style semantic segmenter (Chen et al. 2017) as PyTorch exports it, with
seeded weights.

:func:`deeplabv3`: a ResNet-18 backbone at output stride 16 (its last stage keeps the
stride of the one before and dilates its 3x3 convolutions by 2), Atrous Spatial Pyramid
Pooling (a 1x1 convolution, 3x3 convolutions dilated by 6, 12 and 18 with padding equal
to the dilation, and the image pooling branch: GlobalAveragePool, a 1x1 convolution and a
bilinear Resize back to the map), the five branches concatenated and projected to 256
channels, a 3x3 convolution, the classifier and a bilinear Resize to the input size. At
256 x 256 the ASPP sees a 16 x 16 map, where a dilation of 18 leaves only the centre tap
inside the input (torchvision's models run 520 x 520 at output stride 8).
"""

from __future__ import annotations

import math

import numpy as np
import onnx

from ember.errors import EmberValueError
from ember.examples.blocks import ACTIVATIONS, activation, conv, seeded_input
from ember.examples.builder import GraphBuilder

#: the ASPP's dilations at output stride 16.
ASPP_RATES = (6, 12, 18)
#: the backbone's stages: output channels, first stride, dilation (ResNet-18, OS 16).
STAGES = ((64, 1, 1), (128, 2, 1), (256, 2, 1), (512, 1, 2))


def dilated_conv(
    g: GraphBuilder, x: str, name: str, cin: int, cout: int, stride: int, dilation: int, act: str
) -> str:
    """A 3x3 Conv dilated by ``dilation``, padded by it (the map keeps its size at stride
    1), with a bias, then ``act``."""
    gain = ACTIVATIONS[act] if act else 0.5
    w = g.weight(f"{name}.weight", (cout, cin, 3, 3), math.sqrt(gain / (cin * 9)))
    b = g.weight(f"{name}.bias", (cout,), 0.05)
    y = g.node(
        "Conv",
        [x, w, b],
        name,
        kernel_shape=[3, 3],
        strides=[stride] * 2,
        pads=[dilation] * 4,
        dilations=[dilation] * 2,
    )
    return activation(g, y, name, act)


def _resize(g: GraphBuilder, x: str, name: str, shape: tuple[int, ...]) -> str:
    sizes = g.const(f"{name}.sizes", np.array(shape, np.int64))
    return g.node(
        "Resize",
        [x, "", "", sizes],
        name,
        mode="linear",
        coordinate_transformation_mode="half_pixel",
    )


def deeplabv3(image_size: int = 256, num_classes: int = 21, seed: int = 0) -> onnx.ModelProto:
    """DeepLabV3 on a 1x3ximage_sizeximage_size ``image``; output ``scores`` (1,
    num_classes, image_size, image_size)."""
    if image_size % 16:
        raise EmberValueError(f"deeplabv3: image_size {image_size} must be a multiple of 16")
    g = GraphBuilder(seed)
    x = conv(g, "image", "stem", 3, 64, 7, 2, act="relu")
    x = g.node("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = 64
    for s, (cout, first_stride, dilation) in enumerate(STAGES):
        for b in range(2):
            n = f"layer{s + 1}.{b}"
            stride = first_stride if b == 0 else 1
            y = dilated_conv(g, x, f"{n}.conv1", cin, cout, stride, dilation, "relu")
            y = dilated_conv(g, y, f"{n}.conv2", cout, cout, 1, dilation, "")
            shortcut = x
            if stride != 1 or cin != cout:
                shortcut = conv(g, x, f"{n}.downsample", cin, cout, 1, stride, gain=0.5)
            x = g.node("Relu", [g.node("Add", [y, shortcut], f"{n}.add")], f"{n}.out")
            cin = cout
    side = image_size // 16
    branches = [conv(g, x, "aspp.0", 512, 256, 1, act="relu")]
    for j, rate in enumerate(ASPP_RATES, start=1):
        branches.append(dilated_conv(g, x, f"aspp.{j}", 512, 256, 1, rate, "relu"))
    pooled = g.node("GlobalAveragePool", [x], "aspp.pool")
    pooled = conv(g, pooled, "aspp.pool.conv", 512, 256, 1, act="relu")
    branches.append(_resize(g, pooled, "aspp.pool.up", (1, 256, side, side)))
    y = g.node("Concat", branches, "aspp.cat", axis=1)
    y = conv(g, y, "aspp.project", 256 * len(branches), 256, 1, act="relu")
    y = conv(g, y, "head.conv", 256, 256, 3, act="relu")
    y = conv(g, y, "head.classifier", 256, num_classes, 1)
    _resize(g, y, "scores", (1, num_classes, image_size, image_size))
    out = (1, num_classes, image_size, image_size)
    return g.image_model("deeplabv3", image_size, "scores", out)


def deeplabv3_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """DeepLabV3 at 256 x 256 with 21 classes (PASCAL VOC's) and a seeded image."""
    return deeplabv3(seed=seed), seeded_input((1, 3, 256, 256), "image", seed + 1)
