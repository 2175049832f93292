"""simplify: batch-norm folding into conv/dense/matmul, no-op and merged layout ops."""

from __future__ import annotations

import numpy as np

from ember.ir import (
    Call,
    Constant,
    Function,
    IRModule,
    TensorType,
    Tuple,
    Var,
    call,
    const,
    post_order,
)
from ember.transform import fold_constant, simplify

F32 = "float32"


def _ops(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def _c(*shape: int, seed: int = 0, positive: bool = False) -> Constant:
    rng = np.random.default_rng(seed)
    data = rng.random(shape) + 0.5 if positive else rng.standard_normal(shape)
    return const(data.astype(F32))


def _bn(x, channels: int, axis: int = 1, seed: int = 10):  # type: ignore[no-untyped-def]
    stats = [_c(channels, seed=seed + i, positive=True) for i in range(4)]
    return call("nn.batch_norm", x, *stats, epsilon=1e-3, axis=axis)


def _conv(x, w, groups: int = 1):  # type: ignore[no-untyped-def]
    return call(
        "nn.conv", x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], groups=groups
    )


def test_bn_after_conv_folds_into_weights(same_results) -> None:
    x = Var("x", TensorType((2, 3, 5, 5), F32))
    mod = IRModule.from_expr(Function((x,), call("relu", _bn(_conv(x, _c(4, 3, 3, 3)), 4))))
    out = simplify(mod)
    assert _ops(out) == ["nn.conv", "add", "relu"]
    conv = out.main.body.args[0].args[0]
    assert isinstance(conv.args[1], Constant) and conv.args[1].type.shape == (4, 3, 3, 3)
    same_results(mod, out, rtol=1e-4)


def test_bn_after_conv_with_bias_and_groups(same_results) -> None:
    x = Var("x", TensorType((1, 4, 5, 5), F32))
    conv = _conv(x, _c(6, 2, 3, 3), groups=2)
    for biased in (call("add", conv, _c(6, 1, 1, seed=3)), call("add", _c(6, 1, 1, seed=3), conv)):
        mod = IRModule.from_expr(Function((x,), _bn(biased, 6)))
        out = simplify(mod)
        assert _ops(out) == ["nn.conv", "add"]
        same_results(mod, out, rtol=1e-4)


def test_bn_after_dense_and_matmul(same_results) -> None:
    x = Var("x", TensorType((3, 8), F32))
    dense = IRModule.from_expr(Function((x,), _bn(call("nn.dense", x, _c(5, 8)), 5)))
    out = simplify(dense)
    assert _ops(out) == ["nn.dense", "add"]
    same_results(dense, out, rtol=1e-4)
    mm = IRModule.from_expr(Function((x,), _bn(call("nn.matmul", x, _c(8, 5)), 5, axis=-1)))
    out = simplify(mm)
    assert _ops(out) == ["nn.matmul", "add"]
    same_results(mm, out, rtol=1e-4)


def test_bn_without_foldable_producer_becomes_scale_and_shift(same_results) -> None:
    x = Var("x", TensorType((2, 3, 4, 4), F32))
    lone = IRModule.from_expr(Function((x,), _bn(call("relu", x), 3)))
    out = simplify(lone)
    assert _ops(out) == ["relu", "multiply", "add"]
    same_results(lone, out, rtol=1e-4)
    # a conv with another user is not rewritten (that would compute it twice)
    conv = _conv(x, _c(3, 3, 3, 3))
    shared = IRModule.from_expr(Function((x,), call("add", _bn(conv, 3), conv)))
    out = simplify(shared)
    assert _ops(out) == ["nn.conv", "multiply", "add", "add"]
    same_results(shared, out, rtol=1e-4)
    # statistics that are not constants are left alone
    g = Var("g", TensorType((3,), F32))
    stats = [_c(3, seed=i, positive=True) for i in range(3)]
    dyn = IRModule.from_expr(Function((x, g), call("nn.batch_norm", x, g, *stats)))
    assert simplify(dyn) is dyn


def test_bn_on_last_axis_of_conv_output_is_not_folded_into_weights(same_results) -> None:
    x = Var("x", TensorType((1, 2, 4, 4), F32))
    mod = IRModule.from_expr(Function((x,), _bn(_conv(x, _c(2, 2, 3, 3)), 4, axis=3)))
    out = simplify(mod)
    assert _ops(out) == ["nn.conv", "multiply", "add"]
    same_results(mod, out, rtol=1e-4)


