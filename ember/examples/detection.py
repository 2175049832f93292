"""A YOLO-style detector, built in memory with seeded weights (inference form).

:func:`yolo` follows YOLOv8n (depth 0.33, width 0.25): Conv+SiLU blocks (SiLU as
``Sigmoid`` then ``Mul``, as exported at opset 17), CSP "C2f" blocks (a 1x1 conv whose
output is ``Split`` in two, bottlenecks chained on one half, every piece ``Concat``-ed,
a 1x1 conv), an SPPF (three chained 5x5 max pools, Concat), a PAN-FPN neck with nearest
``Resize`` x2 upsampling and stride-2 convs back down, and a decoupled head per level
(box: two 3x3 convs and a 1x1 to 4x16 distribution logits; class: two 3x3 convs and a
1x1 to 80 classes, Sigmoid). The three levels are flattened and concatenated: output
``1 x 144 x anchors`` (2100 at 320x320), 64 box logits then 80 class scores per anchor.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ember.errors import EmberValueError
from ember.examples.blocks import conv, seeded_input, upsample
from ember.examples.builder import GraphBuilder

#: YOLOv8n's backbone widths (stem, stride 4, 8, 16, 32) and C2f repeats at each stride.
YOLO_WIDTHS: tuple[int, ...] = (16, 32, 64, 128, 256)
YOLO_REPEATS: tuple[int, ...] = (1, 2, 2, 1)
#: box distribution bins per side (DFL) and classes.
REG_MAX = 16
NUM_CLASSES = 80


def _c2f(
    g: GraphBuilder, x: str, name: str, cin: int, cout: int, repeats: int, shortcut: bool
) -> str:
    """CSP bottleneck with two convolutions ("C2f"): Split, chained bottlenecks, Concat."""
    half = cout // 2
    y = conv(g, x, f"{name}.cv1", cin, 2 * half, 1, act="silu")
    sizes = g.const(f"{name}.split", np.array([half, half], "int64"))
    g.nodes.append(
        helper.make_node(
            "Split", [y, sizes], [f"{name}.a", f"{name}.b"], name=f"{name}.split", axis=1
        )
    )
    pieces = [f"{name}.a", f"{name}.b"]
    for i in range(repeats):
        h = conv(g, pieces[-1], f"{name}.m.{i}.cv1", half, half, 3, act="silu")
        h = conv(g, h, f"{name}.m.{i}.cv2", half, half, 3, act="silu", gain=1.0)
        if shortcut:
            h = g.node("Add", [pieces[-1], h], f"{name}.m.{i}.add")
        pieces.append(h)
    cat = g.node("Concat", pieces, f"{name}.cat", axis=1)
    return conv(g, cat, f"{name}.cv2", (2 + repeats) * half, cout, 1, act="silu")


def _sppf(g: GraphBuilder, x: str, name: str, c: int) -> str:
    """Spatial pyramid pooling, fast: three chained 5x5 max pools, concatenated."""
    y = conv(g, x, f"{name}.cv1", c, c // 2, 1, act="silu")
    pieces = [y]
    for i in range(3):
        pieces.append(
            g.node("MaxPool", [pieces[-1]], f"{name}.pool{i}", kernel_shape=[5, 5], pads=[2] * 4)
        )
    cat = g.node("Concat", pieces, f"{name}.cat", axis=1)
    return conv(g, cat, f"{name}.cv2", 2 * c, c, 1, act="silu")


def _head(g: GraphBuilder, x: str, name: str, c: int, first: int, anchors: int) -> str:
    """One level's decoupled head, flattened: 1 x (64 + 80) x anchors; its widths come
    from the first level's channels ``first``, as YOLOv8's do."""
    box_width = max(16, first // 4, 4 * REG_MAX)
    cls_width = max(first, min(NUM_CLASSES, 100))
    box = conv(g, x, f"{name}.box.0", c, box_width, 3, act="silu")
    box = conv(g, box, f"{name}.box.1", box_width, box_width, 3, act="silu")
    box = conv(g, box, f"{name}.box.2", box_width, 4 * REG_MAX, 1)
    cls = conv(g, x, f"{name}.cls.0", c, cls_width, 3, act="silu")
    cls = conv(g, cls, f"{name}.cls.1", cls_width, cls_width, 3, act="silu")
    cls = conv(g, cls, f"{name}.cls.2", cls_width, NUM_CLASSES, 1)
    cat = g.node("Concat", [box, cls], f"{name}.cat", axis=1)
    shape = g.const(f"{name}.shape", np.array([1, 4 * REG_MAX + NUM_CLASSES, anchors], "int64"))
    return g.node("Reshape", [cat, shape], f"{name}.flat")


def yolo(image_size: int = 320, seed: int = 0) -> onnx.ModelProto:
    """The detector on a ``1x3ximage_sizeximage_size`` input ``images``; output ``output``."""
    if image_size < 64 or image_size % 32:
        raise EmberValueError(
            f"yolo: image_size must be a multiple of 32 (at least 64), got {image_size}"
        )
    g = GraphBuilder(seed)
    w0, w1, w2, w3, w4 = YOLO_WIDTHS
    x = conv(g, "images", "model.0", 3, w0, 3, 2, act="silu")
    x = conv(g, x, "model.1", w0, w1, 3, 2, act="silu")
    x = _c2f(g, x, "model.2", w1, w1, YOLO_REPEATS[0], True)
    x = conv(g, x, "model.3", w1, w2, 3, 2, act="silu")
    p3 = _c2f(g, x, "model.4", w2, w2, YOLO_REPEATS[1], True)
    x = conv(g, p3, "model.5", w2, w3, 3, 2, act="silu")
    p4 = _c2f(g, x, "model.6", w3, w3, YOLO_REPEATS[2], True)
    x = conv(g, p4, "model.7", w3, w4, 3, 2, act="silu")
    x = _c2f(g, x, "model.8", w4, w4, YOLO_REPEATS[3], True)
    p5 = _sppf(g, x, "model.9", w4)
    # top-down
    up = upsample(g, p5, "model.10", 2)
    n4 = _c2f(g, g.node("Concat", [up, p4], "model.11", axis=1), "model.12", w4 + w3, w3, 1, False)
    up = upsample(g, n4, "model.13", 2)
    out3 = _c2f(
        g, g.node("Concat", [up, p3], "model.14", axis=1), "model.15", w3 + w2, w2, 1, False
    )
    # bottom-up
    down = conv(g, out3, "model.16", w2, w2, 3, 2, act="silu")
    cat = g.node("Concat", [down, n4], "model.17", axis=1)
    out4 = _c2f(g, cat, "model.18", w2 + w3, w3, 1, False)
    down = conv(g, out4, "model.19", w3, w3, 3, 2, act="silu")
    cat = g.node("Concat", [down, p5], "model.20", axis=1)
    out5 = _c2f(g, cat, "model.21", w3 + w4, w4, 1, False)
    levels = []
    for k, (x, c) in enumerate(((out3, w2), (out4, w3), (out5, w4))):
        side = image_size // (8 << k)
        levels.append(_head(g, x, f"model.22.{k}", c, w2, side * side))
    flat = g.node("Concat", levels, "model.22.cat", axis=2)
    sizes = g.const("model.22.split", np.array([4 * REG_MAX, NUM_CLASSES], "int64"))
    g.nodes.append(
        helper.make_node(
            "Split",
            [flat, sizes],
            ["model.22.box", "model.22.logits"],
            name="model.22.split",
            axis=1,
        )
    )
    scores = g.node("Sigmoid", ["model.22.logits"], "model.22.scores")
    g.node("Concat", ["model.22.box", scores], "output", axis=1)
    anchors = sum((image_size // s) ** 2 for s in (8, 16, 32))
    shape = [1, 3, image_size, image_size]
    return g.model(
        "yolo",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape)],
        [
            helper.make_tensor_value_info(
                "output", TensorProto.FLOAT, [1, 4 * REG_MAX + NUM_CLASSES, anchors]
            )
        ],
    )


def yolo_case(
    image_size: int = 320, seed: int = 0
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The detector with a seeded image."""
    inputs = seeded_input((1, 3, image_size, image_size), "images", seed + 1)
    return yolo(image_size, seed=seed), inputs
