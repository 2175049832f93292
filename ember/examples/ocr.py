"""Two OCR models, built in memory with seeded weights (inference form, batch norms folded).

* :func:`crnn` - a CRNN text recognizer as EasyOCR's English model has it: a VGG-style
  conv stack (32, 64, 128, 128, 256, 256 channels, max pools that keep the width late)
  on a ``1x3x32x100`` line image, a final 2x2 valid conv to one row of 24 columns, two
  bidirectional LSTMs (hidden 256) each followed by a linear layer, a 97-way linear
  classifier per column and a Softmax (CTC's per-step distribution);
* :func:`dbnet` - a DBNet text detector as PaddleOCR's mobile one: a MobileNetV3-large
  backbone at width 0.5 (inverted residuals with squeeze-excitation, ReLU then
  HardSwish), a DB-FPN (1x1 lateral convs to 96 channels, nearest ``Resize`` x2 top-down
  sums, 3x3 convs to 24 channels, ``Resize`` to stride 4, Concat) and the DB head (3x3
  conv, two ``ConvTranspose`` 2x2 stride 2, Sigmoid): a probability map of the input size.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from ember.errors import EmberValueError
from ember.examples.blocks import activation, conv, linear, seeded_input, squeeze_excite, upsample
from ember.examples.builder import GraphBuilder

#: MobileNetV3-large's blocks: (kernel, expanded channels, out channels, SE, act, stride).
MOBILENET_V3_LARGE: tuple[tuple[int, int, int, bool, str, int], ...] = (
    (3, 16, 16, False, "relu", 1),
    (3, 64, 24, False, "relu", 2),
    (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2),
    (5, 120, 40, True, "relu", 1),
    (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hardswish", 2),
    (3, 200, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 184, 80, False, "hardswish", 1),
    (3, 480, 112, True, "hardswish", 1),
    (3, 672, 112, True, "hardswish", 1),
    (5, 672, 160, True, "hardswish", 2),
    (5, 960, 160, True, "hardswish", 1),
    (5, 960, 160, True, "hardswish", 1),
)

# ----------------------------------------------------------------------------- CRNN

#: the classifier's weight variance x fan-in: per-step logits of std about 2, so that the
#: softmax is neither uniform nor one-hot (as a trained recognizer's).
PREDICTION_GAIN = 128.0


def _bilstm(g: GraphBuilder, x: str, name: str, cin: int, hidden: int, seq: int) -> str:
    """A bidirectional LSTM over ``x`` (seq x 1 x cin) -> seq x 1 x 2*hidden, as exported."""
    # sqrt(3) times PyTorch's initial uniform(-1/sqrt(h), 1/sqrt(h)): trained gates saturate
    std = 1.0 / math.sqrt(hidden)
    w = g.weight(f"{name}.W", (2, 4 * hidden, cin), std)
    r = g.weight(f"{name}.R", (2, 4 * hidden, hidden), std)
    b = g.weight(f"{name}.B", (2, 8 * hidden), std)
    y = g.node("LSTM", [x, w, r, b], f"{name}.lstm", hidden_size=hidden, direction="bidirectional")
    y = g.node("Transpose", [y], f"{name}.transpose", perm=[0, 2, 1, 3])
    shape = g.const(f"{name}.shape", np.array([seq, 1, 2 * hidden], "int64"))
    return g.node("Reshape", [y, shape], f"{name}.concat")


def crnn(
    height: int = 32, width: int = 100, hidden: int = 256, num_classes: int = 97, seed: int = 0
) -> onnx.ModelProto:
    """CRNN on a ``1x3xheightxwidth`` input ``image``; output ``probs`` (1 x steps x classes)."""
    if height != 32 or width < 16 or width % 4:
        raise EmberValueError(
            f"crnn: the conv stack needs height 32 and a width that is a multiple of 4 "
            f"(at least 16), got {height}x{width}"
        )
    g = GraphBuilder(seed)

    def pool(x: str, name: str, kernel: tuple[int, int]) -> str:
        return g.node("MaxPool", [x], name, kernel_shape=list(kernel), strides=list(kernel))

    x = conv(g, "image", "features.0", 3, 32, 3, act="relu")
    x = pool(x, "features.pool0", (2, 2))
    x = conv(g, x, "features.1", 32, 64, 3, act="relu")
    x = pool(x, "features.pool1", (2, 2))
    x = conv(g, x, "features.2", 64, 128, 3, act="relu")
    x = conv(g, x, "features.3", 128, 128, 3, act="relu")
    x = pool(x, "features.pool2", (2, 1))
    x = conv(g, x, "features.4", 128, 256, 3, act="relu")
    x = conv(g, x, "features.5", 256, 256, 3, act="relu")
    x = pool(x, "features.pool3", (2, 1))
    x = conv(g, x, "features.6", 256, 256, 2, act="relu", pads=(0, 0, 0, 0))
    steps = width // 4 - 1
    axes = g.const("squeeze.axes", np.array([2], "int64"))
    x = g.node("Squeeze", [x, axes], "features.squeeze")  # 1 x 256 x steps
    x = g.node("Transpose", [x], "sequence", perm=[2, 0, 1])  # steps x 1 x 256
    x = _bilstm(g, x, "rnn.0", 256, hidden, steps)
    x = linear(g, x, "rnn.0.linear", 2 * hidden, hidden)
    x = _bilstm(g, x, "rnn.1", hidden, hidden, steps)
    x = linear(g, x, "rnn.1.linear", 2 * hidden, hidden)
    x = linear(g, x, "prediction", hidden, num_classes, gain=PREDICTION_GAIN)
    x = g.node("Transpose", [x], "prediction.batch_first", perm=[1, 0, 2])
    probs = g.node("Softmax", [x], "probs", axis=-1)
    return g.model(
        "crnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, height, width])],
        [helper.make_tensor_value_info(probs, TensorProto.FLOAT, [1, steps, num_classes])],
    )


def crnn_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """CRNN on a 32x100 line image, with a seeded input."""
    return crnn(seed=seed), seeded_input((1, 3, 32, 100), "image", seed + 1)


# ----------------------------------------------------------------------------- DBNet


def _divisible(value: float, divisor: int = 8) -> int:
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _inverted_residual(
    g: GraphBuilder, x: str, name: str, cin: int, block: tuple[int, int, int, bool, str, int]
) -> tuple[str, int]:
    k, expanded, cout, se, act, stride = block
    y = x
    if expanded != cin:
        y = conv(g, y, f"{name}.expand", cin, expanded, 1, act=act)
    y = conv(g, y, f"{name}.depthwise", expanded, expanded, k, stride, group=expanded, act=act)
    if se:
        y = squeeze_excite(g, y, f"{name}.se", expanded)
    y = conv(g, y, f"{name}.project", expanded, cout, 1)
    if stride == 1 and cin == cout:
        y = g.node("Add", [x, y], f"{name}.residual")
    return y, cout


def _mobilenet_v3(g: GraphBuilder, x: str, scale: float) -> list[tuple[str, int]]:
    """The backbone's feature maps at strides 4, 8, 16 and 32 with their channels."""
    cin = _divisible(16 * scale)
    x = conv(g, x, "backbone.stem", 3, cin, 3, 2, act="hardswish")
    features = []
    for i, (k, exp, c, se, act, stride) in enumerate(MOBILENET_V3_LARGE):
        next_stride = MOBILENET_V3_LARGE[i + 1][5] if i + 1 < len(MOBILENET_V3_LARGE) else 2
        block = (k, _divisible(exp * scale), _divisible(c * scale), se, act, stride)
        x, cin = _inverted_residual(g, x, f"backbone.blocks.{i}", cin, block)
        if next_stride == 2 and i > 0:
            features.append((x, cin))
    last = _divisible(960 * scale)
    x = conv(g, x, "backbone.last", cin, last, 1, act="hardswish")
    features[-1] = (x, last)
    return features


