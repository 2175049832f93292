"""Grouped convolutions whose groups do not pack (ember.ops.nn_conv_groups): the rule
(ember.ir.ops.nn_conv_weights.split_block), the legalizer's split into one packed
convolution per group, channels last through convert_layout, and compiled results."""

from __future__ import annotations

import numpy as np
import pytest

from ember.driver import build
from ember.ir import (
    Attrs,
    Call,
    Function,
    IRModule,
    TensorType,
    Var,
    call,
    const,
    evaluate,
    post_order,
)
from ember.ir.ops import nn_conv_weights
from ember.ir.ops.nn_conv_weights import MAX_SPLIT_GROUPS, split_block
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_groups
from ember.ops.nn_conv import conv_to_packed
from ember.ops.nn_conv_pack import to_packed
from ember.testing.runners import run_artifacts
from ember.transform import PassContext, convert_layout


def _w(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 0.2).astype(np.float32)


def test_split_block_rule() -> None:
    # ShuffleNet v1's 1x1s: 4 groups of 68 and 34 outputs in blocks of 16 (80 and 48:
    # padded by less than a third, SPLIT_WIDE); 20 outputs in blocks of 8 (24, not 32)
    assert split_block((272, 68, 1, 1), 4) == 16
    assert split_block((136, 34, 1, 1), 4) == 16
    assert split_block((60, 20, 1, 1), 3) == 8
    assert split_block((28, 6, 3, 3), 2) == 16  # 14 a group: one block of 16
    # groups that pack in blocks of 8 only, for blocks of 16 that pad them by 1/8 at most
    assert split_block((544, 136, 1, 1), 4) == 16  # 144
    assert split_block((96, 24, 1, 1), 4) == 0  # 32: a third more
    # groups that pack in blocks of 16, depthwise, one group, too many, too much padding
    assert split_block((512, 128, 1, 1), 4) == 0
    assert split_block((16, 1, 3, 3), 16) == 0
    assert split_block((68, 68, 1, 1), 1) == 0
    assert split_block((68 * 16, 68, 1, 1), 16) == 0 and MAX_SPLIT_GROUPS < 16
    assert split_block((16, 4, 3, 3), 4) == 0  # 4 outputs a group: half a block of 8
    assert split_block((12, 2, 3, 3), 2) == 0  # 6 a group: a quarter of 8


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_legalizer_splits_into_packed_groups(layout: str) -> None:
    shape = (1, 272, 5, 6) if layout == "NCHW" else (1, 5, 6, 272)
    x = Var("x", TensorType(shape, "float32"))
    node = call("nn.conv", x, const(_w((272, 68, 1, 1))), groups=4, data_layout=layout)
    out = conv_to_packed(node)
    assert isinstance(out, Call) and out.op_name == "concatenate"
    parts = out.args
    assert len(parts) == 4
    for part in parts:
        assert part.op_name == "nn.conv_packed" and int(part.attrs["groups"]) == 1
        assert part.args[1].data.shape[-1] == 16 and int(part.attrs["channels"]) == 68
    assert out.type == node.type
    data = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    want = evaluate(Function((x,), node), [data])[0]
    got = evaluate(Function((x,), out), [data])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_switch_off_keeps_the_grouped_conv(monkeypatch: pytest.MonkeyPatch) -> None:
    x = Var("x", TensorType((1, 136, 4, 4), "float32"))
    node = call("nn.conv", x, const(_w((136, 34, 1, 1))), groups=4)
    monkeypatch.setattr(nn_conv_groups, "SPLIT_GROUPS", False)
    assert conv_to_packed(node) is node


def test_convert_layout_lays_split_convs_out_channels_last() -> None:
    x = Var("x", TensorType((1, 136, 6, 6), "float32"))
    body = call("relu", call("nn.conv", x, const(_w((136, 34, 1, 1))), groups=4))
    out = convert_layout(IRModule({"main": Function((x,), body)}))
    convs = [n for n in _calls(out.main.body) if n.op_name == "nn.conv"]
    assert [c.attrs["data_layout"] for c in convs] == ["NHWC"]


def _calls(body) -> list[Call]:
    return [n for n in post_order(body) if isinstance(n, Call)]


def test_split_block_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nn_conv_weights, "SPLIT_WIDE", False)
    assert split_block((272, 68, 1, 1), 4) == 8  # 72: the least padding
    assert split_block((136, 34, 1, 1), 4) == 8  # 40
    monkeypatch.setattr(nn_conv_weights, "SPLIT_NARROW", False)
    assert split_block((544, 136, 1, 1), 4) == 0  # packs in blocks of 8 as it is


def test_stores_of_partial_blocks_are_straight_code() -> None:
    """A split group of 34 channels (3 blocks of 16, the last partial) on flattened tiles of
    several blocks: the tile's stores unrolled (FLAT_UNROLL_STORES), each block's lanes one
    guarded vector; 48 channels (no partial block) keep the loops."""
    texts = {}
    for cout in (34, 48):
        x = Var("x", TensorType((1, 28, 28, 34), "float32"))
        node = call("nn.conv", x, const(_w((cout, 34, 1, 1))), data_layout="NHWC")
        packed = to_packed(node, 16)
        wp = Var("wp", TensorType(packed.args[1].data.shape, "float32"))
        body = call(packed.op_name, x, wp, **dict(packed.attrs))
        func = Function((x, wp), body, Attrs({"Primitive": 1}))
        texts[cout] = str(lower_group(func, "kernel", "c -mcpu=x86-64-v4"))
    assert "h_w_fused_inner in unrolled(" in texts[34]
    assert "h_w_fused_inner in unrolled(" not in texts[48]


def _shuffle_unit(x: Var, c: int, groups: int, seed: int) -> Call:
    """ShuffleNet's unit: grouped 1x1, ReLU, channel shuffle, depthwise 3x3, grouped 1x1,
    residual add."""
    y = call("nn.conv", x, const(_w((c, c // groups, 1, 1), seed)), groups=groups)
    y = call("relu", call("add", y, const(_w((1, c, 1, 1), seed + 1))))
    n, _, h, w = x.type.shape
    y = call("reshape", y, newshape=(n, groups, c // groups, h, w))
    y = call("transpose", y, axes=(0, 2, 1, 3, 4))
    y = call("reshape", y, newshape=(n, c, h, w))
    y = call("nn.conv", y, const(_w((c, 1, 3, 3), seed + 2)), groups=c, padding=[1, 1, 1, 1])
    y = call("nn.conv", y, const(_w((c, c // groups, 1, 1), seed + 3)), groups=groups)
    return call("relu", call("add", y, x))


@pytest.mark.cc
@pytest.mark.parametrize(
    ("c", "groups", "layout"),
    [(272, 4, "NHWC"), (136, 4, "NHWC"), (60, 3, "NHWC"), (544, 4, "NHWC"), (272, 4, "NCHW")],
)
def test_shuffle_units_compile_and_match(c: int, groups: int, layout: str) -> None:
    x = Var("x", TensorType((1, c, 7, 7), "float32"))
    body = _shuffle_unit(x, c, groups, seed=c)
    mod = IRModule({"main": Function((x,), body)})
    data = np.random.default_rng(2).standard_normal((1, c, 7, 7)).astype(np.float32)
    want = evaluate(mod, [data])[0]
    ctx = PassContext(opt_level=3, config={"convert_layout": layout})
    got = run_artifacts(build(mod, "c", pass_context=ctx), {"x": data})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
