"""example_accel (relay_to_tir + tir_to_runtime): elementwise regions become a readable
command stream that a Python loader interprets."""

import numpy as np
import pytest

import ember
import ember.backends.example_accel  # noqa: F401 - registers the kind
from ember.frontend import from_onnx
from ember.testing.onnx_models import build_model, node
from ember.testing.runners import run_onnxruntime

from .conftest import run_fresh

pytestmark = pytest.mark.cc


def model_and_feed():
    nodes = [
        node("Mul", ["x", "y"], "m"),
        node("Add", ["m", "x"], "a"),
        node("Relu", ["a"], "r"),
        node("Exp", ["r"], "e"),  # not on the accelerator: back to the host
        node("Sub", ["e", "y"], "out"),
    ]
    spec = ("float32", (3, 7))
    model = build_model(nodes, {"x": spec, "y": spec}, ["out"])
    rng = np.random.default_rng(3)
    feed = {k: rng.standard_normal((3, 7)).astype("float32") for k in ("x", "y")}
    return model, feed


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_command_stream_fresh_process(tmp_path, executor):
    model, feed = model_and_feed()
    mod, params = from_onnx(model)
    arts = ember.build(mod, "example_accel, c", params, executor=executor)
    streams = [a for a in arts if a.loader == "example_accel"]
    assert len(streams) == 2  # mul+add+relu merged; the sub after the host's exp
    text = streams[0].content.decode()
    assert "multiply t0 arg0 arg1" in text and "relu arg2 t1" in text
    lib = ember.export_library(arts, tmp_path / "accel.so")
    got = run_fresh(lib, feed, ["ember.backends.example_accel"], executor)
    assert isinstance(got, np.ndarray), got.stderr[-2000:]
    np.testing.assert_allclose(got, run_onnxruntime(model, feed)[0], rtol=1e-5, atol=1e-6)


def test_missing_loader_is_a_clear_error(tmp_path):
    model, feed = model_and_feed()
    mod, params = from_onnx(model)
    lib = ember.export_library(ember.build(mod, "example_accel, c", params), tmp_path / "a.so")
    proc = run_fresh(lib, feed, [])
    assert not isinstance(proc, np.ndarray)
    assert "runtime.module.loadbinary_example_accel" in proc.stderr