def test_noop_and_chained_layout_ops(same_results) -> None:
    x = Var("x", TensorType((2, 3, 4), F32))
    r = call("reshape", call("reshape", x, newshape=[6, 4]), newshape=[4, 6])
    same = call("reshape", r, newshape=[4, 6])
    t = call("transpose", call("transpose", same, axes=[1, 0]), axes=[1, 0])
    ident = call("transpose", t, axes=[0, 1])
    mod = IRModule.from_expr(Function((x,), call("cast", ident, dtype=F32)))
    out = simplify(mod)
    assert _ops(out) == ["reshape"]
    assert out.main.body.args[0] is x
    assert tuple(out.main.body.attrs["newshape"]) == (4, 6)
    same_results(mod, out)


def test_transpose_chain_composes_and_reshape_roundtrip_vanishes(same_results) -> None:
    x = Var("x", TensorType((2, 3, 4), F32))
    t = call("transpose", call("transpose", x, axes=[1, 2, 0]), axes=[2, 0, 1])
    t2 = call("transpose", call("transpose", x, axes=[2, 0, 1]), axes=[0, 2, 1])
    back = call("reshape", call("reshape", x, newshape=[24]), newshape=[2, 3, 4])
    body = Tuple((call("add", t, back), call("transpose", t2, axes=[1, 0, 2])))
    mod = IRModule.from_expr(Function((x,), body))
    out = fold_constant(simplify(mod))
    assert _ops(out) == ["add", "transpose"]  # t and back became x; three transposes merged
    assert out.main.body.fields[0].args == (x, x)
    assert tuple(out.main.body.fields[1].attrs["axes"]) == (1, 2, 0)
    same_results(mod, out)


def test_real_casts_are_kept() -> None:
    x = Var("x", TensorType((3,), F32))
    mod = IRModule.from_expr(Function((x,), call("cast", x, dtype="float16")))
    assert simplify(mod) is mod


def test_stacked_norms_and_noop_reshape_fold_over_rounds(same_results) -> None:
    x = Var("x", TensorType((1, 3, 4, 4), F32))
    conv = _conv(x, _c(4, 3, 3, 3))
    twice = IRModule.from_expr(Function((x,), _bn(_bn(conv, 4), 4, seed=20)))
    out = simplify(twice)
    assert _ops(out) == ["nn.conv", "add"]  # both norms end up in the weights and one bias
    same_results(twice, out, rtol=1e-4)
    through = call("reshape", conv, newshape=[1, 4, 4, 4])
    mod = IRModule.from_expr(Function((x,), _bn(through, 4)))
    out = simplify(mod)
    assert _ops(out) == ["nn.conv", "add"]
    same_results(mod, out, rtol=1e-4)


def test_per_channel_scale_folds_into_linear_ops(same_results) -> None:
    x = Var("x", TensorType((1, 3, 4, 4), F32))
    conv = _conv(x, _c(4, 3, 3, 3))
    for c in (_c(4, 1, 1, seed=5), _c(1, 4, 1, 1, seed=5), _c(1, 1, 1, seed=5)):
        mod = IRModule.from_expr(Function((x,), call("multiply", conv, c)))
        out = simplify(mod)
        assert _ops(out) == ["nn.conv"]
        same_results(mod, out, rtol=1e-4)
    biased = call("add", conv, _c(4, 1, 1, seed=6))
    mod = IRModule.from_expr(Function((x,), call("multiply", _c(4, 1, 1, seed=5), biased)))
    out = simplify(mod)
    assert _ops(out) == ["nn.conv", "add"]
    same_results(mod, out, rtol=1e-4)
    d = Var("d", TensorType((2, 8), F32))
    dense = IRModule.from_expr(
        Function((d,), call("multiply", call("nn.dense", d, _c(5, 8)), _c(5)))
    )
    out = simplify(dense)
    assert _ops(out) == ["nn.dense"]
    same_results(dense, out, rtol=1e-4)


