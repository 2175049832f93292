"""Stages as objects: ember.lower -> Lowered (printable, reusable) -> compile()."""

import numpy as np
import pytest

import ember
from ember.errors import CompileError, EmberValueError
from ember.ir import Function, IRModule, TensorType, Var, call
from ember.runtime.registry import remove_global_func
from ember.target import Target, TargetKind, register_target_kind
from ember.target.kind import TARGET_KINDS
from ember.testing import run_artifacts
from ember.transform import PassContext


def _chain() -> IRModule:
    x = Var("x", TensorType((2, 64), "float32"))
    y = call("sigmoid", call("relu", call("add", x, x)))
    z = call("sum", y, axes=(1,), keepdims=True)
    return IRModule.from_expr(Function((x,), call("multiply", z, z)))


def test_lowered_holds_every_stage_and_prints_them():
    lowered = ember.lower(_chain(), "c")
    assert isinstance(lowered, ember.Lowered)
    assert lowered.target == Target.create("c") and lowered.executor.kind == "graph"
    assert len(lowered.prim_funcs) == len(lowered.plan.kernels) >= 1
    assert not lowered.external
    text = lowered.as_text()
    for part in ("## fused IR", "Primitive=1", "## graph", "input x", "## kernel"):
        assert part in text
    for func in lowered.prim_funcs:
        assert f"## kernel {func.name}" in text
    assert "fuse_ops" in lowered.pass_report.table(timings=False)


@pytest.mark.cc
def test_compile_is_build_and_runs():
    lowered = ember.lower(_chain(), "c")
    arts = lowered.compile()
    assert [a.content for a in arts] == [a.content for a in ember.build(_chain(), "c")]
    assert [a.content for a in lowered.compile()] == [a.content for a in arts]  # reusable
    x = np.random.default_rng(0).standard_normal((2, 64)).astype("float32")
    s = (1 / (1 + np.exp(-np.maximum(2 * x, 0)))).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(run_artifacts(arts, {"x": x})[0], s * s, rtol=1e-5)


def test_fusion_depth_and_disabled_passes_come_from_the_pass_context():
    fused = ember.lower(_chain(), "c")
    one = ember.lower(_chain(), "c", pass_context=PassContext(config={"fuse_ops.max_depth": 1}))
    off = ember.lower(_chain(), "c", pass_context=PassContext(disabled=("fuse_ops",)))
    level0 = ember.lower(_chain(), "c", opt_level=0)
    assert len(fused.plan.kernels) < len(one.plan.kernels)
    assert len(off.plan.kernels) == len(one.plan.kernels) == len(level0.plan.kernels)
    skipped = PassContext(disabled=("simplify",))
    ember.lower(_chain(), "c", pass_context=skipped)
    assert "simplify                     no" in skipped.report.table(timings=False)


def test_bad_executor_and_mod_name():
    with pytest.raises(EmberValueError, match="unknown executor 'vm'; known: graph, aot"):
        ember.lower(_chain(), "c", executor="vm")
    with pytest.raises(EmberValueError, match="C identifier"):
        ember.lower(_chain(), "c", mod_name="a-b")


def test_a_target_without_any_code_generator_is_refused():
    register_target_kind(TargetKind("bare", hooks={}))
    try:
        lowered = ember.lower(_chain(), Target.create("bare", host="bare"))
        with pytest.raises(CompileError, match="no tir_to_runtime hook"):
            lowered.compile()
    finally:
        TARGET_KINDS.unregister("bare")


def test_kind_without_codegen_uses_its_host_target():
    seen = []

    def build(funcs, target):
        seen.append(str(target))
        return ember.get_global_func("target.build.c")(funcs, Target.create("c"))

    ember.register_func("target.build.spy", build)
    register_target_kind(TargetKind("spy", hooks={"tir_to_runtime": "target.build.spy"}))
    register_target_kind(TargetKind("guest", hooks={}))
    try:
        host = Target.create("spy")
        ember.lower(_chain(), Target.create("guest", host=host)).compile()
        assert seen == ["spy"]
    finally:
        TARGET_KINDS.unregister("spy")
        TARGET_KINDS.unregister("guest")
        remove_global_func("target.build.spy")
