"""The exported shared library of a c-interface AOT build, used from C with only the shipped
headers: no Python, no ember runtime library (docs/deploy.md shows the same program)."""

import subprocess

import numpy as np
import pytest

import ember
from ember.examples.models import make_model
from ember.ir.evaluate import evaluate
from ember.runtime.libruntime import include_dir

pytestmark = pytest.mark.cc

PROGRAM = r"""
#include <stdio.h>
#include "ember_kws.h"
#include "ember/runtime_api.h"

static unsigned char arena[EMBER_KWS_WORKSPACE_SIZE] __attribute__((aligned(64)));

int main(int argc, char** argv) {
  float mfcc[1 * 1 * 49 * 10], scores[12];
  FILE* f = fopen(argv[1], "rb");
  if (f == NULL || fread(mfcc, sizeof(mfcc), 1, f) != 1) return 2;
  fclose(f);
  struct ember_kws_inputs in = {.mfcc = mfcc};
  struct ember_kws_outputs out = {.probs = scores};
  struct ember_kws_workspace ws = {arena};
  if (ember_kws_run(&in, &out, &ws) != 0) {
    fprintf(stderr, "run failed: %s\n", EmberGetLastError());
    return 1;
  }
  for (int i = 0; i < 12; ++i) printf("%.9g\n", scores[i]);
  return 0;
}
"""


def test_exported_library_runs_from_c_with_only_the_header(tmp_path):
    case = make_model("ds_cnn_kws")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    lowered = ember.lower(mod, "c", params, executor="aot -interface-api=c", mod_name="kws")
    artifacts = lowered.compile()
    library = ember.export_library(artifacts, tmp_path / "libkws.so")
    header = next(a for a in artifacts if a.file_name == "ember_kws.h")
    (tmp_path / header.file_name).write_bytes(header.content)
    # no symbol is left for a runtime library to provide (it was EmberBackend*)
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert "Ember" not in undefined
    (tmp_path / "main.c").write_text(PROGRAM)
    subprocess.run(
        ["cc", "-std=c11", "-O2", "-I", ".", "-I", str(include_dir()), "main.c", "-o", "run"]
        + ["-L", ".", "-lkws", "-Wl,-rpath,$ORIGIN"],
        cwd=tmp_path,
        check=True,
    )
    inputs = tmp_path / "mfcc.bin"
    inputs.write_bytes(np.ascontiguousarray(case.inputs["mfcc"], dtype="float32").tobytes())
    out = subprocess.run(
        ["./run", str(inputs)], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    got = np.array([float(v) for v in out.stdout.split()], dtype="float32")
    want = evaluate(mod, case.inputs, params)[0]
    np.testing.assert_allclose(got, np.asarray(want).reshape(-1), rtol=1e-4, atol=1e-5)
    # the same library still loads in Python, where the process's runtime serves it
    top = ember.load_module(library)
    ex = ember.AotExecutor(top["kws"](ember.cpu(0)))
    ex.set_input(**case.inputs)
    ex.run()
    np.testing.assert_allclose(ex.get_output(0).numpy().reshape(-1), got, rtol=1e-5, atol=1e-6)


def test_exported_graph_build_leaves_no_runtime_symbol_undefined(tmp_path):
    case = make_model("dense_autoencoder")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    library = ember.export_library(ember.build(mod, "c", params), tmp_path / "model.so")
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert "Ember" not in undefined  # dlopen from C used to fail on EmberBackendGetNumThreads