def test_scales_that_are_not_per_channel_are_kept() -> None:
    x = Var("x", TensorType((1, 3, 4, 4), F32))
    conv = _conv(x, _c(4, 3, 3, 3))
    spatial = IRModule.from_expr(Function((x,), call("multiply", conv, _c(4, 4))))
    assert simplify(spatial) is spatial
    bigger = IRModule.from_expr(Function((x,), call("multiply", conv, _c(2, 4, 1, 1))))
    assert simplify(bigger) is bigger
    shared = IRModule.from_expr(
        Function((x,), call("add", call("multiply", conv, _c(4, 1, 1)), conv))
    )
    assert simplify(shared) is shared


def test_constant_add_and_multiply_chains_merge(same_results) -> None:
    x = Var("x", TensorType((2, 3), F32))
    adds = call("add", _c(3, seed=2), call("add", call("add", x, _c(3)), _c(2, 1, seed=1)))
    muls = call("multiply", call("multiply", _c(3, seed=3), x), _c(3, seed=4))
    mod = IRModule.from_expr(Function((x,), call("subtract", adds, muls)))
    out = simplify(mod)
    assert _ops(out) == ["add", "multiply", "subtract"]
    same_results(mod, out)


def test_bn_then_scale_layer_collapses_into_conv_and_one_bias(same_results) -> None:
    x = Var("x", TensorType((1, 3, 5, 5), F32))
    y = _bn(call("add", _conv(x, _c(4, 3, 3, 3)), _c(4, 1, 1, seed=7)), 4)
    y = call("add", call("multiply", y, _c(4, 1, 1, seed=8)), _c(4, 1, 1, seed=9))
    mod = IRModule.from_expr(Function((x,), call("relu", y)))
    out = simplify(mod)
    assert _ops(out) == ["nn.conv", "add", "relu"]
    same_results(mod, out, rtol=1e-4)


def test_scale_shift_chains_gather_into_one_multiply_and_add(same_results) -> None:
    x = Var("x", TensorType((1, 4, 3, 3), F32))
    y = call("add", call("multiply", x, _c(4, 1, 1, seed=1)), _c(4, 1, 1, seed=2))
    y = call("add", call("multiply", y, _c(4, 1, 1, seed=3)), _c(4, 1, 1, seed=4))
    mod = IRModule.from_expr(Function((x,), call("relu", y)))
    out = simplify(mod)
    assert _ops(out) == ["multiply", "add", "relu"]
    same_results(mod, out, rtol=1e-4)


def test_pytorch_group_norm_export_becomes_one_group_norm(same_results) -> None:
    """Reshape (N, G, -1), InstanceNormalization, Reshape back: one nn.group_norm whose
    per-channel scale and bias repeat the instance norm's per-group ones."""
    x = Var("x", TensorType((2, 6, 4, 5), F32))
    grouped = call("reshape", x, newshape=(2, 3, 40))
    norm = call("nn.instance_norm", grouped, _c(3, seed=1), _c(3, seed=2), epsilon=1e-3)
    mod = IRModule.from_expr(Function((x,), call("reshape", norm, newshape=(2, 6, 4, 5))))
    out = simplify(mod)
    assert _ops(out) == ["nn.group_norm"]
    (gn,) = [n for n in post_order(out.main.body) if isinstance(n, Call)]
    assert gn.attrs["num_groups"] == 3 and gn.attrs["epsilon"] == 1e-3
    same_results(mod, out)


def test_instance_norm_of_other_reshapes_is_kept() -> None:
    """Back to another shape, or with statistics computed at run time: no group norm."""
    x = Var("x", TensorType((1, 6, 4, 5), F32))
    norm = call("nn.instance_norm", call("reshape", x, newshape=(1, 3, 40)), _c(3), _c(3))
    flat = IRModule.from_expr(Function((x,), call("reshape", norm, newshape=(1, 120))))
    assert "nn.group_norm" not in _ops(simplify(flat))
    s = Var("s", TensorType((3,), F32))
    norm = call("nn.instance_norm", call("reshape", x, newshape=(1, 3, 40)), s, _c(3))
    body = call("reshape", norm, newshape=(1, 6, 4, 5))
    dynamic = IRModule.from_expr(Function((x, s), body))
    assert "nn.group_norm" not in _ops(simplify(dynamic))
