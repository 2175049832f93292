"""The three MLPerf Tiny shapes, built in memory with seeded weights (inference form).

* :func:`ds_cnn_kws` - the keyword spotter: a 49x10 MFCC map, a 10x4 stride-2 conv, four
  depthwise-separable blocks of 64 channels, average pool, 12 classes, softmax;
* :func:`resnet8` - the CIFAR-10 classifier: a 3x3 stem of 16 channels, three residual
  stacks (16, 32, 64 channels; the last two halve the size and project the shortcut),
  average pool, 10 classes, softmax;
* :func:`dense_autoencoder` - the anomaly detector on 640 features: four 128-wide dense
  layers, an 8-wide bottleneck, four 128-wide layers back, and 640 outputs.

Batch normalisation stays in the graph as ``BatchNormalization`` (ember folds it), so the
models are what a training framework exports. Weights follow He initialisation, so
activations stay O(1) through the depth.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from ember.examples.builder import GraphBuilder as _Graph


def _bn(g: _Graph, x: str, name: str, channels: int) -> str:
    scale = g.const(f"{name}_scale", (1 + 0.1 * g.rng.standard_normal(channels)).astype("f4"))
    bias = g.const(f"{name}_bias", (0.1 * g.rng.standard_normal(channels)).astype("f4"))
    mean = g.const(f"{name}_mean", (0.1 * g.rng.standard_normal(channels)).astype("f4"))
    var = g.const(f"{name}_var", (1 + 0.1 * g.rng.random(channels)).astype("f4"))
    return g.node("BatchNormalization", [x, scale, bias, mean, var], name, epsilon=1e-3)


def _conv(
    g: _Graph,
    x: str,
    name: str,
    cin: int,
    cout: int,
    kernel: tuple[int, int],
    stride: int = 1,
    group: int = 1,
    pads: tuple[int, int, int, int] | None = None,
) -> str:
    fan_in = cin // group * kernel[0] * kernel[1]
    w = g.weight(f"{name}_w", (cout, cin // group, *kernel), (2.0 / fan_in) ** 0.5)
    if pads is None:
        pads = (kernel[0] // 2, kernel[1] // 2, (kernel[0] - 1) // 2, (kernel[1] - 1) // 2)
    return g.node(
        "Conv",
        [x, w],
        name,
        strides=[stride, stride],
        pads=list(pads),
        group=group,
        kernel_shape=list(kernel),
    )


def _conv_bn_relu(g: _Graph, x: str, name: str, cin: int, cout: int, **kw: object) -> str:
    y = _bn(g, _conv(g, x, f"{name}_conv", cin, cout, **kw), f"{name}_bn", cout)  # type: ignore[arg-type]
    return g.node("Relu", [y], f"{name}_relu")


def _dense(g: _Graph, x: str, name: str, cin: int, cout: int) -> str:
    w = g.weight(f"{name}_w", (cin, cout), (2.0 / cin) ** 0.5)
    b = g.const(f"{name}_b", np.zeros(cout, "f4"))
    return g.node("Gemm", [x, w, b], name)


def _head(g: _Graph, x: str, cin: int, classes: int) -> str:
    flat = g.node("Flatten", [x], "flatten", axis=1)
    return g.node("Softmax", [_dense(g, flat, "fc", cin, classes)], "probs", axis=-1)


def ds_cnn_kws(seed: int = 0) -> onnx.ModelProto:
    """DS-CNN keyword spotting on a 1x1x49x10 input ``mfcc``; output ``probs`` (1x12)."""
    g = _Graph(seed)
    x = _conv_bn_relu(g, "mfcc", "stem", 1, 64, kernel=(10, 4), stride=2, pads=(4, 1, 5, 2))
    for k in range(4):
        x = _conv_bn_relu(g, x, f"dw{k}", 64, 64, kernel=(3, 3), group=64)
        x = _conv_bn_relu(g, x, f"pw{k}", 64, 64, kernel=(1, 1))
    x = g.node("AveragePool", [x], "pool", kernel_shape=[25, 5])
    probs = _head(g, x, 64, 12)
    return g.model(
        "ds_cnn_kws",
        [helper.make_tensor_value_info("mfcc", TensorProto.FLOAT, [1, 1, 49, 10])],
        [helper.make_tensor_value_info(probs, TensorProto.FLOAT, [1, 12])],
    )


def resnet8(seed: int = 0) -> onnx.ModelProto:
    """ResNet-8 on a 1x3x32x32 input ``image``; output ``probs`` (1x10)."""
    g = _Graph(seed)
    x = _conv_bn_relu(g, "image", "stem", 3, 16, kernel=(3, 3))
    cin = 16
    for k, (cout, stride) in enumerate(((16, 1), (32, 2), (64, 2))):
        y = _conv_bn_relu(g, x, f"s{k}a", cin, cout, kernel=(3, 3), stride=stride)
        y = _bn(g, _conv(g, y, f"s{k}b_conv", cout, cout, (3, 3)), f"s{k}b_bn", cout)
        short = x if stride == 1 else _conv(g, x, f"s{k}_proj", cin, cout, (1, 1), stride)
        x = g.node("Relu", [g.node("Add", [y, short], f"s{k}_add")], f"s{k}_out")
        cin = cout
    x = g.node("AveragePool", [x], "pool", kernel_shape=[8, 8])
    probs = _head(g, x, 64, 10)
    return g.model(
        "resnet8",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info(probs, TensorProto.FLOAT, [1, 10])],
    )


def dense_autoencoder(seed: int = 0) -> onnx.ModelProto:
    """The anomaly-detection autoencoder on a 1x640 input ``features``; output ``recon``."""
    g = _Graph(seed)
    x, cin = "features", 640
    for k, width in enumerate((128, 128, 128, 128, 8, 128, 128, 128, 128)):
        x = _bn(g, _dense(g, x, f"fc{k}", cin, width), f"bn{k}", width)
        x = g.node("Relu", [x], f"relu{k}")
        cin = width
    recon = _dense(g, x, "recon", cin, 640)
    return g.model(
        "dense_autoencoder",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 640])],
        [helper.make_tensor_value_info(recon, TensorProto.FLOAT, [1, 640])],
    )


def tiny_case(name: str, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One of the three models with a seeded input."""
    build = {"ds_cnn_kws": ds_cnn_kws, "resnet8": resnet8, "dense_autoencoder": dense_autoencoder}
    model = build[name](seed)
    (inp,) = model.graph.input
    shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
    rng = np.random.default_rng(seed + 1)
    return model, {inp.name: rng.standard_normal(shape).astype(np.float32)}


#: the MLPerf Tiny model names.
TINY_MODELS: tuple[str, ...] = ("ds_cnn_kws", "resnet8", "dense_autoencoder")
