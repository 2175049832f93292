"""The AOT ``c`` interface: a plain C program runs the model through ember_<mod>_run.

The program links the generated kernels, the run function, the interface (constants
linked in), the metadata and ember's C runtime; no Python, no PackedFunc, no allocation
by the model. Its outputs are bitwise the graph executor's."""

import subprocess
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.errors import EmberValueError
from ember.examples.models import make_model
from ember.ir import Function, IRModule, TensorType, Tuple, Var, call

pytestmark = pytest.mark.cc

RUNTIME = Path(ember.__file__).parent / "runtime"

MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include "ember_{mod}.h"
static unsigned char workspace[EMBER_{MOD}_WORKSPACE_SIZE + 1] __attribute__((aligned(64)));
int main(int argc, char** argv) {{
  {inputs_decl}
  {outputs_decl}
  FILE* f = fopen(argv[1], "rb");
  {read_inputs}
  fclose(f);
  struct ember_{mod}_inputs in = {{{inputs}}};
  struct ember_{mod}_outputs out = {{{outputs}}};
  struct ember_{mod}_workspace ws = {{workspace}};
  int32_t rc = ember_{mod}_run(&in, &out, &ws);
  if (rc != 0) {{ fprintf(stderr, "run failed: %s\n", EmberGetLastError()); return 1; }}
  f = fopen(argv[2], "wb");
  {write_outputs}
  fclose(f);
  return 0;
}}
"""


def _program(md, mod: str) -> str:
    ins = [f"in{k}" for k in range(len(md.inputs))]
    outs = [f"out{k}" for k in range(len(md.outputs))]
    return MAIN_C.format(
        mod=mod,
        MOD=mod.upper(),
        inputs_decl=" ".join(
            f"static unsigned char {n}[{p.nbytes}] __attribute__((aligned(64)));"
            for n, p in zip(ins, md.inputs, strict=True)
        ),
        outputs_decl=" ".join(
            f"static unsigned char {n}[{p.nbytes}] __attribute__((aligned(64)));"
            for n, p in zip(outs, md.outputs, strict=True)
        ),
        read_inputs=" ".join(
            f"if (fread({n}, 1, {p.nbytes}, f) != {p.nbytes}) return 2;"
            for n, p in zip(ins, md.inputs, strict=True)
        ),
        write_outputs=" ".join(
            f"fwrite({n}, 1, {p.nbytes}, f);" for n, p in zip(outs, md.outputs, strict=True)
        ),
        inputs=", ".join(ins),
        outputs=", ".join(outs),
    )


def run_standalone(arts, mod: str, inputs: dict[str, np.ndarray], tmp: Path) -> list[np.ndarray]:
    """Build the artifacts' C sources with main.c and the runtime; run once; read outputs."""
    top = ember.load_artifacts(arts, ember.cpu(0))
    md = top["get_metadata"]()
    sources = []
    for art in arts:
        if art.loader == "native":
            (tmp / art.file_name).write_bytes(art.content)
            if art.file_name.endswith(".c"):
                sources.append(art.file_name)
    (tmp / "main.c").write_text(_program(md, mod))
    flags = next(a.metadata["cflags"] for a in arts if a.file_name == "lib0.c").split()
    exe = tmp / "model"
    cmd = ["cc", "-std=c11", *flags, "-I.", f"-I{RUNTIME / 'include'}", "main.c", *sources]
    cmd += [str(RUNTIME / "src" / "runtime.c"), "-lpthread", "-lm", "-o", str(exe)]
    subprocess.run(cmd, cwd=tmp, check=True, capture_output=True)
    with open(tmp / "in.bin", "wb") as f:
        for p in md.inputs:
            f.write(np.ascontiguousarray(inputs[p.name], dtype=p.dtype).tobytes())
    subprocess.run([str(exe), "in.bin", "out.bin"], cwd=tmp, check=True)
    data = (tmp / "out.bin").read_bytes()
    outs, at = [], 0
    for p in md.outputs:
        outs.append(np.frombuffer(data[at : at + p.nbytes], dtype=p.dtype).reshape(p.shape))
        at += p.nbytes
    return outs


def _graph_outputs(mod, params, inputs):
    dev = ember.cpu(0)
    g = ember.GraphExecutor(
        ember.load_artifacts(ember.build(mod, "c", params), dev)["default"](dev)
    )
    g.set_input(**inputs)
    g.run()
    return [g.get_output(i).numpy() for i in range(g.get_num_outputs())]


def test_c_interface_program_matches_the_graph_executor(tmp_path):
    x = Var("in:put", TensorType((2, 64), "float32"))
    w = Var("w", TensorType((2, 64), "float32"))
    h = call("relu", call("add", x, w))
    body = Tuple((call("sum", call("sigmoid", h), axes=(1,), keepdims=True), h))
    mod = IRModule.from_expr(Function((x, w), body))
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(2, 64)}
    arts = ember.build(mod, "c", params, executor="aot -interface-api=c", mod_name="tiny")
    header = next(a for a in arts if a.file_name == "ember_tiny.h").content.decode()
    assert "struct ember_tiny_inputs {" in header and "void* in_put;" in header
    assert "int32_t ember_tiny_run(struct ember_tiny_inputs* inputs" in header
    inputs = {"in:put": np.random.default_rng(0).standard_normal((2, 64)).astype("float32")}
    got = run_standalone(arts, "tiny", inputs, tmp_path)
    want = _graph_outputs(mod, params, inputs)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.slow
def test_mobilenet_runs_as_a_plain_c_program(tmp_path):
    case = make_model("mobilenet_v2_96")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    arts = ember.build(mod, "c", params, executor="aot -interface-api=c", mod_name="mnv2")
    got = run_standalone(arts, "mnv2", case.inputs, tmp_path)
    want = _graph_outputs(mod, params, case.inputs)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize(
    ("spec", "rule"),
    [
        ("aot -interface-api=c -link-params=false", "needs -link-params=true"),
        ("aot -interface-api=c -calling-convention=cpacked", "needs -calling-convention=unpacked"),
        ("aot -interface-api=c -calling-convention=packed", "needs -calling-convention=unpacked"),
        ("aot -link-params=true", "packed interface is not implemented yet"),
        ("graph -interface-api=c", "graph executor takes no interface options"),
        ("aot -interface-api=rust", "is unknown; known: packed, c"),
        ("aot -wat=1", "unknown option"),
        ("vm", "unknown executor 'vm'"),
    ],
)
def test_forbidden_combinations_are_refused_naming_the_rule(spec, rule):
    with pytest.raises(EmberValueError, match=rule):
        ember.Executor.create(spec)


def test_executor_from_the_target_string():
    x = Var("x", TensorType((4,), "float32"))
    mod = IRModule.from_expr(Function((x,), call("relu", x)))
    lowered = ember.lower(mod, "c -executor=aot")
    assert lowered.executor.kind == "aot" and lowered.aot is not None
    assert ember.lower(mod, "c -executor='aot -interface-api=c'").executor.interface_api == "c"
    assert str(ember.Executor.create("aot -interface-api=c")) == "aot -interface-api=c"
