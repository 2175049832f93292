"""A model partitioned across host + openblas + onednn: graph and AOT executors agree
exactly, match onnxruntime, and survive export and a reload in a fresh process."""

import numpy as np
import pytest

import ember
import ember.backends.onednn
import ember.backends.openblas
from ember.frontend import from_onnx
from ember.testing.runners import run_onnxruntime

from .conftest import mixed_model, needs_onednn, run_fresh

pytestmark = [pytest.mark.cc, needs_onednn]
TARGET = "openblas, onednn, c"


def test_each_kind_gets_its_ops():
    model, _ = mixed_model()
    mod, params = from_onnx(model)
    lowered = ember.lower(mod, TARGET, params)
    names = list(lowered.plan.kernels)
    assert any(n.startswith("ember_onednn_fused_nn_conv_add_relu") for n in names), names
    assert sum(n.startswith("ember_openblas") for n in names) == 2, names
    assert any("softmax" in n for n in names), names  # the host keeps the rest
    text = lowered.as_text()
    assert "## partition" in text and "onednn.conv_bias_relu" in text


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_mixed_model_fresh_process_matches_onnxruntime(tmp_path, executor):
    model, inputs = mixed_model()
    mod, params = from_onnx(model)
    arts = ember.build(mod, TARGET, params, executor=executor)
    lib = ember.export_library(arts, tmp_path / f"mixed_{executor}.so")
    got = run_fresh(lib, inputs, ["ember.backends.openblas", "ember.backends.onednn"], executor)
    assert isinstance(got, np.ndarray), got.stderr[-2000:]
    np.testing.assert_allclose(got, run_onnxruntime(model, inputs)[0], rtol=1e-4, atol=1e-5)


def test_graph_and_aot_identical():
    model, inputs = mixed_model(1)
    mod, params = from_onnx(model)
    outs = []
    dev = ember.cpu(0)
    for executor in ("graph", "aot"):
        top = ember.load_artifacts(ember.build(mod, TARGET, params, executor=executor), dev)
        run = top["default"](dev)
        ex = ember.GraphExecutor(run) if executor == "graph" else ember.AotExecutor(run)
        ex.set_input("x", inputs["x"])
        ex.run()
        outs.append(ex.get_output(0).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
