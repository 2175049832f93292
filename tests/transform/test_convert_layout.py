"""convert_layout: the NHWC rewrite of small graphs (where the transposes go, what the ops
become), its selection through the PassContext, and equality with the unconverted graph
(reference evaluator here; compiled in tests/ops/test_nn_conv_nhwc.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from ember.driver.pipeline import _channels_last_host
from ember.errors import IRError
from ember.ir import (
    Call,
    Expr,
    Function,
    IRModule,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    call,
    const,
    evaluate,
    post_order,
)
from ember.target import Target
from ember.transform import PassContext, convert_layout, get_pass, optimize
from ember.transform.convert_layout import DEFAULT_LEVEL, permute_constant

F32 = "float32"
TO_LAST = [0, 2, 3, 1]
TO_FIRST = [0, 3, 1, 2]


def _w(*shape: int, seed: int = 0) -> Expr:
    return const(np.random.default_rng(seed).standard_normal(shape).astype(F32))


def _conv(x: Expr, cin: int, cout: int, k: int = 3, seed: int = 0, groups: int = 1) -> Call:
    p = k // 2
    w = _w(cout, cin // groups, k, k, seed=seed)
    return call("nn.conv", x, w, padding=[p, p, p, p], groups=groups)


def _x(c: int = 4, h: int = 6, w: int = 6) -> Var:
    return Var("x", TensorType((1, c, h, w), F32))


def _calls(mod: IRModule) -> list[Call]:
    return [n for n in post_order(mod.main.body) if isinstance(n, Call)]


def _count(mod: IRModule) -> Counter[str]:
    return Counter(n.op_name for n in _calls(mod))


def _transposes(mod: IRModule) -> list[tuple[int, ...]]:
    return [tuple(n.attrs["axes"]) for n in _calls(mod) if n.op_name == "transpose"]


def _check_same(mod: IRModule, out: IRModule, x: Var, rtol: float = 1e-5) -> None:
    data = np.random.default_rng(7).standard_normal(x.type.shape).astype(F32)  # type: ignore[union-attr]
    want = evaluate(mod, [data])
    got = evaluate(out, [data])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)


def _run(body: Expr, x: Var) -> tuple[IRModule, IRModule]:
    mod = IRModule({"main": Function((x,), body)})
    out = convert_layout(mod)
    _check_same(mod, out, x)
    return mod, out


def test_conv_relu_conv_is_one_chain_with_transposes_at_its_borders() -> None:
    x = _x()
    _, out = _run(_conv(call("relu", _conv(x, 4, 8)), 8, 8, seed=1), x)
    assert _transposes(out) == [tuple(TO_LAST), tuple(TO_FIRST)]
    convs = [n for n in _calls(out) if n.op_name == "nn.conv"]
    assert [c.attrs["data_layout"] for c in convs] == ["NHWC", "NHWC"]
    assert out.main.body.type == TensorType((1, 8, 6, 6), F32)


def test_residual_add_and_per_channel_constants_stay_channels_last() -> None:
    x = _x()
    a = call("relu", call("add", _conv(x, 4, 8), _w(8, 1, 1, seed=2)))
    b = call("multiply", _conv(a, 8, 8, seed=3), _w(1, 8, 1, 1, seed=4))
    _, out = _run(call("add", a, b), x)
    assert _transposes(out) == [tuple(TO_LAST), tuple(TO_FIRST)]
    consts = [n.args[1] for n in _calls(out) if n.op_name in ("add", "multiply")]
    shapes = [c.type.shape for c in consts if c.type.ndim == 4 and c.type.shape[1] == 1]
    assert shapes == [(1, 1, 1, 8), (1, 1, 1, 8)]


def test_permute_constant_broadcasts_like_the_nchw_one() -> None:
    c = np.arange(6, dtype=F32).reshape(6, 1, 1)
    x = np.random.default_rng(0).standard_normal((2, 6, 3, 4)).astype(F32)
    got = x.transpose(TO_LAST) + permute_constant(c)
    np.testing.assert_array_equal(got, (x + c).transpose(TO_LAST))
    assert permute_constant(np.float32(2.0)).shape == (1, 1, 1, 1)


def test_concat_on_channels_becomes_the_last_axis() -> None:
    x = _x()
    a, b = _conv(x, 4, 8), _conv(x, 4, 8, seed=5)
    _, out = _run(_conv(call("concatenate", a, b, axis=1), 16, 8, seed=6), x)
    (cat,) = [n for n in _calls(out) if n.op_name == "concatenate"]
    assert cat.attrs["axis"] == 3
    assert len(_transposes(out)) == 2


def test_split_and_slice_on_channels_are_remapped() -> None:
    x = _x()
    parts = call("split", _conv(x, 4, 8), sizes=[3, 5], axis=1)
    a = call("relu", TupleGetItem(parts, 0))
    s = call("strided_slice", _conv(x, 4, 8, seed=2), begin=[0, 1, 0, 0], end=[1, 4, 6, 6],
             strides=[1, 1, 1, 1])  # fmt: skip
    _, out = _run(call("add", a, s), x)
    (sp,) = [n for n in _calls(out) if n.op_name == "split"]
    (sl,) = [n for n in _calls(out) if n.op_name == "strided_slice"]
    assert sp.attrs["axis"] == 3
    assert tuple(sl.attrs["begin"]) == (0, 0, 0, 1) and tuple(sl.attrs["end"]) == (1, 6, 6, 4)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("nn.max_pool", {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1]}),
        ("nn.avg_pool", {"pool_size": [2, 2], "strides": [2, 2]}),
        ("nn.global_avg_pool", {}),
        ("nn.global_max_pool", {}),
    ],
)
def test_pools_take_the_channels_last_form(op: str, attrs: dict) -> None:
    x = _x()
    _, out = _run(call(op, call("relu", _conv(x, 4, 8)), **attrs), x)
    (pool,) = [n for n in _calls(out) if n.op_name == op]
    assert pool.attrs["data_layout"] == "NHWC"
    assert _transposes(out)[-1] == tuple(TO_FIRST)


def test_se_block_scale_joins_the_chain() -> None:
    x = _x(8)
    y = call("relu", _conv(x, 8, 8))
    s = call("hard_sigmoid", _conv(call("nn.global_avg_pool", y), 8, 8, k=1, seed=3))
    _, out = _run(_conv(call("multiply", y, s), 8, 8, seed=4), x)
    assert len(_transposes(out)) == 2


def test_resize_permutes_sizes_and_scales() -> None:
    x = _x()
    up = call("image.resize", _conv(x, 4, 8), sizes=[1, 8, 12, 12], scales=[1.0, 1.0, 2.0, 2.0],
              method="linear")  # fmt: skip
    _, out = _run(_conv(up, 8, 4, seed=2), x)
    (rs,) = [n for n in _calls(out) if n.op_name == "image.resize"]
    assert tuple(rs.attrs["sizes"]) == (1, 12, 12, 8)
    assert tuple(rs.attrs["scales"]) == (1.0, 2.0, 2.0, 1.0)
    assert len(_transposes(out)) == 2


def test_depthwise_chain() -> None:
    x = _x(8)
    y = call("clip", _conv(x, 8, 8, groups=8), a_min=0.0, a_max=6.0)
    _, out = _run(_conv(_conv(y, 8, 16, k=1, seed=1), 16, 16, groups=16, seed=2), x)
    assert _count(out)["transpose"] == 2
    assert all(n.attrs["data_layout"] == "NHWC" for n in _calls(out) if n.op_name == "nn.conv")


def test_group_norm_joins_the_chain() -> None:
    x = _x(c=8)
    gn = call("nn.group_norm", _conv(x, 8, 8), _w(8, seed=2), _w(8, seed=3), num_groups=4)
    _, out = _run(_conv(call("relu", gn), 8, 8, seed=1), x)
    assert _transposes(out) == [tuple(TO_LAST), tuple(TO_FIRST)]
    (norm,) = [n for n in _calls(out) if n.op_name == "nn.group_norm"]
    assert norm.attrs["data_layout"] == "NHWC"


def test_nwc_into_a_conv1d_is_a_reshape_and_instance_norm_a_group_norm() -> None:
    """transpose(NWC -> NCW) then a conv: no transpose, the NWC tensor gains a unit H; an
    instance norm of a channels-last value is a group norm of one channel a group."""
    x = Var("x", TensorType((1, 20, 8), F32))
    a = call("nn.conv", call("transpose", x, axes=(0, 2, 1)), _w(8, 8, 3), padding=(1, 1))
    a = call("nn.instance_norm", a, _w(8, seed=2), _w(8, seed=3))
    _, out = _run(call("nn.conv", a, _w(8, 8, 3, seed=1)), x)
    assert _transposes(out) == [(0, 2, 1)]  # the way back to NCW at the end
    (norm,) = [n for n in _calls(out) if n.op_name == "nn.group_norm"]
    assert norm.attrs["num_groups"] == 8 and norm.attrs["data_layout"] == "NHWC"


def test_an_op_without_a_channels_last_form_reads_through_one_transpose() -> None:
    x = _x()
    y = _conv(x, 4, 8)
    soft = call("nn.softmax", y, axis=1)  # no NHWC form: the border
    _, out = _run(Tuple((soft, y)), x)
    assert _transposes(out).count(tuple(TO_FIRST)) == 1  # shared by softmax and the result
    (sm,) = [n for n in _calls(out) if n.op_name == "nn.softmax"]
    assert sm.args[0].op_name == "transpose"  # type: ignore[attr-defined]


def test_graphs_without_1d_or_2d_float_convs_are_unchanged() -> None:
    x = Var("x", TensorType((1, 4, 6, 6, 6), F32))
    mod = IRModule({"main": Function((x,), call("nn.conv", x, _w(8, 4, 3, 3, 3)))})
    assert convert_layout(mod) is mod
    x = Var("x", TensorType((1, 4, 10), "float64"))
    w = const(np.ones((8, 4, 3), "float64"))
    mod = IRModule({"main": Function((x,), call("nn.conv", x, w))})
    assert convert_layout(mod) is mod
    x = Var("x", TensorType((1, 4, 10), F32))
    mod = IRModule({"main": Function((x,), call("nn.conv", x, _w(8, 4, 3)))})
    assert convert_layout(mod, "NCHW") is mod


def test_conv1d_chain_runs_as_2d_convs_under_a_unit_h() -> None:
    """NCW convs (audio front ends): (N, 1, W, C) values, (O, I, 1, k) weights, the
    padding, strides and dilation extended; per-channel constants, a channel concat and
    slice, a group norm and a transpose to NWC stay in the chain."""
    x = Var("x", TensorType((1, 4, 20), F32))
    a = call("nn.conv", x, _w(8, 4, 3), padding=(1, 1))
    a = call("nn.group_norm", a, _w(8, seed=5), _w(8, seed=6), num_groups=2)
    a = call("relu", call("add", a, _w(8, 1, seed=2)))
    b = call("nn.conv", a, _w(8, 8, 3, seed=1), strides=(2,), dilation=(2,), padding=(2, 1))
    c = call(
        "concatenate",
        b,
        call("strided_slice", a, begin=(0, 0, 0), end=(1, 8, 20), strides=(1, 1, 2)),
        axis=1,
    )
    _, out = _run(call("transpose", c, axes=(0, 2, 1)), x)
    convs = [n for n in _calls(out) if n.op_name == "nn.conv"]
    assert [c.args[1].type.shape for c in convs] == [(8, 4, 1, 3), (8, 8, 1, 3)]
    assert convs[1].attrs["padding"] == (0, 2, 0, 1) and convs[1].attrs["strides"] == (1, 2)
    assert _transposes(out) == [tuple(TO_LAST)]  # the input's; NWC is a reshape
    assert out.main.body.op_name == "reshape"


def test_unknown_layout_says_what_is_known() -> None:
    x = _x()
    mod = IRModule({"main": Function((x,), _conv(x, 4, 8))})
    with pytest.raises(IRError, match="unknown layout 'NCHW8c'; known: NCHW, NHWC"):
        convert_layout(mod, "NCHW8c")
    with pytest.raises(IRError, match="unknown layout"):
        optimize(mod, ctx=PassContext(config={"convert_layout": "NCHW8c"}))


def _optimized(ctx: PassContext) -> IRModule:
    x = _x()
    return optimize(IRModule({"main": Function((x,), _conv(x, 4, 8))}), ctx=ctx)


def test_selected_by_config_or_required_and_on_by_default_from_level_2() -> None:
    assert DEFAULT_LEVEL == 2 and get_pass("convert_layout").opt_level == 1
    assert _count(_optimized(PassContext(opt_level=2)))["transpose"] == 2
    assert "transpose" not in _count(_optimized(PassContext(opt_level=1)))
    on = PassContext(config={"convert_layout": "NHWC"})
    assert _count(_optimized(on))["transpose"] == 2
    assert [r.name for r in on.report.records if r.ran][-3] == "convert_layout"
    assert "transpose" not in _count(_optimized(PassContext(config={"convert_layout": "NCHW"})))
    level1 = PassContext(opt_level=1, config={"convert_layout": "NHWC"})
    assert _count(_optimized(level1))["transpose"] == 2
    assert _count(_optimized(PassContext(required=("convert_layout",))))["transpose"] == 2
    off = PassContext(config={"convert_layout": "NHWC"}, disabled=("convert_layout",))
    assert "transpose" not in _count(_optimized(off))
    assert "convert_layout" not in [r.name for r in off.report.records if r.ran]


def test_build_default_nhwc_only_on_wide_x86_targets_without_hooks_or_externals() -> None:
    """The build driver keeps NCHW where NHWC chains are unmeasured (other CPUs) or where
    hooks and external kinds expect the convolutions as imported (pipeline.lower)."""
    assert _channels_last_host(Target.create("c -mcpu=haswell"))
    assert _channels_last_host(Target.create("llvm -mcpu=haswell"))
    assert not _channels_last_host(Target.create("llvm -mtriple=aarch64-linux-gnu"))
    assert not _channels_last_host(Target.create("c -mcpu=x86-64"))  # 128-bit vectors
    assert not _channels_last_host(Target.create("openblas, c -mcpu=haswell"))


def test_convs_the_legalizer_cannot_pack_stay_channels_first() -> None:
    """A conv of 4 or 12 output channels (no block of 8 or 16 fits) would run NCHW between two
    transposes: the pass leaves it, and the chain around it, as imported."""
    x = _x(3)
    for cout in (4, 12):
        mod = IRModule({"main": Function((x,), call("relu", _conv(x, 3, cout)))})
        assert "transpose" not in _count(convert_layout(mod))
    grouped = IRModule({"main": Function((_x(8),), _conv(_x(8), 8, 12, groups=2))})
    assert "transpose" not in _count(convert_layout(grouped))


def test_a_models_own_moves_of_the_channels_cancel() -> None:
    """ConvNeXt's block: depthwise conv, transpose to NHWC, LayerNorm and an MLP over the
    channels, transpose back, residual add, conv: no transpose but the graph's borders."""
    x = _x(c=16)
    a = _conv(x, 16, 16, 3)
    y = call("transpose", _conv(a, 16, 16, 7, seed=1, groups=16), axes=TO_LAST)
    y = call("nn.layer_norm", y, _w(16, seed=2), _w(16, seed=3), axis=-1)
    y = call("nn.matmul", y, _w(16, 32, seed=4))
    y = call("nn.matmul", call("relu", y), _w(32, 16, seed=5))
    y = call("add", a, call("transpose", y, axes=TO_FIRST))
    _, out = _run(_conv(y, 16, 16, 1, seed=6), x)
    assert _transposes(out) == [tuple(TO_LAST), tuple(TO_FIRST)]
