"""Compiled normalisations and softmaxes against onnxruntime, one C compile per test."""

from __future__ import annotations

import numpy as np
import pytest

from ember.testing import assert_matches_onnxruntime, build_model, node, random_input

pytestmark = pytest.mark.cc


def test_norms_and_softmax():
    rng = np.random.default_rng(6)
    inputs = {
        "x": random_input((2, 4, 5, 6), seed=rng),
        "t": random_input((3, 5, 16), seed=rng),
        "mean": random_input((4,), seed=rng),
        "var": np.abs(random_input((4,), seed=rng)) + 0.5,
    }
    inits = {
        "gamma": random_input((4,), seed=rng),
        "beta": random_input((4,), seed=rng),
        "cmean": random_input((4,), seed=rng),
        "cvar": np.abs(random_input((4,), seed=rng)) + 0.5,
        "ln_s": random_input((16,), seed=rng),
        "ln_b": random_input((16,), seed=rng),
        "ln2_s": random_input((5, 16), seed=rng),
    }
    nodes = [
        node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], "bn_dyn", epsilon=1e-3),
        node("BatchNormalization", ["x", "gamma", "beta", "cmean", "cvar"], "bn_const"),
        node("InstanceNormalization", ["x", "gamma", "beta"], "inorm", epsilon=1e-4),
        node("LayerNormalization", ["t", "ln_s", "ln_b"], "lnorm"),
        node("LayerNormalization", ["t", "ln2_s"], "lnorm_axis1", axis=1),
        node("LRN", ["x"], "lrn", size=3, alpha=1e-3, beta=0.75, bias=2.0),
        node("Softmax", ["t"], "softmax_last"),
        node("Softmax", ["x"], "softmax_c", axis=1),
        node("LogSoftmax", ["t"], "logsoftmax", axis=-1),
        node("LogSoftmax", ["x"], "logsoftmax_h", axis=2),
    ]
    names = [n.output[0] for n in nodes]
    model = build_model(nodes, inputs, {n: "float32" for n in names}, inits)
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4)


def test_softmax_opset11_flattens():
    rng = np.random.default_rng(7)
    inputs = {"x": random_input((2, 3, 4), seed=rng)}
    nodes = [node("Softmax", ["x"], "y", axis=1), node("LogSoftmax", ["x"], "z", axis=2)]
    model = build_model(nodes, inputs, {"y": "float32", "z": "float32"}, opset=11)
    assert_matches_onnxruntime(model, inputs, rtol=1e-5, atol=1e-6)
