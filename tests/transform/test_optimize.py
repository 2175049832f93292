"""optimize: params bound, the standard pipeline at each opt level keeps results equal."""

from __future__ import annotations

import numpy as np

from ember.ir import Call, Function, IRModule, TensorType, Var, call, evaluate, post_order
from ember.ir.printer import astext
from ember.transform import PassContext, fuse_ops, optimize

F32 = "float32"


def _small_cnn() -> tuple[IRModule, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    x = Var("data", TensorType((1, 3, 8, 8), F32))
    params = {
        "w1": rng.standard_normal((8, 3, 3, 3)).astype(F32) * 0.3,
        "b1": rng.standard_normal((8, 1, 1)).astype(F32),
        "gamma": rng.random(8).astype(F32) + 0.5,
        "beta": rng.standard_normal(8).astype(F32),
        "mean": rng.standard_normal(8).astype(F32),
        "var": rng.random(8).astype(F32) + 0.5,
        "fc": rng.standard_normal((10, 8)).astype(F32),
    }
    v = {k: Var(k, TensorType(a.shape, F32)) for k, a in params.items()}
    conv = call(
        "nn.conv", x, v["w1"], strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], name="c1"
    )
    y = call("add", conv, v["b1"])
    y = call("nn.batch_norm", y, v["gamma"], v["beta"], v["mean"], v["var"], epsilon=1e-5)
    y = call("relu", y)
    y = call("nn.global_avg_pool", y)
    y = call("reshape", call("reshape", y, newshape=[1, 8, 1]), newshape=[1, 8])
    y = call("nn.dense", y, v["fc"])
    y = call("add", call("exp", y), call("exp", y))
    return IRModule.from_expr(Function((x, *v.values()), y)), params


def _ops(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def test_optimize_levels_keep_results() -> None:
    mod, params = _small_cnn()
    data = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(F32)
    want = evaluate(mod, {"data": data, **params})[0]
    expected_ops = {
        0: [
            "nn.conv",
            "add",
            "nn.batch_norm",
            "relu",
            "nn.global_avg_pool",
            "reshape",
            "reshape",
            "nn.dense",
            "exp",
            "exp",
            "add",
        ],
        1: [
            "nn.conv",
            "add",
            "nn.batch_norm",
            "relu",
            "nn.global_avg_pool",
            "reshape",
            "reshape",
            "nn.dense",
            "exp",
            "exp",
            "add",
        ],
        2: ["nn.conv", "add", "relu", "nn.global_avg_pool", "reshape", "nn.dense", "exp", "add"],
    }
    for level, ops in expected_ops.items():  # channels first: convert_layout has its tests
        nchw = PassContext(opt_level=level, debug=True, config={"convert_layout": "NCHW"})
        out = optimize(mod, params, ctx=nchw)
        assert [p.name for p in out.main.params] == ["data"]
        assert _ops(out) == ops, level
        np.testing.assert_allclose(evaluate(out, [data])[0], want, rtol=1e-4, atol=1e-4)
    default = optimize(mod, params)  # level 2: the conv channels last between transposes
    convs = [
        n for n in post_order(default.main.body) if isinstance(n, Call) and n.op_name == "nn.conv"
    ]
    assert [n.attrs["data_layout"] for n in convs] == ["NHWC"]
    fused = fuse_ops(default)
    np.testing.assert_allclose(evaluate(fused, [data])[0], want, rtol=1e-4, atol=1e-4)


def test_optimize_reports_through_context_and_is_deterministic() -> None:
    mod, params = _small_cnn()
    ctx = PassContext(opt_level=2)
    out = optimize(mod, params, ctx=ctx)
    assert [r.name for r in ctx.report.records] == [
        "fuse_qdq",
        "fold_constant",
        "simplify",
        "fold_constant",
        "convert_layout",
        "eliminate_common_subexpr",
        "dead_code_elimination",
    ]
    assert astext(out) == astext(optimize(mod, params))
    assert optimize(mod, opt_level=0) is mod
