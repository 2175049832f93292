"""DeepLabV3 (ember/examples/deeplab.py): registered and deterministic, its dilated
convolutions and resizes; a small one compiled against onnxruntime."""

import numpy as np
import pytest
from published_classifier import check_registered_example

from ember.errors import EmberValueError
from ember.examples.blocks import seeded_input
from ember.examples.deeplab import deeplabv3
from ember.testing import compile_onnx, run_artifacts, run_onnxruntime


def test_deeplabv3_is_registered_deterministic_and_has_its_ops():
    case = check_registered_example("deeplabv3")
    nodes = case.model.graph.node
    dilations = {a.ints[0] for n in nodes for a in n.attribute if a.name == "dilations"}
    assert dilations == {1, 2, 6, 12, 18}
    assert sum(n.op_type == "Resize" for n in nodes) == 2
    out = case.model.graph.output[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in out] == [1, 21, 256, 256]
    with pytest.raises(EmberValueError, match="multiple of 16"):
        deeplabv3(image_size=100)


def test_small_deeplabv3_matches_onnxruntime():
    model = deeplabv3(image_size=64, num_classes=5, seed=2)
    inputs = seeded_input((1, 3, 64, 64), "image", 3)
    built = compile_onnx(model, shape={"image": (1, 3, 64, 64)}, executor="graph")
    (out,) = run_artifacts(built, inputs)
    (want,) = run_onnxruntime(model, inputs)
    assert out.shape == (1, 5, 64, 64) and float(np.std(want)) > 1e-2
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-4)
