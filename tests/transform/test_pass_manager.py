"""Pass infrastructure: opt levels, required/disabled, registry, debug verification, report."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError, RegistryError
from ember.ir import Call, Function, IRModule, TensorType, Var, call, const, post_order
from ember.transform import (
    PASSES,
    Pass,
    PassContext,
    PassManager,
    Sequential,
    get_pass,
    module_pass,
    pipeline,
    register_pass,
)

T = TensorType((2, 3), "float32")


def _mod() -> IRModule:
    x = Var("x", T)
    folded = call("negative", const(np.ones((2, 3), np.float32)))
    dup = call("add", call("exp", x), call("exp", x))
    return IRModule.from_expr(Function((x,), call("add", dup, folded)))


def _ops(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def test_builtin_passes_and_levels() -> None:
    levels = {name: get_pass(name).opt_level for name in PASSES.names()}
    assert levels["fold_constant"] == 1
    assert levels["dead_code_elimination"] == 1
    assert levels["eliminate_common_subexpr"] == 2
    assert levels["simplify"] == 2
    assert levels["fuse_ops"] == 3


def test_opt_level_selects_passes() -> None:
    seq = pipeline(["fold_constant", "eliminate_common_subexpr"])
    ctx0 = PassContext(opt_level=0)
    assert _ops(seq(_mod(), ctx0)) == _ops(_mod())
    assert [(r.name, r.ran) for r in ctx0.report.records] == [
        ("fold_constant", False),
        ("eliminate_common_subexpr", False),
    ]
    assert _ops(seq(_mod(), PassContext(opt_level=1))) == ["exp", "exp", "add", "add"]
    assert _ops(seq(_mod(), PassContext(opt_level=2))) == ["exp", "add", "add"]


def test_required_and_disabled() -> None:
    seq = pipeline(["fold_constant", "eliminate_common_subexpr"])
    ctx = PassContext(opt_level=1, required=["eliminate_common_subexpr"])
    assert _ops(seq(_mod(), ctx)) == ["exp", "add", "add"]
    ctx = PassContext(opt_level=3, disabled=["fold_constant"])
    assert _ops(seq(_mod(), ctx)) == ["exp", "add", "negative", "add"]
    with pytest.raises(IRError, match="both required and disabled"):
        PassContext(required=["simplify"], disabled=["simplify"])
    with pytest.raises(RegistryError, match="unknown pass 'simplfy'.*simplify"):
        PassContext(disabled=["simplfy"])


def test_sequential_uses_its_opt_level_without_context() -> None:
    seq = Sequential([get_pass("eliminate_common_subexpr")], opt_level=1)
    assert _ops(seq(_mod())) == _ops(_mod())
    seq = Sequential([get_pass("eliminate_common_subexpr")], opt_level=2)
    assert _ops(seq(_mod())) == ["exp", "add", "negative", "add"]


def test_report_is_deterministic_apart_from_timings() -> None:
    tables = []
    for _ in range(2):
        pm = PassManager(opt_level=2)
        pm.run(_mod())
        tables.append(pm.report.table(timings=False))
        assert all(r.seconds >= 0 for r in pm.report.records)
        assert pm.report.total_seconds() >= 0
    assert tables[0] == tables[1]
    lines = tables[0].splitlines()
    assert lines[1].split() == ["fuse_qdq", "yes", "5", "->", "5"]  # nothing quantized
    assert lines[2].split() == ["fold_constant", "yes", "5", "->", "4"]
    assert "seconds" in pm.report.table()


def test_debug_mode_verifies_after_each_pass() -> None:
    def broken(mod: IRModule) -> IRModule:
        stray = Var("stray", T)  # not a parameter of main: ill-formed
        return IRModule.from_expr(Function(mod.main.params, call("relu", stray)))

    bad = module_pass(broken, opt_level=0, name="broken")
    seq = Sequential([get_pass("fold_constant"), bad])
    seq(_mod(), PassContext(debug=False))  # no verification: passes through silently
    with pytest.raises(IRError, match="after pass 'broken'.*%stray"):
        seq(_mod(), PassContext(debug=True))


def test_custom_pass_registration_and_duplicates() -> None:
    def drop_all(mod: IRModule) -> IRModule:
        """Replace main's body by its first parameter."""
        return IRModule.from_expr(Function(mod.main.params, mod.main.params[0]))

    p = module_pass(drop_all, opt_level=2, name="test_drop_all")
    assert p.doc == "Replace main's body by its first parameter."
    register_pass(p)
    try:
        with pytest.raises(RegistryError, match="already registered"):
            register_pass(p)
        out = pipeline(["test_drop_all"])(_mod())
        assert out.main.body is out.main.params[0]
        mod = _mod()
        assert p(mod).main.body is mod.main.params[0]  # a Pass is callable on its own
    finally:
        PASSES.unregister("test_drop_all")


def test_pass_returning_wrong_type_is_reported() -> None:
    bad = Pass("returns_none", 0, lambda mod, ctx: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(IRError, match="returns_none.*not an IRModule"):
        Sequential([bad])(_mod())


def test_fuse_ops_reads_max_depth_from_config() -> None:
    x = Var("x", T)
    y = x
    for _ in range(6):
        y = call("relu", y)
    mod = IRModule.from_expr(Function((x,), y))
    ctx = PassContext(opt_level=3, config={"fuse_ops.max_depth": 2})
    fused = pipeline(["fuse_ops"])(mod, ctx)
    groups = [n for n in post_order(fused.main.body) if isinstance(n, Call)]
    assert len(groups) == 3
