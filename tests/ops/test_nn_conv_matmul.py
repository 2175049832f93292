"""nn.matmul's register-tiled schedule (schedule_matmul): interpreted against the graph-IR
reference for 2-D, batched and broadcast operands and epilogues, compiled against
onnxruntime, and the fallbacks (vector operands, few rows) to the row schedule."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.ops.nn_schedule_tiles import MATMUL_MIN_ROWS, TILES, _lane_tile

#: the schedules' shapes below are those of the wide register tiles (AVX-512's row, also the
#: default of CPUs without a row), whatever the host
WIDE_TILES = "c -mcpu=skylake-avx512"


def v(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var(name, TensorType(shape, dtype))


def _run(params: list[Var], body, tol: float = 1e-4) -> str:
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in params]
    func = Function(tuple(params), body, Attrs({"Primitive": 1}))
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel", WIDE_TILES)
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    return str(prim)


@pytest.mark.parametrize(
    ("ashape", "bshape", "tile"),
    [
        ((16, 5), (5, 40), (8, 40)),
        ((12, 3), (3, 20), (8, 20)),  # 20 columns: no multiple of 8 divides; 12 rows: a tail
        ((2, 8, 4), (4, 24), (8, 24)),
        ((2, 1, 8, 3), (3, 3, 16), (8, 16)),  # broadcast batch dims
        ((4, 6), (6, 7), (4, 7)),
    ],
)
def test_tiled_matmul_matches_reference(ashape, bshape, tile):
    a, b = v("a", ashape), v("b", bshape)
    text = _run([a, b], call("nn.matmul", a, b))
    assert f"unrolled({tile[0]})" in text
    # the accumulator is one tile (leading batch dims of extent 1)
    assert f'{tile[0]}, {tile[1]}), "float32", scope="local"), stack' in text
    assert "Buffer((" + ", ".join(["1"] * (len(ashape) - 2) + [str(tile[0])]) in text or (
        len(ashape) == 2
    )


def test_tiled_matmul_with_bias_and_relu_epilogue():
    a, b, c = v("a", (8, 6)), v("b", (6, 16)), v("c", (16,))
    text = _run([a, b, c], call("relu", call("add", call("nn.matmul", a, b), c)))
    assert "unrolled(8)" in text and "vectorized(16)" in text


@pytest.mark.parametrize(
    ("ashape", "bshape"), [((1, 32), (32, 64)), ((3, 8), (8, 16)), ((8, 5), (5,)), ((5,), (5, 8))]
)
def test_few_rows_and_vector_operands_keep_the_row_schedule(ashape, bshape):
    a, b = v("a", ashape), v("b", bshape)
    text = _run([a, b], call("nn.matmul", a, b))
    assert "unrolled" not in text
    assert MATMUL_MIN_ROWS > 3


def test_lane_tile():
    assert _lane_tile(1000, TILES["x86-avx512"].matmul[1]) == 40
    assert _lane_tile(768, 48) == 48
    assert _lane_tile(20, 48) == 20
    assert _lane_tile(7, 48) == 7


@pytest.mark.cc
def test_compiled_tiled_matmul_matches_onnxruntime():
    from onnx import TensorProto, helper, numpy_helper

    from ember.testing import assert_matches_onnxruntime

    rng = np.random.default_rng(1)
    w = rng.standard_normal((96, 40)).astype(np.float32)
    bias = rng.standard_normal((40,)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 24, 96])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 24, 40])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = rng.standard_normal((2, 24, 96)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-4)
