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
from ember.ops.nn_schedule_tiles import GEMV_COLS, MATMUL_MIN_ROWS, TILES, _lane_tile

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
    ("ashape", "bshape"),
    [
        ((1, 32), (32, 64)),
        ((3, 8), (8, 16)),
        ((8, 5), (5,)),
        ((5,), (5, 8)),
        ((1, 640), (640, 128)),
    ],
)
def test_few_rows_and_vector_operands_keep_the_row_schedule(ashape, bshape):
    """Small products (under GEMV_MIN_WORK multiply-adds a row) with few rows, and vector
    operands: no register tile of rows; the only unrolled loops are the blocks of 16 lanes
    of a short vectorised row (nn_schedule.vectorize_blocks)."""
    a, b = v("a", ashape), v("b", bshape)
    text = _run([a, b], call("nn.matmul", a, b))
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if " in unrolled(" in line:
            assert " in vectorized(16)" in lines[k + 1], text
    assert MATMUL_MIN_ROWS > 3


@pytest.mark.parametrize(
    ("ashape", "bshape", "block"),
    [
        ((1, 40), (40, 1008), 144),
        ((2, 24), (24, 640), 160),
        ((1, 2, 16), (16, 520), 130),
        ((1, 1536), (1536, 384), 192),  # GPT-2's decoding step: at least two blocks
        ((1, 2048), (2048, 64), 32),
    ],
)
def test_few_rows_of_wide_products_take_parallel_column_blocks(ashape, bshape, block):
    """A row-vector times a matrix of GEMV_MIN_WORK multiply-adds a row or more
    (mobilenet_v2's 1 x 1280 @ 1280 x 1008 classifier, GPT-2's 1 x 1536 @ 1536 x 384):
    at least two column blocks of at most GEMV_COLS, a multiple of 16 dividing the width
    where one exists (520: none, its largest divisor), as the parallel loop; every row of
    a block reads its columns contiguously."""
    a, b = v("a", ashape), v("b", bshape)
    text = _run([a, b], call("nn.matmul", a, b))
    assert block <= GEMV_COLS and bshape[-1] % block == 0
    assert f"parallel({bshape[-1] // block})" in text
    assert f'{ashape[-2]}, {block}), "float32", scope="local"), stack' in text


@pytest.mark.cc
def test_wide_row_vector_product_gives_1_threads_bits_at_2_threads():
    """The column blocks are the parallel loop and keep each output's multiply-adds in the
    reduction's order: the compiled classifier-shaped product gives the same bits at 1 and 2
    threads, and matches numpy."""
    from onnx import TensorProto, helper, numpy_helper

    from ember.driver import build
    from ember.runtime import num_threads
    from ember.testing.runners import run_artifacts

    rng = np.random.default_rng(2)
    w = rng.standard_normal((64, 1008)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "gemv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1008])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    import ember

    mod, params = ember.frontend.from_onnx(model, shape={"x": (1, 64)})
    arts = build(mod, "c", params=params)
    src = b"".join(a.content for a in arts if a.file_name.endswith(".c"))
    assert b"EmberBackendParallelFor" in src
    x = rng.standard_normal((1, 64)).astype(np.float32)
    one = run_artifacts(arts, {"x": x})[0]
    with num_threads(2):
        two = run_artifacts(arts, {"x": x})[0]
    np.testing.assert_array_equal(one.view(np.int32), two.view(np.int32))
    np.testing.assert_allclose(one, x @ w, rtol=1e-4, atol=1e-4)


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


def test_columns_no_lane_multiple_divides_take_wide_tiles_and_a_bounded_tail():
    """ViT's 197 tokens: tiles of 64 columns and a tail tile whose loops stop at the last
    column (guard_bounds), rather than 197's divisor, one column; interpreted against the
    reference, rows with a tail too."""
    a, b = v("a", (1, 2, 13, 8)), v("b", (1, 2, 8, 197))
    text = _run([a, b], call("nn.matmul", a, b))
    assert '8, 64), "float32", scope="local"), stack' in text
    assert "min(64, " in text and "min(8, " in text  # the tail tile's bounds
    assert _lane_tile(197, 64, 8) == 1 and _lane_tile(197, 64, 8, tail=True) == 64


@pytest.mark.cc
@pytest.mark.parametrize("cols", [197, 196, 100])
def test_computed_rhs_of_awkward_width_is_padded_and_matches_numpy(cols):
    """Attention scores q @ k^T with a token count no multiple of 8 divides: the rhs is
    zero-padded to a multiple of PAD_ACTIVATION_COLUMNS and the product sliced back."""
    from ember.driver import build
    from ember.ir import IRModule
    from ember.ops import nn_conv
    from ember.testing.runners import run_artifacts

    q, k = v("q", (1, 3, cols, 64)), v("k", (1, 3, cols, 64))
    kt = call("transpose", k, axes=(0, 1, 3, 2))
    scores = call("nn.softmax", call("nn.matmul", q, kt), axis=-1)
    mod = IRModule({"main": Function((q, k), scores)})
    artifacts = build(mod, "c")
    source = b"".join(a.content for a in artifacts.artifacts if a.file_name.endswith(".c"))
    assert nn_conv.PAD_ACTIVATION_COLUMNS == 32 and b"nn_pad" in source
    rng = np.random.default_rng(5)
    xq = rng.standard_normal((1, 3, cols, 64)).astype(np.float32)
    xk = rng.standard_normal((1, 3, cols, 64)).astype(np.float32)
    got = run_artifacts(artifacts, {"q": xq, "k": xk})[0]
    s = xq.astype(np.float64) @ xk.astype(np.float64).transpose(0, 1, 3, 2)
    want = np.exp(s - s.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(
    ("ashape", "kshape", "dots"),
    [
        ((1, 6, 1, 64), (1, 6, 128, 64), True),  # GPT-2's decoding step: one query, 128 keys
        ((2, 1, 8), (3, 1, 5, 8), True),  # batch dims broadcast
        ((1, 2, 3, 8), (1, 2, 5, 8), False),  # three rows: the tiled product
    ],
)
def test_single_rows_times_a_transposed_matrix_are_dot_products(ashape, kshape, dots):
    """``q @ transpose(k)`` with one row of q per batch becomes ``sum(q * k)`` over the
    last axis (k's contiguous rows), not a materialized transpose and a product."""
    from ember.ir.expr import post_order
    from ember.ops.registry import find_legalizer

    q, k = v("q", ashape), v("k", kshape)
    rank = len(kshape)
    kt = call("transpose", k, axes=(*range(rank - 2), rank - 1, rank - 2))
    node = call("nn.matmul", q, kt, name="scores")
    out = find_legalizer("nn.matmul")(node)
    ops = [n.op_name for n in post_order(out) if hasattr(n, "op_name")]
    assert ("sum" in ops and "nn.matmul" not in ops) == dots, ops
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(s).astype("float32") for s in (ashape, kshape)]
    want = evaluate(Function((q, k), node), xs)[0]
    got = evaluate(Function((q, k), out), xs)[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
