"""1x1 stride-1 unpadded packed convolutions: flattened over positions (a matrix product
of positions x channels) and register-tiled along all positions (interpreted, compiled)."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops import nn_schedule_tiles
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.ops.nn_schedule_tiles import _tile_cols, register_tiles
from ember.target import Target

AVX2 = "c -mcpu=haswell"
WIDE = "c -mcpu=skylake-avx512"


@pytest.fixture
def loop_ir_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop-IR tiles (llvm, non-x86 targets): no AVX2 micro-kernel calls (those are
    tested in test_nn_conv_f32.py)."""
    monkeypatch.setattr(nn_schedule_tiles, "use_tile_kernel", lambda target, dtype: False)


def v(name: str, shape: tuple[int, ...]) -> Var:
    return Var(name, TensorType(shape, "float32"))


def _run(params: list[Var], body, target: str) -> str:
    """Lower for ``target``, interpret and compare with the graph-IR reference."""
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in params]
    func = Function(tuple(params), body, Attrs({"Primitive": 1}))
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel", target)
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    return str(prim)


@pytest.mark.parametrize("target", [AVX2, WIDE])
@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs"),
    [
        ((1, 5, 7, 7), (1, 5, 1, 1, 16), {}),  # 49 positions: full tiles and a partial one
        ((2, 3, 3, 5), (2, 3, 1, 1, 8), {}),  # batch 2, 15 positions
        ((1, 6, 4, 3), (3, 2, 1, 1, 8), {"groups": 3}),  # grouped, one block per group
        ((1, 4, 2, 3, 5), (1, 4, 1, 1, 1, 16), {"channels": 13}),  # 3-D, padded channels
        ((1, 3, 13, 13), (1, 3, 1, 1, 16), {"dilation": (2, 2)}),  # dilation of a 1x1: none
    ],
)
@pytest.mark.usefixtures("loop_ir_tiles")
def test_pointwise_conv_is_flattened_and_matches_reference(xshape, wshape, attrs, target):
    x, wp = v("x", xshape), v("wp", wshape)
    channels = attrs.get("channels", wshape[0] * wshape[-1])
    b = v("b", (channels, *([1] * (len(xshape) - 2))))
    conv = call("nn.conv_packed", x, wp, **attrs)
    text = _run([x, wp, b], call("relu", call("add", conv, b)), target)
    positions = int(np.prod(xshape[2:]))
    rows = _tile_cols(positions, register_tiles(Target.create(target)).matmul[0])
    assert f"conv = allocate(Buffer((1, {rows}, {wshape[-1]})," in text
    assert f"unrolled({rows})" in text and f"vectorized({wshape[-1]})" in text


@pytest.mark.usefixtures("loop_ir_tiles")
def test_pointwise_tiles_rows_of_the_matmul_tile():
    x, wp = v("x", (1, 4, 7, 7)), v("wp", (2, 4, 1, 1, 16))
    text = _run([x, wp], call("nn.conv_packed", x, wp), AVX2)
    assert "unrolled(6)" in text  # 6 positions x 16 channels on AVX2


@pytest.mark.parametrize(
    "attrs",
    [{"strides": (2, 2)}, {"padding": (1, 1, 1, 1)}],
)
@pytest.mark.usefixtures("loop_ir_tiles")
def test_strided_or_padded_1x1_keeps_row_tiles(attrs):
    x, wp = v("x", (1, 4, 8, 8)), v("wp", (1, 4, 1, 1, 16))
    text = _run([x, wp], call("nn.conv_packed", x, wp, **attrs), AVX2)
    assert "conv = allocate(Buffer((1, 1, 4, 16)," in text  # one row of 4 columns


def _model(cin: int, cout: int, size: tuple[int, int], groups: int, act: str):
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(4)
    w = (rng.standard_normal((cout, cin // groups, 1, 1)) / np.sqrt(cin)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], group=groups)]
    if act == "HardSwish":
        nodes.append(helper.make_node("HardSwish", ["c"], ["y"]))
    elif act == "SiLU":
        nodes += [
            helper.make_node("Sigmoid", ["c"], ["s"]),
            helper.make_node("Mul", ["c", "s"], ["y"]),
        ]
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "pw",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, *size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, *size])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(
    ("cin", "cout", "size", "groups", "act"),
    [
        (40, 32, (7, 7), 1, "HardSwish"),
        (24, 48, (13, 13), 1, "SiLU"),
        (16, 120, (14, 14), 1, "Relu"),  # 120 channels: padded to 128
        (32, 64, (5, 9), 2, "HardSwish"),  # grouped
    ],
)
def test_compiled_pointwise_matches_onnxruntime(cin, cout, size, groups, act, target):
    from ember.testing import assert_matches_onnxruntime

    model = _model(cin, cout, size, groups, act)
    x = np.random.default_rng(6).standard_normal((1, cin, *size)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5, target=target)
