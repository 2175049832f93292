"""Target hooks (design document 003): an external 'library' plugs in at one stage and
still gets the rest of the pipeline (planning, executor, export)."""

import numpy as np
import pytest

import ember
from ember import tir
from ember.codegen.c import build_c
from ember.ir import Call, Function, IRModule, OpDef, TensorType, Tuple, Var, call, post_order
from ember.lowering.lower_group import lower_group
from ember.runtime.artifact import Artifact
from ember.runtime.registry import remove_global_func
from ember.target import TargetKind, register_target_kind
from ember.target.kind import TARGET_KINDS

pytestmark = pytest.mark.cc

LIB_SOURCE = b"""#include <stdint.h>
int32_t mylib_add(float* out, const float* a, const float* b, int32_t n) {
  for (int32_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  return 0;
}
"""

CALLS: list[str] = []


def _lower(group: Function, name: str, target) -> tir.PrimFunc:
    """relay_to_tir: a lone 'add' of same-shape tensors becomes a call into mylib."""
    calls = [n for n in post_order(group.body) if isinstance(n, Call)]
    is_add = len(calls) == 1 and isinstance(calls[0].op, OpDef) and calls[0].op.name == "add"
    same = is_add and all(p.type == group.ret_type for p in group.params)
    if not same:
        return lower_group(group, name, "c")
    CALLS.append(name)
    ty = group.ret_type
    assert isinstance(ty, TensorType)
    a = tir.decl_buffer(ty.shape, ty.dtype, "A")
    b = tir.decl_buffer(ty.shape, ty.dtype, "B")
    out = tir.decl_buffer(ty.shape, ty.dtype, "Out")
    body = tir.Evaluate(tir.call_extern("int32", "mylib_add", out.data, a.data, b.data, ty.size))
    return tir.PrimFunc(name, (a, b, out), body)


def _build(funcs, target):
    """tir_to_runtime: the C code generator plus the library's own source."""
    arts = list(build_c(funcs, {"opt_level": 2}))
    return [*arts, Artifact("mylib", "native", "mylib.c", LIB_SOURCE)]


@pytest.fixture()
def mylib_target():
    ember.register_func("target.mylib.lower", _lower)
    ember.register_func("target.mylib.build", _build)
    register_target_kind(
        TargetKind(
            "mylib",
            hooks={"relay_to_tir": "target.mylib.lower", "tir_to_runtime": "target.mylib.build"},
        )
    )
    CALLS.clear()
    yield "mylib"
    TARGET_KINDS.unregister("mylib")
    remove_global_func("target.mylib.lower")
    remove_global_func("target.mylib.build")


def test_relay_to_tir_and_tir_to_runtime_hooks(mylib_target, tmp_path):
    x = Var("x", TensorType((4, 8), "float32"))
    y = Var("y", TensorType((4, 8), "float32"))
    # the add goes to mylib, the relu through ember's own lowering, in one model
    body = Tuple((call("add", x, y), call("relu", x)))
    mod = IRModule.from_expr(Function((x, y), body))
    arts = ember.build(mod, target=mylib_target)
    assert CALLS, "the relay_to_tir hook was not used"
    assert any(a.codegen_id == "mylib" for a in arts)
    xv = np.random.default_rng(0).standard_normal((4, 8)).astype("float32")
    yv = np.random.default_rng(1).standard_normal((4, 8)).astype("float32")
    lib = ember.export_library(arts, tmp_path / "m.so")
    dev = ember.cpu(0)
    for factory in (ember.load_artifacts(arts, dev), ember.load_module(str(lib))):
        ge = ember.GraphExecutor(factory["default"](dev))
        ge.set_input("x", xv)
        ge.set_input("y", yv)
        ge.run()
        np.testing.assert_allclose(ge.get_output(0).numpy(), xv + yv, rtol=1e-6)
        np.testing.assert_allclose(ge.get_output(1).numpy(), np.maximum(xv, 0), rtol=1e-6)


def test_constant_updater_hook_sees_the_bound_module():
    seen = []

    def update(mod, target):
        seen.append(str(target))
        return mod

    ember.register_func("target.cu.update", update)
    register_target_kind(TargetKind("cu", hooks={"constant_updater": "target.cu.update"}))
    try:
        x = Var("x", TensorType((3,), "float32"))
        ember.build(IRModule.from_expr(Function((x,), call("relu", x))), target="cu")
        assert seen == ["cu"]
    finally:
        TARGET_KINDS.unregister("cu")
        remove_global_func("target.cu.update")
