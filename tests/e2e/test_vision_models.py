"""The vision transformer and EfficientNet-B0 examples (ember/examples/vit.py,
efficientnet.py): valid ONNX, deterministic, the published parameter counts and the ops
they stand for, non-degenerate outputs in onnxruntime. The compiled comparison is
tests/e2e/test_models.py's, which takes every registered model."""

import onnx
import pytest
from published_classifier import check_published_classifier

from ember.errors import EmberValueError
from ember.examples.efficientnet import efficientnet_b0
from ember.examples.vit import vit

#: published parameter counts: DeiT-Tiny 5.7 M, EfficientNet-B0 5.3 M; the ops each stands for.
PUBLISHED = {
    "vit_tiny": (5.7e6, {"LayerNormalization", "Softmax", "Erf", "Gather", "Concat", "MatMul"}),
    "efficientnet_b0": (5.3e6, {"Sigmoid", "Mul", "GlobalAveragePool", "Conv", "Gemm"}),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_vision_model_is_the_published_one_and_runs(name):
    published, ops = PUBLISHED[name]
    model = check_published_classifier(name, published, 0.03)
    assert ops <= {n.op_type for n in model.graph.node}


def test_vit_has_197_tokens_and_efficientnet_5x5_depthwise():
    inferred = onnx.shape_inference.infer_shapes(vit(depth=1))
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in inferred.graph.value_info
    }
    assert shapes["tokens"] == [1, 197, 192] and shapes["blocks.0.attn.q"] == [1, 3, 197, 64]
    model = efficientnet_b0(image_size=64, num_classes=10)
    kernels = {
        tuple(a.ints)
        for n in model.graph.node
        if n.op_type == "Conv"
        for a in n.attribute
        if a.name == "kernel_shape"
    }
    assert {(5, 5), (3, 3), (1, 1)} <= kernels
    with pytest.raises(EmberValueError, match="multiple of patch"):
        vit(image_size=100)
    with pytest.raises(EmberValueError, match="multiple of 32"):
        efficientnet_b0(image_size=100)
