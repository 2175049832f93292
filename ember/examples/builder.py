"""GraphBuilder: a small ONNX graph builder for the example models (seeded weights)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: the opset of the generated models (MobileNetV2, BERT, MLPerf Tiny).
OPSET = 17
#: their IR version: the first that opset 17 allows, so every onnxruntime since 1.11 reads
#: them (onnx.helper would stamp its newest).
IR_VERSION = 8


class GraphBuilder:
    """A small builder: unique node names, float32 initializers from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray) -> str:
        """Add an initializer; return its name."""
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def weight(self, name: str, shape: Sequence[int], std: float) -> str:
        """A float32 initializer drawn from N(0, std^2)."""
        return self.const(name, self.rng.normal(0.0, std, size=tuple(shape)).astype(np.float32))

    def node(self, op: str, inputs: Sequence[str], name: str, **attrs: Any) -> str:
        """Add a one-output node named ``name`` whose output is also called ``name``."""
        self.nodes.append(helper.make_node(op, list(inputs), [name], name=name, **attrs))
        return name

    def logits(
        self, x: str, name: str, features: int, num_classes: int, bias_std: float = 0.05
    ) -> str:
        """A ``Gemm`` classifier over (1, ``features``) ``x`` (weights ``name.weight`` and
        ``name.bias``), its output named ``logits``."""
        w = self.weight(f"{name}.weight", (num_classes, features), math.sqrt(1.0 / features))
        b = self.weight(f"{name}.bias", (num_classes,), bias_std)
        return self.node("Gemm", [x, w, b], "logits", transB=1)

    def model(
        self, name: str, inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto]
    ) -> onnx.ModelProto:
        """The finished model (opset 17, IR version 8, checked)."""
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ember.examples"
        )
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model

    def classifier(
        self, name: str, image_size: int, num_classes: int, output: str = "logits"
    ) -> onnx.ModelProto:
        """The finished model of an image classifier: input ``image`` (1, 3, image_size,
        image_size), output ``output`` (1, num_classes)."""
        return self.image_model(name, image_size, output, (1, num_classes))

    def image_model(
        self, name: str, image_size: int, output: str, out_shape: Sequence[int]
    ) -> onnx.ModelProto:
        """The finished model of an image network: input ``image`` (1, 3, image_size,
        image_size), float32 output ``output`` of ``out_shape``."""
        shape = [1, 3, image_size, image_size]
        return self.model(
            name,
            [helper.make_tensor_value_info("image", onnx.TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(output, onnx.TensorProto.FLOAT, list(out_shape))],
        )
