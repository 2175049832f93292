"""The benchmark zoo of issue 12 (ember/examples/ocr.py, detection.py, classification.py).

Fast tier: every new model is a valid ONNX graph (``onnx.checker`` with full shape
checks), deterministic, has the structure it is named for, and onnxruntime runs it to a
non-degenerate output. The compiled comparison (ember's graph executor, target ``c``,
against onnxruntime at rtol 1e-4, atol 1e-5, ember.testing's defaults) is the slow
``tests/e2e/test_models.py::test_model_matches_onnxruntime``, which takes every registered
model, these included (they used to be compiled twice). Measured largest
differences (2026-11-25): crnn 9.1e-7 (softmax outputs up to 0.2), pp_lcnet 6.0e-8
(probabilities up to 0.064), dbnet 2.6e-6 (a sigmoid map in [0, 1]), yolo 4.5e-7 (outputs
up to 0.58): float32 rounding in a different summation order, 4-20x inside atol, so the
defaults hold without loosening; rtol covers the larger outputs.
"""

import numpy as np
import onnx
import pytest

from ember.errors import EmberValueError
from ember.examples.classification import pp_lcnet
from ember.examples.detection import yolo
from ember.examples.models import MODELS, ZOO, make_model
from ember.examples.ocr import crnn, dbnet
from ember.examples.tiny import TINY_MODELS
from ember.testing import run_onnxruntime

NEW = ("crnn", "yolo", "pp_lcnet", "dbnet")

#: op types each new model must contain (what it stands for in the zoo).
SIGNATURE = {
    "crnn": {"Conv", "MaxPool", "LSTM", "MatMul", "Softmax"},
    "yolo": {"Conv", "Sigmoid", "Mul", "Split", "Concat", "Resize", "MaxPool", "Reshape"},
    "pp_lcnet": {"Conv", "HardSwish", "HardSigmoid", "GlobalAveragePool", "Gemm", "Softmax"},
    "dbnet": {"Conv", "HardSwish", "HardSigmoid", "Resize", "ConvTranspose", "Sigmoid"},
}
OUTPUT_SHAPES = {
    "crnn": (1, 24, 97),
    "yolo": (1, 144, 2100),
    "pp_lcnet": (1, 1000),
    "dbnet": (1, 1, 320, 320),
}
#: published parameter counts, +-15%: EasyOCR's English CRNN ~3.8 M, YOLOv8n 3.2 M,
#: PP-LCNet x1.0 2.96 M, PaddleOCR's MobileNetV3-0.5 DBNet ~0.9 M with a 96-wide FPN.
PARAMS = {"crnn": 3.8e6, "yolo": 3.15e6, "pp_lcnet": 2.96e6, "dbnet": 0.93e6}


def test_zoo_names_registered_models():
    assert set(ZOO) <= set(MODELS.names())
    assert set(NEW) | set(TINY_MODELS) | {"mobilenet_v2", "resnet50"} == set(ZOO)


@pytest.mark.parametrize("name", NEW)
def test_zoo_model_is_valid_and_runs_in_onnxruntime(name):
    case = make_model(name)
    model = case.model
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    ops = {n.op_type for n in model.graph.node}
    assert SIGNATURE[name] <= ops, SIGNATURE[name] - ops
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    assert abs(params - PARAMS[name]) < 0.15 * PARAMS[name], params
    (out,) = run_onnxruntime(model, case.inputs)
    assert out.shape == OUTPUT_SHAPES[name]
    assert np.all(np.isfinite(out)) and float(np.std(out)) > 1e-3
    assert make_model(name).model.SerializeToString() == model.SerializeToString()


def test_crnn_is_a_bidirectional_lstm_recognizer_with_a_distribution_per_step():
    case = make_model("crnn")
    lstms = [n for n in case.model.graph.node if n.op_type == "LSTM"]
    assert len(lstms) == 2
    for node in lstms:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs == {"hidden_size": 256, "direction": b"bidirectional"}
    (probs,) = run_onnxruntime(case.model, case.inputs)
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
    assert 0.05 < probs.max() < 0.9  # neither uniform nor one-hot per step


def test_generators_refuse_sizes_their_strides_cannot_take():
    for build in (pp_lcnet, dbnet, yolo):
        with pytest.raises(EmberValueError, match="multiple of 32"):
            build(image_size=100)
    with pytest.raises(EmberValueError, match="height 32"):
        crnn(height=48)
