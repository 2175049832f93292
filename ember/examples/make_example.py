"""Generate the bundled example model: a small MNIST-shaped CNN with fixed random weights.

Run ``python -m ember.examples.make_example`` to regenerate ``mnist_cnn.onnx``; the output is
byte-identical for a given onnx version (fixed seed, no timestamps).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array.astype(np.float32), name)


def build_model() -> onnx.ModelProto:
    """Conv-BN-ReLU-MaxPool, Conv-ReLU, GlobalAveragePool, Gemm, Softmax on a 1x1x28x28 image."""
    rng = np.random.default_rng(20261121)

    def weight(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:]))
        return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape)

    inits = [
        _init("conv1.w", weight(8, 1, 3, 3)),
        _init("conv1.b", rng.normal(0, 0.1, 8)),
        _init("bn1.scale", rng.uniform(0.5, 1.5, 8)),
        _init("bn1.bias", rng.normal(0, 0.1, 8)),
        _init("bn1.mean", rng.normal(0, 0.1, 8)),
        _init("bn1.var", rng.uniform(0.5, 1.5, 8)),
        _init("conv2.w", weight(16, 8, 3, 3)),
        _init("conv2.b", rng.normal(0, 0.1, 16)),
        _init("fc.w", weight(10, 16)),
        _init("fc.b", rng.normal(0, 0.1, 10)),
    ]
    nodes = [
        helper.make_node(
            "Conv",
            ["image", "conv1.w", "conv1.b"],
            ["c1"],
            name="conv1",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node(
            "BatchNormalization",
            ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"],
            ["b1"],
            name="bn1",
            epsilon=1e-5,
        ),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node(
            "MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]
        ),
        helper.make_node(
            "Conv",
            ["p1", "conv2.w", "conv2.b"],
            ["c2"],
            name="conv2",
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mnist_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ember-examples"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main(argv: list[str] | None = None) -> int:
    """Write the model to the path given (default: next to this file)."""
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else Path(__file__).with_name("mnist_cnn.onnx")
    out.write_bytes(build_model().SerializeToString())
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
