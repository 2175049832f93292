"""onednn (relay_to_runtime + constant_updater): a JSON primitive description run by the
``onednn`` loader; weights travel with the artifact, not in params.bin."""

import numpy as np
import pytest

import ember
import ember.backends.onednn  # noqa: F401 - registers the kind
from ember.formats.params import load_params
from ember.frontend import from_onnx
from ember.testing.onnx_models import build_model, node
from ember.testing.runners import run_artifacts, run_onnxruntime

from .conftest import mixed_model, needs_onednn, run_fresh

pytestmark = [pytest.mark.cc, needs_onednn]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    model, feed = mixed_model(2)
    mod, params = from_onnx(model)
    arts = ember.build(mod, "onednn, c", params)
    lib = ember.export_library(arts, tmp_path_factory.mktemp("dnnl") / "m.so")
    return model, feed, arts, lib


def test_fresh_process_matches_onnxruntime(built):
    model, feed, _, lib = built
    got = run_fresh(lib, feed, ["ember.backends.onednn"])
    assert isinstance(got, np.ndarray), got.stderr[-2000:]
    np.testing.assert_allclose(got, run_onnxruntime(model, feed)[0], rtol=1e-4, atol=1e-5)


def test_constants_owned_by_the_artifact_not_params(built):
    model, _, arts, _ = built
    params = load_params(next(a for a in arts if a.file_name == "params.bin").content)
    weights = {init.name for init in model.graph.initializer}
    shapes = {tuple(i.dims) for i in model.graph.initializer if i.name in weights}
    assert not shapes & {v.shape for v in params.values()}  # conv, gemm, matmul weights
    consts = [a for a in arts if a.loader == "onednn" and a.file_name.endswith(".constants")]
    assert len(consts) == 3
    assert any(a.file_name.endswith(".json") for a in arts if a.loader == "onednn")


def test_missing_loader_is_a_clear_error(built):
    _, feed, _, lib = built
    proc = run_fresh(lib, feed, [])
    assert not isinstance(proc, np.ndarray)
    assert "runtime.module.loadbinary_onednn" in proc.stderr


def test_missing_library_is_a_clear_error(built):
    _, feed, _, lib = built
    hide = "import ember.backends.onednn.capi as c; c.library_dir = lambda: '/nonexistent'"
    proc = run_fresh(lib, feed, ["ember.backends.onednn"], prelude=hide)
    assert not isinstance(proc, np.ndarray)
    assert "ModuleLoadError" in proc.stderr and "pip install onednn" in proc.stderr


def test_consecutive_primitives_stay_separate_regions(tmp_path):
    # Gemm+bias feeding Gemm+bias: two onednn regions (one primitive each), not one
    rng = np.random.default_rng(5)
    inits = {
        "w1": rng.standard_normal((16, 12)).astype("float32"),
        "b1": rng.standard_normal((16,)).astype("float32"),
        "w2": rng.standard_normal((8, 16)).astype("float32"),
        "b2": rng.standard_normal((8,)).astype("float32"),
    }
    nodes = [
        node("Gemm", ["x", "w1", "b1"], "h", transB=1),
        node("Gemm", ["h", "w2", "b2"], "y", transB=1),
    ]
    model = build_model(nodes, {"x": ("float32", (4, 12))}, ["y"], inits)
    feed = {"x": rng.standard_normal((4, 12)).astype("float32")}
    mod, params = from_onnx(model)
    lowered = ember.lower(mod, "onednn, c", params)
    assert sum(k.startswith("ember_onednn") for k in lowered.plan.kernels) == 2
    got = run_artifacts(lowered.compile(), feed)[0]
    np.testing.assert_allclose(got, run_onnxruntime(model, feed)[0], rtol=1e-4, atol=1e-4)
