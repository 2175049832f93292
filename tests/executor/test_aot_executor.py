"""The AOT executor: one native call per run, bitwise the graph executor's results."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.errors import EmberValueError, ExecutorError
from ember.examples.models import make_model
from ember.formats.metadata import ModelMetadata
from ember.ir import Function, IRModule, TensorType, Tuple, Var, call

pytestmark = pytest.mark.cc

DEV = ember.cpu(0)


def _module() -> tuple[IRModule, dict[str, np.ndarray]]:
    """Two inputs, a constant, a shared intermediate, an output that is an input as is."""
    x = Var("x", TensorType((2, 64), "float32"))
    w = Var("w", TensorType((2, 64), "float32"))
    y = Var("y", TensorType((2, 1), "float32"))
    h = call("relu", call("add", x, w))
    s = call("sum", call("sigmoid", h), axes=(1,), keepdims=True)
    body = Tuple((call("multiply", s, y), h, x))
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(2, 64)}
    return IRModule.from_expr(Function((x, w, y), body)), params


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 64)).astype("float32")
    return {"x": x, "y": rng.standard_normal((2, 1)).astype("float32")}


def _run(arts, kind, inputs):
    top = ember.load_artifacts(arts, DEV)
    ex = (ember.AotExecutor if kind == "aot" else ember.GraphExecutor)(top["default"](DEV))
    ex.set_input(**inputs)
    ex.run()
    return ex, [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


def test_aot_matches_graph_bitwise_and_keeps_the_interface():
    mod, params = _module()
    aot, outs = _run(ember.build(mod, "c", params, executor="aot"), "aot", _inputs())
    _, want = _run(ember.build(mod, "c", params), "graph", _inputs())
    assert len(outs) == 3 and all(np.array_equal(a, b) for a, b in zip(outs, want, strict=True))
    np.testing.assert_array_equal(outs[2], _inputs()["x"])  # returned as is: copied
    assert aot.get_num_inputs() == 3 and aot.get_input_index("y") == 1
    assert aot.get_input_index("nope") == -1
    assert aot.get_input_info()["shape"] == {"x": (2, 64), "y": (2, 1)}
    (const,) = aot.module.metadata.params  # the bound weight, lifted out of the kernels
    np.testing.assert_array_equal(aot.get_input(2).numpy(), params["w"])
    aot.set_input(0, np.zeros((2, 64), "float32"))
    aot.load_params({const.name: np.ones((2, 64), "float32")})
    aot.run()
    np.testing.assert_array_equal(aot.get_output(1).numpy(), np.ones((2, 64), "float32"))
    out = np.empty((2, 64), "float32")
    assert aot.get_output(1, out=out) is out
    report = aot.profile(2)
    assert len(report.rows) == 3 and report.rows[0].op.startswith("ember_default_")
    assert aot.benchmark(DEV, repeat=2, number=2).median > 0


@pytest.mark.parametrize("convention", ["unpacked", "cpacked"])
def test_every_allowed_calling_convention_matches_the_graph_executor(convention):
    mod, params = _module()
    spec = f"aot -calling-convention={convention}"
    arts = ember.build(mod, "c", params, executor=spec)
    _, outs = _run(arts, "aot", _inputs())
    _, want = _run(ember.build(mod, "c", params), "graph", _inputs())
    assert all(np.array_equal(a, b) for a, b in zip(outs, want, strict=True))
    source = b"".join(a.content for a in arts if a.file_name.endswith(".c")).decode()
    assert ("ember_cpacked_0(" in source) == (convention == "cpacked")


def test_aot_refuses_bad_inputs_like_the_graph_executor():
    mod, params = _module()
    top = ember.load_artifacts(ember.build(mod, "c", params, executor="aot"), DEV)
    aot = ember.AotExecutor(top["default"](DEV))
    with pytest.raises(ExecutorError, match=r"input\(s\) \['x', 'y'\] were never set"):
        aot.run()
    with pytest.raises(EmberValueError, match="expects shape \\(2, 64\\) and dtype float32"):
        aot.set_input("x", np.zeros((2, 64), "float64"))
    with pytest.raises(ExecutorError, match="no input 'z'"):
        aot.set_input("z", np.zeros(1))
    with pytest.raises(ExecutorError, match="out of range"):
        aot.get_output(3)
    with pytest.raises(ExecutorError, match="no debug mode"):
        top["default"](DEV, True)


def test_metadata_memory_map_and_mangled_names():
    mod, params = _module()
    lowered = ember.lower(mod, "c", params, executor="aot", mod_name="net")
    arts = lowered.compile()
    files = {a.file_name: a for a in arts}
    md = ModelMetadata.from_json(files["metadata.json"].content)
    assert md.executor == "aot" and md.mod_name == "net"
    run, *operators = md.functions
    assert run.function_name == "ember_net_run_model"
    assert operators and all(f.function_name.startswith("ember_net_") for f in operators)
    assert {f.function_name for f in operators} == {k.name for k in lowered.aot.kernels}
    assert run.workspace_size_bytes == lowered.aot.memory.size > 0
    mmap = json.loads(files["memory_map.json"].content)
    assert mmap["workspace_size_bytes"] == run.workspace_size_bytes
    assert mmap["lower_bound_bytes"] <= mmap["workspace_size_bytes"]
    assert {b["node"] for b in mmap["buffers"]} <= {n.name for n in lowered.plan.graph.nodes}
    source = b"".join(a.content for a in arts if a.file_name.endswith(".c")).decode()
    assert "ember_net_run_model_unpacked(" in source and "ember_net_fused_" in source
    assert "## AOT workspace" in lowered.as_text()
    assert [a.content for a in arts] == [a.content for a in lowered.compile()]


def test_exported_aot_library_runs_in_a_fresh_process(tmp_path):
    mod, params = _module()
    lib = ember.export_library(ember.build(mod, "c", params, executor="aot"), tmp_path / "m.so")
    np.savez(tmp_path / "in.npz", **_inputs())
    code = (
        "import numpy as np, ember, sys\n"
        f"m = ember.load_module({str(lib)!r})\n"
        "a = ember.AotExecutor(m['default'](ember.cpu(0)))\n"
        f"a.set_input(**dict(np.load({str(tmp_path / 'in.npz')!r})))\n"
        "a.run()\n"
        "print(float(a.get_output(0).numpy().sum()))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    _, want = _run(ember.build(mod, "c", params), "graph", _inputs())
    assert float(out.stdout) == pytest.approx(float(want[0].sum()), rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2_96", "squeezenet", "inception_v1", "bert"])
def test_models_are_bitwise_identical_under_both_executors(name):
    case = make_model(name)
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    spec = "aot -calling-convention=cpacked" if name == "squeezenet" else "aot"
    _, aot = _run(ember.build(mod, "c", params, executor=spec), "aot", case.inputs)
    _, graph = _run(ember.build(mod, "c", params), "graph", case.inputs)
    assert all(np.array_equal(a, g) for a, g in zip(aot, graph, strict=True))


MAIN_C = r"""
#include <stdio.h>
#include "ember/metadata.h"
const EmberMetadata* ember_net_get_metadata(void);
static void params(const char* what, const EmberParameterInfo* p, int n) {
  for (int i = 0; i < n; ++i) {
    printf("%s %s %s %s %d", what, p[i].relay_name_hint, p[i].tir_name_hint, p[i].dtype,
           p[i].ndim);
    for (int d = 0; d < p[i].ndim; ++d) printf(" %lld", (long long)p[i].shape[d]);
    printf("\n");
  }
}
int main(void) {
  const EmberMetadata* md = ember_net_get_metadata();
  printf("model %lld %s %s %s\n", (long long)md->version, md->module_name, md->executor,
         md->interface_api);
  params("input", md->inputs, md->num_inputs);
  params("output", md->outputs, md->num_outputs);
  params("constant", md->constants, md->num_constants);
  for (int f = 0; f < md->num_functions; ++f) {
    const EmberFunctionInfo* fn = &md->functions[f];
    printf("function %s %d %d %lld %lld %lld\n", fn->function_name, fn->num_inputs,
           fn->num_outputs, (long long)fn->workspace_size_bytes, (long long)fn->io_size_bytes,
           (long long)fn->constant_size_bytes);
    params("param", fn->params, fn->num_inputs + fn->num_outputs);
  }
  return 0;
}
"""


def _expected_lines(md: ModelMetadata) -> list[str]:
    def params(what, infos):
        return [
            " ".join([what, p.name, p.tir_name, p.dtype, str(len(p.shape)), *map(str, p.shape)])
            for p in infos
        ]

    lines = [f"model {md.version} {md.mod_name} {md.executor} {md.interface_api}"]
    lines += params("input", md.inputs) + params("output", md.outputs)
    lines += params("constant", md.params)
    for f in md.functions:
        lines.append(
            f"function {f.function_name} {f.num_inputs} {f.num_outputs} "
            f"{f.workspace_size_bytes} {f.io_size_bytes} {f.constant_size_bytes}"
        )
        lines += params("param", f.params)
    return lines


def test_a_c_program_reads_the_same_metadata(tmp_path):
    """The C accessor, the Python metadata and metadata.json agree field by field."""
    mod, params = _module()
    arts = ember.build(mod, "c", params, executor="aot", mod_name="net")
    files = {a.file_name: a for a in arts}
    header = files["ember_net.h"].content.decode()
    assert "const EmberMetadata* ember_net_get_metadata(void);" in header
    (tmp_path / "md.c").write_bytes(files["ember_net_metadata.c"].content)
    (tmp_path / "main.c").write_text(MAIN_C)
    include = Path(ember.__file__).parent / "runtime" / "include"
    exe = tmp_path / "show"
    subprocess.run(
        ["cc", "-std=c99", "-Wall", "-Werror", f"-I{include}", "main.c", "md.c", "-o", str(exe)],
        cwd=tmp_path,
        check=True,
    )
    printed = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    from_json = ModelMetadata.from_json(files["metadata.json"].content)
    top = ember.load_artifacts(arts, DEV)
    from_python = top["get_metadata"]()
    assert from_json == from_python
    assert printed.splitlines() == _expected_lines(from_json)


def test_profile_passes_planned_scratch_to_kernels_that_take_it():
    """Regression: kernels whose scratch the AOT planner placed take it as a last argument;
    the per-operator profile (a graph executor over the AOT kernels) must pass one."""
    case = make_model("resnet8")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    top = ember.load_artifacts(ember.build(mod, "c", params, executor="aot"), DEV)
    aot = ember.AotExecutor(top["default"](DEV))
    with_scratch = [
        n for n in top.graph.nodes if n.attrs and dict(n.attrs.extra).get("scratch_bytes")
    ]
    assert with_scratch, "resnet8 no longer has kernels with planned scratch: pick another model"
    aot.set_input(**case.inputs)
    report = aot.profile(1, clock="thread")
    assert len(report.rows) == sum(1 for n in top.graph.nodes if n.attrs is not None)
    aot.run()
    ge = ember.GraphExecutor(
        ember.load_artifacts(ember.build(mod, "c", params), DEV)["default"](DEV)
    )
    ge.set_input(**case.inputs)
    ge.run()
    np.testing.assert_array_equal(aot.get_output(0).numpy(), ge.get_output(0).numpy())
