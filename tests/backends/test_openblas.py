"""openblas (relay_to_tir + call_extern): MatMul, Gemm and batched MatMul run as sgemm
calls; build, export, reload in a fresh process, compare with onnxruntime."""

import numpy as np
import pytest

import ember
import ember.backends.openblas  # noqa: F401 - registers the kind
from ember.frontend import from_onnx
from ember.target import Target
from ember.testing.onnx_models import build_model, node
from ember.testing.runners import run_onnxruntime

from .conftest import run_fresh

pytestmark = pytest.mark.cc
RNG = np.random.default_rng(0)


def gemm_model():
    inits = {
        "w": RNG.standard_normal((16, 24)).astype("float32"),
        "g": RNG.standard_normal((12, 24)).astype("float32"),
        "gb": RNG.standard_normal((12,)).astype("float32"),
    }
    nodes = [
        node("MatMul", ["x", "w"], "m"),  # (2, 5, 16) @ (16, 24): batch folded into rows
        node("Reshape", ["m", "shape"], "m2"),
        node("Gemm", ["m2", "g", "gb"], "h", transB=1),  # dense + bias
        node("Reshape", ["h", "shape3"], "h3"),
        node("MatMul", ["h3", "y"], "b"),  # batched: (2, 5, 12) @ (2, 12, 3)
        node("Relu", ["b"], "out"),
    ]
    inits["shape"] = np.array([10, 24], dtype="int64")
    inits["shape3"] = np.array([2, 5, 12], dtype="int64")
    inputs = {"x": ("float32", (2, 5, 16)), "y": ("float32", (2, 12, 3))}
    model = build_model(nodes, inputs, ["out"], inits)
    feed = {
        "x": RNG.standard_normal((2, 5, 16)).astype("float32"),
        "y": RNG.standard_normal((2, 12, 3)).astype("float32"),
    }
    return model, feed


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model, feed = gemm_model()
    mod, params = from_onnx(model)
    arts = ember.build(mod, "openblas, c", params)
    lowered = ember.lower(mod, "openblas, c", params)
    assert sum(k.startswith("ember_openblas") for k in lowered.plan.kernels) == 3
    lib = ember.export_library(arts, tmp_path_factory.mktemp("ob") / "gemm.so")
    return model, feed, lib


def test_fresh_process_matches_onnxruntime(exported):
    model, feed, lib = exported
    got = run_fresh(lib, feed, ["ember.backends.openblas"])
    assert isinstance(got, np.ndarray), got.stderr[-2000:]
    np.testing.assert_allclose(got, run_onnxruntime(model, feed)[0], rtol=1e-4, atol=1e-4)


def test_missing_loader_is_a_clear_error(exported):
    _, feed, lib = exported
    proc = run_fresh(lib, feed, [])
    assert not isinstance(proc, np.ndarray)
    assert "ModuleLoadError" in proc.stderr
    assert "runtime.module.loadbinary_openblas" in proc.stderr


def test_missing_library_is_a_clear_error(exported):
    _, feed, lib = exported
    hide = "import sys; sys.modules['scipy_openblas32'] = None"
    proc = run_fresh(lib, feed, ["ember.backends.openblas"], prelude=hide)
    assert not isinstance(proc, np.ndarray)
    assert "ModuleLoadError" in proc.stderr and "pip install scipy-openblas32" in proc.stderr


def test_weights_stay_in_params_and_kernels_use_sgemm():
    model, _ = gemm_model()
    mod, params = from_onnx(model)
    lowered = ember.lower(mod, "openblas, c", params)
    text = lowered.as_text()
    assert "ember_openblas_sgemm" in text  # the call_extern in the kernels' loop IR
    shapes = {v.shape for v in lowered.plan.params.values()}
    assert (16, 24) in shapes  # relay_to_tir: constants planned with the rest


def test_thread_count_option_reaches_the_loader():
    model, feed = gemm_model()
    mod, params = from_onnx(model)
    arts = ember.build(mod, "openblas -num-threads=2, c", params)
    marker = next(a for a in arts if a.loader == "openblas")
    assert b"threads=2" in marker.content
    ember.load_artifacts(arts, ember.cpu(0))
    lib = ember.backends.openblas.load_library()
    assert lib.scipy_openblas_get_num_threads() == 2
    ember.load_artifacts(ember.build(mod, "openblas, c", params), ember.cpu(0))
    assert lib.scipy_openblas_get_num_threads() == 1


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_llvm_host_compiles_the_regions_loop_ir(executor):
    model, feed = gemm_model()
    mod, params = from_onnx(model)
    arts = ember.build(mod, Target(["openblas"], host="llvm"), params, executor=executor)
    assert any(a.codegen_id == "llvm" for a in arts)  # the host kind generated the code
    dev = ember.cpu(0)
    run = ember.load_artifacts(arts, dev)["default"](dev)
    ex = ember.GraphExecutor(run) if executor == "graph" else ember.AotExecutor(run)
    for k, v in feed.items():
        ex.set_input(k, v)
    ex.run()
    want = run_onnxruntime(model, feed)[0]
    np.testing.assert_allclose(ex.get_output(0).numpy(), want, rtol=1e-4, atol=1e-4)
