"""fuse_ops: TVM-like groups on conv blocks, norm-like patterns, opaque ops, depth limits."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import (
    Call,
    Constant,
    Function,
    IRModule,
    TensorType,
    TupleGetItem,
    Var,
    call,
    const,
    post_order,
)
from ember.ir.structural import structural_equal
from ember.ir.verify import verify
from ember.transform import fuse_ops

F32 = "float32"


def _groups(mod: IRModule) -> list[list[str]]:
    """The op names of each primitive function called by main, in call order."""
    out = []
    for node in post_order(mod.main.body):
        if isinstance(node, Call) and isinstance(node.op, Function):
            assert node.op.attrs["Primitive"] == 1
            out.append([n.op_name for n in post_order(node.op.body) if isinstance(n, Call)])
        elif isinstance(node, Call):
            raise AssertionError(f"unfused op {node.op_name} left in main")
    return out


def _w(*shape: int, seed: int = 0) -> Constant:
    return const(np.random.default_rng(seed).standard_normal(shape).astype(F32))


def _conv(x, w):  # type: ignore[no-untyped-def]
    return call("nn.conv", x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1])


def _residual_block() -> IRModule:
    x = Var("data", TensorType((1, 4, 6, 6), F32))
    y = call("relu", call("add", _conv(x, _w(4, 4, 3, 3)), _w(4, 1, 1, seed=1)))
    y = call("add", call("add", _conv(y, _w(4, 4, 3, 3, seed=2)), _w(4, 1, 1, seed=3)), x)
    return IRModule.from_expr(Function((x,), call("relu", y)))


def test_conv_bias_relu_residual_block(same_results) -> None:
    mod = _residual_block()
    fused = fuse_ops(mod)
    assert _groups(fused) == [["nn.conv", "add", "relu"], ["nn.conv", "add", "add", "relu"]]
    same_results(mod, fused)


def test_group_params_are_inputs_and_weights() -> None:
    fused = fuse_ops(_residual_block())
    calls = [n for n in post_order(fused.main.body) if isinstance(n, Call)]
    first, second = calls
    assert [p.name for p in first.op.params] == ["p0", "p1", "p2"]
    assert first.args[0] is fused.main.params[0]
    assert isinstance(first.args[1], Constant) and first.args[1].type.shape == (4, 4, 3, 3)
    assert second.args[0] is first  # the second group reads the first group's output
    assert second.args[-1] is fused.main.params[0]  # residual input


def test_layer_norm_like_pattern(same_results) -> None:
    x = Var("x", TensorType((4, 16), F32))
    m1 = call("mean", x, axes=[1], keepdims=True)
    d = call("subtract", x, m1)
    m2 = call("mean", call("multiply", d, d), axes=[1], keepdims=True)
    s = call("sqrt", call("add", m2, const(np.float32(1e-5))))
    y = call("add", call("multiply", call("divide", d, s), _w(16)), _w(16, seed=1))
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert _groups(fused) == [
        ["mean"],
        ["subtract"],
        ["multiply", "mean"],
        ["add", "sqrt", "divide", "multiply", "add"],
    ]
    same_results(mod, fused)


def test_softmax_like_pattern(same_results) -> None:
    x = Var("x", TensorType((3, 10), F32))
    m = call("max", x, axes=[1], keepdims=True)
    e = call("exp", call("subtract", x, m))
    y = call("divide", e, call("sum", e, axes=[1], keepdims=True))
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert _groups(fused) == [["max"], ["subtract", "exp"], ["sum"], ["divide"]]
    same_results(mod, fused)


def test_reduction_takes_injective_inputs(same_results) -> None:
    x = Var("x", TensorType((2, 3, 4), F32))
    t = call("transpose", call("exp", x), axes=[0, 2, 1])
    y = call("sum", call("reshape", t, newshape=[2, 12]), axes=[1], keepdims=False)
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert _groups(fused) == [["exp", "transpose", "reshape", "sum"]]
    same_results(mod, fused)


def test_opaque_ops_stay_alone(same_results) -> None:
    x = Var("x", TensorType((2, 8), F32))
    y = call("relu", call("nn.softmax", call("exp", x), axis=-1))
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert _groups(fused) == [["exp"], ["nn.softmax"], ["relu"]]
    same_results(mod, fused)


def test_dense_epilogue_and_no_fusion_into_anchor_inputs(same_results) -> None:
    x = Var("x", TensorType((2, 8), F32))
    h = call("nn.dense", call("sigmoid", x), _w(5, 8))
    y = call("tanh", call("add", h, _w(5, seed=1)))
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert _groups(fused) == [["sigmoid"], ["nn.dense", "add", "tanh"]]
    same_results(mod, fused)


def test_diamond_of_elementwise_ops_is_one_group(same_results) -> None:
    x = Var("x", TensorType((3, 3), F32))
    r = call("relu", x)
    y = call("add", call("exp", r), call("sigmoid", r))
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert len(_groups(fused)) == 1
    assert sorted(_groups(fused)[0]) == ["add", "exp", "relu", "sigmoid"]
    same_results(mod, fused)


def test_value_used_by_two_anchors_is_not_duplicated(same_results) -> None:
    x = Var("x", TensorType((1, 4, 6, 6), F32))
    r = call("relu", x)
    y = call("add", _conv(r, _w(4, 4, 3, 3)), _conv(r, _w(4, 4, 3, 3, seed=1)))
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    groups = _groups(fused)
    assert groups[0] == ["relu"]
    assert sorted(map(tuple, groups[1:])) == [("nn.conv",), ("nn.conv", "add")]
    same_results(mod, fused)


def test_multi_output_op_and_tuple_items_stay_in_main(same_results) -> None:
    x = Var("x", TensorType((4, 6), F32))
    parts = call("split", call("exp", x), sizes=[2, 4], axis=1)
    y = call("concatenate", call("relu", TupleGetItem(parts, 0)), TupleGetItem(parts, 1), axis=1)
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    assert _groups(fused) == [["exp", "split"], ["relu", "concatenate"]]
    items = [n for n in post_order(fused.main.body) if isinstance(n, TupleGetItem)]
    assert len(items) == 2
    same_results(mod, fused)


def test_max_depth_bounds_group_size(same_results) -> None:
    x = Var("x", TensorType((4,), F32))
    y = x
    for i in range(10):
        y = call("relu" if i % 2 else "exp", y)
    mod = IRModule.from_expr(Function((x,), y))
    assert _groups(fuse_ops(mod)) == [["exp", "relu"] * 5]
    small = fuse_ops(mod, max_depth=3)
    sizes = [len(g) for g in _groups(small)]
    assert max(sizes) <= 3 and sum(sizes) == 10
    same_results(mod, small)
    with pytest.raises(IRError, match="max_depth"):
        fuse_ops(mod, max_depth=0)


def test_scalar_constants_are_inlined_and_big_ones_are_params() -> None:
    x = Var("x", TensorType((2, 3), F32))
    y = call("add", call("multiply", x, const(np.float32(2.0))), _w(2, 3))
    fused = fuse_ops(IRModule.from_expr(Function((x,), y)))
    (group,) = [n for n in post_order(fused.main.body) if isinstance(n, Call)]
    assert [p.type.shape for p in group.op.params] == [(2, 3), (2, 3)]
    inner_consts = [n for n in post_order(group.op.body) if isinstance(n, Constant)]
    assert [c.type.shape for c in inner_consts] == [()]


def test_fusing_twice_changes_nothing() -> None:
    once = fuse_ops(_residual_block())
    twice = fuse_ops(once)
    assert structural_equal(once, twice)
    verify(twice)


def test_deep_chain_does_not_recurse(same_results) -> None:
    x = Var("x", TensorType((2,), F32))
    y = x
    for i in range(3000):
        y = call("negative" if i % 3 else "abs", y)
    mod = IRModule.from_expr(Function((x,), y))
    fused = fuse_ops(mod)
    sizes = [len(g) for g in _groups(fused)]
    assert sum(sizes) == 3000 and max(sizes) <= 256
    same_results(mod, fused, seeds=(0,))
