"""Lowering fused groups to loop IR, checked with the loop-IR interpreter against the
graph-IR reference evaluator."""

import numpy as np
import pytest

from ember import tir
from ember.errors import CompileError
from ember.ir import Attrs, Function, TensorType, Tuple, Var, call, const, evaluate
from ember.lowering.lower_group import lower_group


def _run(func: Function, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in func.params]
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    return tuple(outs)


def _group(params, body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def test_conv_bias_relu_residual_one_loop_nest():
    x = Var("x", TensorType((1, 3, 9, 9), "float32"))
    w = Var("w", TensorType((4, 3, 3, 3), "float32"))
    b = Var("b", TensorType((4, 1, 1), "float32"))
    r = Var("r", TensorType((1, 4, 9, 9), "float32"))
    conv = call("nn.conv", x, w, padding=(1, 1, 1, 1))
    body = call("add", call("relu", call("add", conv, b)), r)
    func = _group((x, w, b, r), body)
    _run(func)
    text = str(lower_group(func, "k"))
    assert "parallel" in text and "vectorized" in text


def test_strided_grouped_dilated_conv():
    x = Var("x", TensorType((2, 4, 11, 11), "float32"))
    w = Var("w", TensorType((6, 2, 3, 3), "float32"))
    body = call("nn.conv", x, w, strides=(2, 2), dilation=(2, 1), padding=(1, 0, 2, 1), groups=2)
    _run(_group((x, w), body))


def test_dense_with_broadcast_epilogue_and_scalar_constant():
    x = Var("x", TensorType((5, 16), "float32"))
    w = Var("w", TensorType((7, 16), "float32"))
    body = call("maximum", call("nn.dense", x, w), const(np.float32(0.5)))
    _run(_group((x, w), body))


def test_tuple_outputs_and_input_passthrough_copied():
    a = Var("a", TensorType((4, 8), "float32"))
    b = Var("b", TensorType((8,), "float32"))
    s = call("add", a, b)
    _run(_group((a, b), Tuple((s, call("multiply", s, s), a))))


def test_large_constant_inside_group_refused():
    a = Var("a", TensorType((4,), "float32"))
    func = _group((a,), call("add", a, const(np.arange(4, dtype="float32"))))
    with pytest.raises(CompileError, match="lifts such constants"):
        lower_group(func, "k")


@pytest.mark.parametrize(
    ("shape", "axes", "tiles"),
    [
        ((1, 8, 12, 32), (0, 3, 1, 2), ("in vectorized(12)", "in range(16)")),  # NHWC -> NCHW
        ((1, 32, 7, 14), (0, 2, 3, 1), ("in vectorized(16)", "in range(14)")),  # NCHW -> NHWC
        # axes no tile size divides: tiles of 16 and a tail whose guards are loop bounds
        ((1, 28, 28, 32), (0, 3, 1, 2), ("in vectorized(min(16, ", "in range(16)")),
        ((1, 32, 1, 3199), (0, 2, 3, 1), ("in vectorized(16)", "in range(min(16, ")),
        # rows shorter than a tile after the transposed axis (an RGB image to NHWC): the
        # transposed axis is the vector, the short one unrolled (INTERLEAVE_SHORT_ROWS)
        ((1, 3, 32, 32), (0, 2, 3, 1), ("in vectorized(16)", "in unrolled(3)")),
        ((2, 4, 6, 40), (0, 2, 3, 1), ("in vectorized(8)", "in unrolled(4)")),
        ((1, 3, 5, 20), (0, 2, 3, 1), ("in vectorized(min(16, ", "in unrolled(3)")),
    ],
)
def test_layout_transposes_run_in_tiles(shape, axes, tiles):
    """A transpose reading its input's innermost axis along an outer output axis: tiles of
    16 (8, or the whole axis when shorter) along both, the innermost vectorized, or the
    transposed one where the innermost is shorter than a tile and follows it."""
    x = Var("x", TensorType(shape, "float32"))
    func = _group([x], call("transpose", x, axes=axes))
    _run(func)
    text = str(lower_group(func, "k"))
    assert all(t in text for t in tiles), text


def test_transposes_that_keep_the_innermost_axis_are_not_tiled():
    x = Var("x", TensorType((2, 3, 16, 64), "float32"))
    func = _group([x], call("transpose", x, axes=(0, 2, 1, 3)))
    _run(func)
    assert "in vectorized(64)" in str(lower_group(func, "k"))


@pytest.mark.parametrize("op", ["sigmoid", "relu"])
def test_computed_input_of_a_tiled_transpose_runs_in_its_own_order(op):
    """SiLU then NCHW -> NHWC: each tile's x * act(x) is computed contiguous and vectorized
    into a tile buffer, then transposed (inlined into the strided reads it did not vectorize)."""
    x = Var("x", TensorType((1, 32, 8, 16), "float32"))
    body = call("transpose", call("multiply", x, call(op, x)), axes=(0, 2, 3, 1))
    func = _group([x], body)
    _run(func)
    text = str(lower_group(func, "k"))
    assert 'multiply = allocate(Buffer((1, 16, 1, 16), "float32"' in text, text
    assert text.count("vectorized(16)") == 2, text


def test_a_computed_input_read_twice_stays_inlined():
    x = Var("x", TensorType((1, 32, 8, 16), "float32"))
    s = call("sigmoid", x)
    body = Tuple((call("transpose", s, axes=(0, 2, 3, 1)), call("add", s, s)))
    func = _group([x], body)
    _run(func)
    assert "allocate" not in str(lower_group(func, "k"))


def test_a_gather_along_its_innermost_axis_is_a_tile_source_a_transpose_is_not():
    """Depth-to-space then NHWC -> NCHW (a U-Net's up-convolution at a graph's end): the
    depth-to-space tile reads contiguous channels into a buffer; a transpose of a transpose
    stays one inlined gather."""
    x = Var("x", TensorType((1, 8, 8, 64), "float32"))
    d2s = call("nn.depth_to_space", x, block_size=2, mode="DCR", data_layout="NHWC")
    func = _group([x], call("transpose", d2s, axes=(0, 3, 1, 2)))
    _run(func)
    assert "allocate" in str(lower_group(func, "k"))
    twice = call("transpose", call("transpose", x, axes=(0, 1, 3, 2)), axes=(0, 3, 1, 2))
    func = _group([x], twice)
    _run(func)
    assert "allocate" not in str(lower_group(func, "k"))


def test_a_transpose_through_a_reshape_and_a_pad_runs_in_tiles():
    """Attention heads of ``k`` transposed and zero-padded for the product: the read
    ``x[t, h * 64 + d]`` is followed through the inlined reshape and transpose; the
    innermost index is affine in d with coefficient one, so d and t run in 16x16 tiles."""
    x = Var("x", TensorType((1, 150, 384), "float32"))
    heads = call("transpose", call("reshape", x, newshape=(1, 150, 6, 64)), axes=(0, 2, 3, 1))
    func = _group([x], call("nn.pad", heads, pad_width=[0, 0, 0, 0, 0, 0, 0, 10]))
    _run(func)
    text = str(lower_group(func, "k"))
    assert "in range(16)" in text and "in vectorized(16)" in text, text


def test_a_deep_chain_reading_each_stage_twice_lowers():
    """Regression guard: following reads through inlined stages is bounded
    (MAX_SOURCE_LOADS; x * x twenty times would be a million reads to follow), so such a
    group lowers at once, and computes what the reference does."""
    x = Var("x", TensorType((1, 16, 4, 16), "float32"))
    y = x
    for _ in range(20):
        y = call("multiply", y, y)
    func = _group([x], call("transpose", y, axes=(0, 2, 3, 1)))
    (out,) = _run(func)
    assert out.shape == (1, 4, 16, 16)


@pytest.mark.parametrize(
    ("other", "inner"),
    [
        ((64, 1, 1), 49),  # a per-channel bias: invariant in the fused H, W loop
        ((1, 64, 7, 7), 3136),  # every axis fused (the batch of one included)
        ((), 3136),
        ((7,), 7),  # a row broadcast down the columns: not the fused index
        ((7, 1), 7),
    ],
)
def test_elementwise_groups_of_short_rows_vectorize_their_trailing_axes_fused(other, inner):
    """Regression: NCHW rows of 7 or 56 vectorized one row at a time and finished it in
    scalars (a Sigmoid of 1x1280x7x7 at 0.25x onnxruntime, QuantizeLinear of 1x64x56x56 at
    0.19x); elementwise groups whose inputs match the output on the trailing axes, or are
    all ones there, run them as one vectorized loop."""
    x, b = Var("x", TensorType((1, 64, 7, 7), "float32")), Var("b", TensorType(other, "float32"))
    func = _group([x, b], call("sigmoid", call("add", x, b)))
    _run(func)
    text = str(lower_group(func, "k"))
    assert f"vectorized({inner})" in text, text
