"""The grouped-convolution classifiers (ember/examples/grouped.py): valid ONNX, deterministic,
the published parameter counts and group widths, non-degenerate outputs in onnxruntime.
The compiled comparison is tests/e2e/test_models.py's, which takes every registered model."""

import onnx
import pytest
from published_classifier import check_published_classifier

from ember.errors import EmberValueError
from ember.examples.grouped import REGNETX, regnetx, resnext

#: published parameter counts (torchvision resnext50_32x4d 25.0 M; pycls RegNetX-200MF 2.7 M,
#: RegNetX-400MF 5.2 M) and the channels per group of their grouped convolutions.
PUBLISHED = {
    "resnext50": (25.0e6, {4, 8, 16, 32}),
    "regnetx_200mf": (2.7e6, {8}),
    "regnetx_400mf": (5.2e6, {16}),
}


def _group_widths(model: onnx.ModelProto) -> set[int]:
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    widths = set()
    for node in model.graph.node:
        groups = next((a.i for a in node.attribute if a.name == "group"), 1)
        if node.op_type == "Conv" and groups > 1:
            widths.add(shapes[node.input[1]][1])
    return widths


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_grouped_model_is_the_published_one_and_runs(name):
    published, widths = PUBLISHED[name]
    model = check_published_classifier(name, published, 0.05)
    assert _group_widths(model) == widths


def test_grouped_model_arguments():
    assert set(REGNETX) == {"200mf", "400mf"}
    small = regnetx("200mf", image_size=64, num_classes=10)
    assert small.graph.output[0].type.tensor_type.shape.dim[1].dim_value == 10
    assert _group_widths(resnext(groups=8, group_width=8, depths=(1, 1, 1, 1))) == {8, 16, 32, 64}
    with pytest.raises(EmberValueError, match="unknown setting '600mf'"):
        regnetx("600mf")
    with pytest.raises(EmberValueError, match="multiple of 32"):
        resnext(image_size=100)
