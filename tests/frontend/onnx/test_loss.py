"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.errors import FrontendError
from ember.testing import run_onnx_compiled, run_onnxruntime

from .conftest import assert_close, make_model

RNG = np.random.default_rng(3)


def _loss_model(op: str, x_shape: tuple[int, ...], weight: bool, outputs: int, **attrs):
    target_shape = (x_shape[0], *x_shape[2:])
    names = ["x", "t"] + (["w"] if weight else [])
    outs = [f"y{i}" for i in range(outputs)]
    inputs = {"x": ("float32", x_shape), "t": ("int64", target_shape)}
    if weight:
        inputs["w"] = ("float32", (x_shape[1],))
    node = helper.make_node(op, names, outs, **attrs)
    return make_model([node], inputs, outs, opset=13)


def _feeds(x_shape: tuple[int, ...], weight: bool, ignore: int | None) -> dict[str, np.ndarray]:
    target = RNG.integers(0, x_shape[1], (x_shape[0], *x_shape[2:])).astype(np.int64)
    if ignore is not None:
        target.reshape(-1)[::3] = ignore
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32), "t": target}
    if weight:
        feeds["w"] = RNG.uniform(0.2, 2.0, x_shape[1]).astype(np.float32)
    return feeds


CASES = [
    ("NegativeLogLikelihoodLoss", (3, 5), False, None, "mean"),
    ("NegativeLogLikelihoodLoss", (2, 4, 3, 2), True, 1, "sum"),
    ("NegativeLogLikelihoodLoss", (2, 4, 3), True, -1, "none"),
    ("SoftmaxCrossEntropyLoss", (3, 5), True, None, "mean"),
    ("SoftmaxCrossEntropyLoss", (2, 4, 3), False, -2, "mean"),
    ("SoftmaxCrossEntropyLoss", (2, 4, 3, 2), True, 0, "none"),
]


@pytest.mark.parametrize(("op", "shape", "weight", "ignore", "reduction"), CASES)
def test_loss_matches_onnxruntime(op, shape, weight, ignore, reduction, compare_ort):
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    outputs = 2 if op == "SoftmaxCrossEntropyLoss" else 1
    model = _loss_model(op, shape, weight, outputs, **attrs)
    compare_ort(model, _feeds(shape, weight, ignore), rtol=1e-5, atol=1e-5)


@pytest.mark.cc
def test_compiled_loss_takes_targets_at_run_time():
    model = _loss_model("SoftmaxCrossEntropyLoss", (2, 4, 3), True, 1, ignore_index=2)
    feeds = _feeds((2, 4, 3), True, 2)
    got = run_onnx_compiled(model, feeds)
    assert_close(got, run_onnxruntime(model, feeds), rtol=1e-5, atol=1e-5)


def test_target_shape_mismatch_is_reported(run_ember):
    model = _loss_model("NegativeLogLikelihoodLoss", (2, 4, 3), False, 1)
    model.graph.input[1].type.tensor_type.shape.dim[1].dim_value = 5
    feeds = {"x": np.zeros((2, 4, 3), np.float32), "t": np.zeros((2, 5), np.int64)}
    with pytest.raises(FrontendError, match="target must be"):
        run_ember(model, feeds)
