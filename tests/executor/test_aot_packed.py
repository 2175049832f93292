"""The ``packed`` operator calling convention of the AOT executor: functions found through
the runtime by name (``call_packed`` -> ``EmberBackendGetFuncFromEnv``), which is also how
the run function calls kernels of another module (a ``relay_to_runtime`` artifact)."""

import numpy as np
import pytest

import ember
from ember.errors import EmberValueError, RegistryError
from ember.ir import Function, IRModule, TensorType, Tuple, Var, call
from ember.ir.evaluate import evaluate
from ember.runtime.artifact import Artifact
from ember.runtime.module import PythonModule
from ember.runtime.registry import remove_global_func
from ember.target import TargetKind, register_target_kind
from ember.target.kind import TARGET_KINDS

pytestmark = pytest.mark.cc

DEV = ember.cpu(0)
#: the kernels the 'pyext' hook compiled, by name (its "compiler" keeps them in memory)
_GROUPS: dict[str, Function] = {}


def _module() -> tuple[IRModule, dict[str, np.ndarray]]:
    x = Var("x", TensorType((2, 64), "float32"))
    w = Var("w", TensorType((2, 64), "float32"))
    h = call("relu", call("add", x, w))
    s = call("sum", call("sigmoid", h), axes=(1,), keepdims=True)
    body = Tuple((call("multiply", h, s), h))
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(2, 64)}
    return IRModule.from_expr(Function((x, w), body)), params


def _inputs() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((2, 64)).astype("float32")}


def _run(arts, kind: str) -> list[np.ndarray]:
    top = ember.load_artifacts(arts, DEV)
    ex = (ember.AotExecutor if kind == "aot" else ember.GraphExecutor)(top["default"](DEV))
    ex.set_input(**_inputs())
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


def test_packed_convention_looks_kernels_up_and_matches_the_graph_executor():
    mod, params = _module()
    arts = ember.build(mod, "c", params, executor="aot -calling-convention=packed")
    source = b"".join(a.content for a in arts if a.file_name.endswith(".c")).decode()
    assert 'EmberBackendGetFuncFromEnv(__ember_module_ctx, "ember_default_' in source
    want = _run(ember.build(mod, "c", params), "graph")
    got = _run(arts, "aot")
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    assert str(ember.Executor.create("aot -calling-convention=packed")) == (
        "aot -calling-convention=packed"
    )


def test_packed_convention_from_an_exported_library(tmp_path):
    mod, params = _module()
    arts = ember.build(mod, "c", params, executor="aot -calling-convention=packed")
    lib = ember.export_library(arts, tmp_path / "m.so")
    ex = ember.AotExecutor(ember.load_module(str(lib))["default"](DEV))
    ex.set_input(**_inputs())
    ex.run()
    want = _run(ember.build(mod, "c", params), "graph")
    np.testing.assert_array_equal(ex.get_output(0).numpy(), want[0])


def _compile_external(group: Function, name: str, target) -> Artifact:
    """relay_to_runtime: the kernel becomes an artifact of the 'pyext' loader."""
    _GROUPS[name] = group
    return Artifact("pyext", "pyext", f"{name}.txt", name.encode())


def _load_external(artifacts) -> PythonModule:
    """loadbinary_pyext: one Python function per kernel (the reference evaluator)."""

    def kernel(group: Function):
        def run(*tensors):
            n = len(group.params)
            outs = evaluate(group, [t.numpy() for t in tensors[:n]])
            for out, value in zip(tensors[n:], outs, strict=True):
                out.copyfrom(value)

        return run

    names = [a.content.decode() for a in artifacts]
    return PythonModule({n: kernel(_GROUPS[n]) for n in names if n != "missing"}, "pyext")


@pytest.fixture()
def pyext():
    ember.register_func("target.pyext.compile", _compile_external)
    ember.register_func("runtime.module.loadbinary_pyext", _load_external)
    register_target_kind(TargetKind("pyext", hooks={"relay_to_runtime": "target.pyext.compile"}))
    yield "pyext"
    TARGET_KINDS.unregister("pyext")
    remove_global_func("target.pyext.compile")
    remove_global_func("runtime.module.loadbinary_pyext")
    _GROUPS.clear()


def test_aot_calls_relay_to_runtime_kernels_through_the_runtime(pyext):
    mod, params = _module()
    want = _run(ember.build(mod, "c", params), "graph")
    graph = _run(ember.build(mod, pyext, params), "graph")
    arts = ember.build(mod, pyext, params, executor="aot")
    assert {a.codegen_id for a in arts} >= {"pyext"}
    aot = _run(arts, "aot")
    assert all(np.array_equal(a, b) for a, b in zip(aot, graph, strict=True))
    for a, b in zip(aot, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_a_missing_external_function_fails_the_run_naming_it(pyext):
    mod, params = _module()
    arts = ember.build(mod, pyext, params, executor="aot")
    renamed = [
        Artifact(a.codegen_id, a.loader, a.file_name, b"missing") if a.loader == "pyext" else a
        for a in arts
    ]
    top = ember.load_artifacts(ember.ArtifactSet(renamed), DEV)
    ex = ember.AotExecutor(top["default"](DEV))
    ex.set_input(**_inputs())
    with pytest.raises(RegistryError, match="has no function .ember_fused"):
        ex.run()


def test_the_c_interface_cannot_call_other_modules(pyext):
    mod, params = _module()
    with pytest.raises(EmberValueError, match="use -interface-api=packed"):
        ember.build(mod, pyext, params, executor="aot -interface-api=c")
