"""Matrix products of few rows on AVX-512 targets (schedule_matmul): column tiles of whole
zmm registers (multiples of 16 where one divides the width) and, for packed weights of
BLOCK columns that a run reads from beyond L2, one call of ember_f32_conv_tile over every
row per block (block_rows); AVX2 targets and the llvm kinds keep their tiles."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.ops.nn_matmul_tiles import (
    MATMUL_KERNEL_MIN_BYTES,
    MATMUL_KERNEL_REDUCTION,
    block_rows,
)
from ember.target import Target

AVX512 = "c -mcpu=skylake-avx512"
AVX2 = "c -mcpu=haswell"


def v(name: str, shape: tuple[int, ...]) -> Var:
    return Var(name, TensorType(shape, "float32"))


def _lower(ashape: tuple[int, ...], bshape: tuple[int, ...], target: str, run: bool) -> str:
    """The lowered text of ``a @ b`` on ``target``, interpreted against the reference if
    ``run``."""
    a, b = v("a", ashape), v("b", bshape)
    func = Function((a, b), call("nn.matmul", a, b), Attrs({"Primitive": 1}))
    prim = lower_group(func, "kernel", target)
    tir.verify(prim)
    if run:
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal(s).astype(np.float32) for s in (ashape, bshape)]
        (ref,) = evaluate(Function(func.params, func.body), xs)
        out = np.zeros(ref.shape, ref.dtype)
        tir.interpret(prim, [*xs, out], externs=INTERPRET_EXTERNS)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    return str(prim)


def test_packed_weight_beyond_l2_calls_the_kernel_over_every_row():
    """crnn's LSTM projection shape (24 rows, blocks of 16 columns of a weight of at least
    MATMUL_KERNEL_MIN_BYTES): one kernel call of all 24 rows per block, the blocks the
    parallel loop."""
    depth = MATMUL_KERNEL_REDUCTION
    blocks = -(-MATMUL_KERNEL_MIN_BYTES // (4 * depth * 16))
    text = _lower((24, depth), (blocks, depth, 16), AVX512, run=False)
    assert "ember_f32_conv_tile" in text
    assert f"parallel({blocks})" in text
    assert 'Buffer((1, 24, 16), "float32", scope="local")' in text


def test_block_rows_bounds():
    """The kernel takes blocks of 16 columns with a long reduction and a large weight on
    AVX-512 C targets only."""
    big, depth = MATMUL_KERNEL_MIN_BYTES, MATMUL_KERNEL_REDUCTION
    avx512 = Target(AVX512)
    assert block_rows(avx512, 24, 16, depth, big)
    assert not block_rows(avx512, 24, 16, depth, big // 2)  # hot in L2: loop-IR tiles
    assert not block_rows(avx512, 24, 16, depth // 2, big)  # short reduction
    assert not block_rows(avx512, 24, 32, depth, big)  # not one block
    assert not block_rows(Target(AVX2), 24, 16, depth, big)  # AVX2: its 6 x 16 tiles
    assert not block_rows(Target("llvm -mcpu=skylake-avx512"), 24, 16, depth, big)


@pytest.mark.parametrize("target", [AVX512, AVX2])
def test_small_packed_weight_keeps_loop_tiles(target):
    """BERT's FFN down projection shape (64 x 512 @ (8, 512, 16), 256 KiB): loop-IR tiles
    of 8 rows on AVX-512 (on AVX2 the 6 x 16 tiles call the kernel, as before)."""
    text = _lower((64, 160), (2, 160, 16), target, run=True)
    if target == AVX512:
        assert "ember_f32_conv_tile" not in text and "unrolled(8)" in text


@pytest.mark.parametrize(("width", "cols"), [(112, 16), (80, 16), (96, 48), (40, 40)])
def test_avx512_tiles_take_whole_zmm_columns(width, cols):
    """crnn's 24 x 256 @ 256 x 112 classifier: 16 columns per tile (7 zmm tiles), not 56
    (3.5 registers a row, 8 rows spilled); widths that 16 does not divide keep multiples
    of 8."""
    text = _lower((24, 32), (32, width), AVX512, run=True)
    assert f'Buffer((8, {cols}), "float32", scope="local")' in text


@pytest.mark.parametrize(("width", "cols"), [(112, 16), (40, 8)])
def test_avx2_tiles_keep_their_columns(width, cols):
    """AVX2's 6 x 16 tiles (multiples of 8 columns) do not change."""
    text = _lower((24, 32), (32, width), AVX2, run=True)
    assert f'Buffer((6, {cols}), "float32", scope="local")' in text


@pytest.mark.cc
def test_compiled_packed_product_matches_onnxruntime_and_1_threads_bits():
    """The crnn-shaped product with a weight of MATMUL_KERNEL_MIN_BYTES (the kernel on
    AVX-512 hosts, the tiles elsewhere) against onnxruntime, and the same bits at 2 threads
    (the blocks are the parallel loop)."""
    from onnx import TensorProto, helper, numpy_helper

    import ember
    from ember.driver import build
    from ember.runtime import num_threads
    from ember.testing import assert_matches_onnxruntime
    from ember.testing.runners import run_artifacts

    blocks = MATMUL_KERNEL_MIN_BYTES // (4 * 256 * 16)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((blocks, 256, 16)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "packed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [24, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [blocks, 24, 16])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = rng.standard_normal((24, 256)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-4)
    mod, params = ember.frontend.from_onnx(model, shape={"x": (24, 256)})
    arts = build(mod, "c", params=params)
    one = run_artifacts(arts, {"x": x})[0]
    with num_threads(2):
        two = run_artifacts(arts, {"x": x})[0]
    np.testing.assert_array_equal(one.view(np.int32), two.view(np.int32))
