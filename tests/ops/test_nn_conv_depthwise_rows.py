"""Depthwise convolutions on wide images: NCHW rows (ember.ops.nn_depthwise), interpreted
and compiled, against the reference and onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_depthwise import ROW_MIN_WIDTH, _row_cols, use_rows
from ember.testing.onnx_models import build_model, node


def _data(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _lowered(xshape, wshape, attrs, epilogue: bool) -> str:
    x, w = Var("x", TensorType(xshape, "float32")), Var("w", TensorType(wshape, "float32"))
    body = call("nn.conv_depthwise_packed", x, w, **attrs)
    if epilogue:
        body = call("clip", body, a_min=0.0, a_max=6.0)
    xs = [_data(xshape, 0), _data(wshape, 1)]
    func = Function((x, w), body, Attrs({"Primitive": 1}))
    want = evaluate(Function(func.params, func.body), xs)[0]
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    out = np.zeros(want.shape, want.dtype)
    tir.interpret(prim, [*xs, out])
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    return str(prim)


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs", "epilogue"),
    [
        ((1, 8, 3, 30), (1, 3, 3, 8), {"padding": (1, 1, 1, 1)}, True),
        ((2, 8, 4, 61), (1, 3, 3, 8), {"strides": (2, 2), "padding": (1, 0, 1, 1)}, True),
        ((1, 16, 5, 62), (1, 3, 3, 16), {"strides": (2, 2), "dilation": (2, 2)}, False),
        ((1, 8, 2, 90), (1, 1, 5, 8), {"strides": (1, 3), "padding": (0, 2, 0, 1)}, True),
        ((1, 8, 65), (1, 5, 8), {"strides": (2,), "padding": (2, 2)}, False),
        ((1, 8, 2, 3, 33), (1, 1, 3, 3, 8), {"padding": (0, 1, 1, 0, 1, 1)}, True),
    ],
)
def test_rows_lowering_matches_reference(xshape, wshape, attrs, epilogue):
    text = _lowered(xshape, wshape, attrs, epilogue)
    strided = attrs.get("strides", (1,))[-1] > 1
    assert "pad_blocked" not in text and ("pad_split" in text) == strided
    assert "vectorized(8)" in text or "vectorized(" in text


def test_only_wide_outputs_use_rows():
    one = Attrs({"strides": (1, 1), "padding": (1, 1, 1, 1)})
    two = Attrs({"strides": (2, 2), "padding": (1, 1, 1, 1)})
    w = ROW_MIN_WIDTH
    assert use_rows((1, 8, 4, w), (1, 8, 4, w), one)
    assert not use_rows((1, 8, 4, w - 1), (1, 8, 4, w - 1), one)
    assert use_rows((1, 8, 56, 56), (1, 8, 112, 112), two)
    assert use_rows((1, 8, 80, 80), (1, 8, 160, 160), two)  # copies per row: any plane fits
    assert use_rows((1, 8, 160, 160), (1, 8, 160, 160), one)
    assert not use_rows((1, 8), (1, 8), Attrs({}))


def test_strided_copies_are_made_per_output_row():
    # DBNet's stride-2 layer at 160 columns: the split copy holds the 3 input rows of one
    # output row (3 x 2 x 81 floats), the padded one a row at a time, on the stack
    attrs = {"strides": (2, 2), "padding": (1, 1, 1, 1)}
    text = _lowered((1, 8, 6, 160), (1, 3, 3, 8), attrs, True)
    assert 'pad_split = allocate(Buffer((1, 1, 3, 2, 81), "float32", scope="local"), stack)' in text
    assert 'pad = allocate(Buffer((1, 1, 1, 162), "float32", scope="local"), stack)' in text
    assert 'conv = allocate(Buffer((1, 1, 1, 80), "float32", scope="local"), stack)' in text


def test_row_tiles_divide_the_width():
    assert _row_cols(80) == 40 and _row_cols(112) == 56 and _row_cols(56) == 56
    assert _row_cols(64) == 64 and _row_cols(30) == 30


def _model(c: int, size: tuple[int, int], stride: int, dilation: int, pads, bias: bool):
    inits = {"w": _data((c, 1, 3, 3), 3)}
    if bias:
        inits["b"] = _data((c,), 4)
    conv = node(
        "Conv",
        ["x", *inits],
        "c",
        group=c,
        pads=pads,
        strides=[stride] * 2,
        dilations=[dilation] * 2,
    )
    x = _data((1, c, *size), 5)
    return build_model([conv, node("HardSwish", ["c"], "y")], {"x": x}, ["y"], inits), x


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(
    ("c", "size", "stride", "dilation", "pads", "bias"),
    [
        (16, (9, 57), 1, 1, [1, 1, 1, 1], True),  # 57 columns: 56-column tiles and a tail
        (16, (11, 63), 2, 1, [1, 1, 1, 1], False),  # odd sizes, stride 2
        (8, (7, 70), 2, 2, [2, 0, 1, 2], True),  # dilation, asymmetric padding
        (24, (6, 40), 1, 1, [0, 0, 0, 0], False),  # unpadded
    ],
)
def test_compiled_rows_match_onnxruntime(c, size, stride, dilation, pads, bias, target):
    from ember.testing import assert_matches_onnxruntime

    model, x = _model(c, size, stride, dilation, pads, bias)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5, target=target)
