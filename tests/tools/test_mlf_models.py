"""Model Library Format on models of the compiled suite: each exported tar reloads in a
fresh process and matches onnxruntime, and its standalone program (``make test``) prints
PASS on the host against the same test vectors."""

import subprocess
import sys
import tarfile

import numpy as np
import pytest

import ember
from ember.examples.models import make_model
from ember.tools.mlf import TestVectors

pytestmark = [pytest.mark.cc, pytest.mark.slow]

MODELS = ("mobilenet_v2_96", "squeezenet", "resnet8")


@pytest.mark.parametrize("name", MODELS)
def test_exported_model_reloads_and_runs_standalone(name, tmp_path):
    case = make_model(name)
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    lowered = ember.lower(mod, "c", params, executor="aot -interface-api=c", mod_name="net")
    want = ember.testing.run_onnxruntime(case.model, case.inputs)
    vectors = TestVectors(case.inputs, want, rtol=1e-3, atol=1e-4)
    path = ember.export_model_library_format(
        lowered, tmp_path / f"{name}.tar", test_vectors=vectors
    )

    # reloaded by ember.load_module in a process that never saw the model
    code = (
        "import sys, numpy as np, ember\n"
        "ex = ember.AotExecutor(ember.load_module(sys.argv[1])['net'](ember.cpu(0)))\n"
        "ex.set_input(**dict(np.load(sys.argv[2])))\n"
        "ex.run()\n"
        "np.savez(sys.argv[3], *[ex.get_output(i).numpy() for i in range(ex.get_num_outputs())])\n"
    )
    np.savez(tmp_path / "in.npz", **case.inputs)
    out = tmp_path / "out.npz"
    subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "in.npz"), str(out)], check=True
    )
    got = np.load(out)
    for k, expected in enumerate(want):
        np.testing.assert_allclose(got[f"arr_{k}"], expected, rtol=1e-3, atol=1e-4)

    # the standalone program: one static arena, no heap, PASS against the test vectors
    unpacked = tmp_path / "unpacked"
    with tarfile.open(path) as tar:
        tar.extractall(unpacked, filter="data")
    run = subprocess.run(["make", "-s", "test"], cwd=unpacked, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().startswith("PASS"), run.stdout
    assert f"arena {lowered.aot.memory.size} bytes" in run.stdout
