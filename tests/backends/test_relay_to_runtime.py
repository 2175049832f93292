"""relay_to_runtime + constant_updater without any library (the npdense test back end):
build, export, reload in a fresh process, run under both executors, compare with
onnxruntime; the weight travels with the artifact, not in params.bin."""

from pathlib import Path

import npdense  # noqa: F401 - registers the npdense test back end (tests/backends/)
import numpy as np
import pytest

import ember
from ember.formats.params import load_params
from ember.frontend import from_onnx
from ember.testing.onnx_models import build_model, node
from ember.testing.runners import run_onnxruntime

from .conftest import run_fresh

pytestmark = pytest.mark.cc
HERE = Path(__file__).resolve().parent
IMPORT = f"import sys; sys.path.insert(0, {str(HERE)!r}); import npdense"


def model_and_feed():
    rng = np.random.default_rng(7)
    w = rng.standard_normal((6, 10)).astype("float32")
    nodes = [node("Gemm", ["x", "w"], "g", transB=1), node("Tanh", ["g"], "y")]
    model = build_model(nodes, {"x": ("float32", (3, 10))}, ["y"], {"w": w})
    return model, {"x": rng.standard_normal((3, 10)).astype("float32")}


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_fresh_process_matches_onnxruntime(tmp_path, executor):
    model, feed = model_and_feed()
    mod, params = from_onnx(model)
    arts = ember.build(mod, "npdense, c", params, executor=executor)
    kept = load_params(next(a for a in arts if a.file_name == "params.bin").content)
    assert all(v.shape != (6, 10) for v in kept.values())  # owned by the npdense artifact
    assert any(a.file_name.endswith(".constants") for a in arts if a.loader == "npdense")
    lib = ember.export_library(arts, tmp_path / "m.so")
    got = run_fresh(lib, feed, [], executor, prelude=IMPORT)
    assert isinstance(got, np.ndarray), got.stderr[-2000:]
    np.testing.assert_allclose(got, run_onnxruntime(model, feed)[0], rtol=1e-5, atol=1e-6)