def dbnet(image_size: int = 320, fpn: int = 96, seed: int = 0) -> onnx.ModelProto:
    """DBNet on a ``1x3ximage_sizeximage_size`` input ``image``; output ``maps`` (1x1xHxW)."""
    if image_size < 32 or image_size % 32:
        raise EmberValueError(
            f"dbnet: image_size must be a positive multiple of 32, got {image_size}"
        )
    g = GraphBuilder(seed)
    features = _mobilenet_v3(g, "image", 0.5)
    laterals = [
        conv(g, x, f"neck.in{k + 2}", c, fpn, 1, gain=2.0) for k, (x, c) in enumerate(features)
    ]
    top = laterals[-1]
    merged = [top]
    for k in range(len(laterals) - 2, -1, -1):
        top = g.node(
            "Add", [laterals[k], upsample(g, top, f"neck.up{k + 2}", 2)], f"neck.out{k + 2}"
        )
        merged.insert(0, top)
    branches = []
    for k, x in enumerate(merged):
        y = conv(g, x, f"neck.p{k + 2}", fpn, fpn // 4, 3, gain=2.0)
        branches.append(upsample(g, y, f"neck.p{k + 2}.up", 2**k) if k else y)
    fused = g.node("Concat", branches[::-1], "neck.fuse", axis=1)
    x = conv(g, fused, "head.conv", fpn, fpn // 4, 3, act="relu")
    x = _conv_transpose(g, x, "head.up1", fpn // 4, fpn // 4, "relu")
    x = _conv_transpose(g, x, "head.up2", fpn // 4, 1, "sigmoid", gain=0.5)
    shape = [1, 3, image_size, image_size]
    return g.model(
        "dbnet",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 1, image_size, image_size])],
    )


def _conv_transpose(
    g: GraphBuilder, x: str, name: str, cin: int, cout: int, act: str, gain: float = 2.0
) -> str:
    """A 2x2 stride-2 ConvTranspose (each output reads one tap of every input channel)."""
    w = g.weight(f"{name}.weight", (cin, cout, 2, 2), math.sqrt(gain / cin))
    b = g.weight(f"{name}.bias", (cout,), 0.05)
    y = g.node("ConvTranspose", [x, w, b], name, kernel_shape=[2, 2], strides=[2, 2])
    return activation(g, y, name, act)


def dbnet_case(
    image_size: int = 320, seed: int = 0
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """DBNet with a seeded image."""
    inputs = seeded_input((1, 3, image_size, image_size), "image", seed + 1)
    return dbnet(image_size, seed=seed), inputs
