"""Compiled convolutions (1-3-d, grouped, strided, dilated, transposed), Gemm and
MatMul against onnxruntime, one C compile per test."""

from __future__ import annotations

import numpy as np
import pytest

from ember.testing import assert_matches_onnxruntime, build_model, node, random_input

pytestmark = pytest.mark.cc


def test_conv_1d_2d_3d_grouped_strided_dilated():
    rng = np.random.default_rng(0)
    inputs = {
        "x2": random_input((2, 4, 11, 10), seed=rng),
        "x1": random_input((1, 3, 17), seed=rng),
        "x3": random_input((1, 2, 6, 7, 5), seed=rng),
    }
    inits = {
        "w_a": random_input((8, 4, 3, 3), seed=rng),
        "b_a": random_input((8,), seed=rng),
        "w_b": random_input((6, 2, 3, 2), seed=rng),
        "w_dw": random_input((4, 1, 3, 3), seed=rng),
        "w_1x1": random_input((5, 4, 1, 1), seed=rng),
        "w_12": random_input((12, 4, 3, 3), seed=rng),
        "w_1d": random_input((4, 3, 5), seed=rng),
        "w_3d": random_input((3, 2, 3, 2, 3), seed=rng),
        "b_3d": random_input((3,), seed=rng),
    }
    nodes = [
        node("Conv", ["x2", "w_a", "b_a"], "pad_bias", pads=[1, 1, 1, 1]),
        node("Relu", ["pad_bias"], "relu"),
        node(
            "Conv",
            ["x2", "w_b"],
            "grouped",
            group=2,
            strides=[2, 1],
            dilations=[1, 2],
            pads=[0, 1, 2, 0],
        ),
        node("Conv", ["x2", "w_dw"], "depthwise", group=4, auto_pad="SAME_UPPER", strides=[2, 2]),
        node("Conv", ["x2", "w_1x1"], "pointwise"),
        node("Conv", ["x2", "w_12"], "blocked12", strides=[1, 2]),
        node("Relu", ["blocked12"], "blocked12_relu"),
        node("Conv", ["x1", "w_1d"], "conv1d", pads=[2, 1], strides=[2]),
        node("Conv", ["x3", "w_3d", "b_3d"], "conv3d", pads=[1, 0, 1, 1, 0, 1]),
    ]
    names = ("relu", "grouped", "depthwise", "pointwise", "blocked12_relu", "conv1d", "conv3d")
    outs = dict.fromkeys(names, "float32")
    model = build_model(nodes, inputs, outs, inits)
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4)


def test_conv_transpose_variants():
    rng = np.random.default_rng(1)
    inputs = {
        "x2": random_input((1, 4, 5, 6), seed=rng),
        "x1": random_input((2, 3, 7), seed=rng),
        "x3": random_input((1, 2, 3, 4, 3), seed=rng),
    }
    inits = {
        "w_a": random_input((4, 3, 3, 3), seed=rng),
        "b_a": random_input((3,), seed=rng),
        "w_g": random_input((4, 2, 2, 3), seed=rng),
        "w_1d": random_input((3, 2, 4), seed=rng),
        "w_3d": random_input((2, 2, 2, 3, 2), seed=rng),
    }
    nodes = [
        node(
            "ConvTranspose",
            ["x2", "w_a", "b_a"],
            "up2",
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            output_padding=[1, 0],
        ),
        node("ConvTranspose", ["x2", "w_g"], "grouped", group=2, strides=[1, 3], dilations=[2, 1]),
        node("ConvTranspose", ["x1", "w_1d"], "t1d", strides=[3], pads=[1, 2]),
        node("ConvTranspose", ["x3", "w_3d"], "t3d", strides=[2, 1, 2]),
    ]
    outs = {n: "float32" for n in ("up2", "grouped", "t1d", "t3d")}
    assert_matches_onnxruntime(build_model(nodes, inputs, outs, inits), inputs, atol=1e-4)


def test_gemm_and_matmul_float():
    rng = np.random.default_rng(2)
    inputs = {
        "a": random_input((6, 8), seed=rng),
        "at": random_input((8, 6), seed=rng),
        "b3": random_input((2, 6, 8), seed=rng),
        "v": random_input((8,), seed=rng),
        "b4": random_input((3, 1, 4, 8), seed=rng),
    }
    inits = {
        "w": random_input((5, 8), seed=rng),
        "c": random_input((5,), seed=rng),
        "m": random_input((8, 7), seed=rng),
        "m3": random_input((2, 8, 4), seed=rng),
    }
    nodes = [
        node("Gemm", ["a", "w", "c"], "gemm_tb", transB=1, alpha=0.5, beta=2.0),
        node("Gemm", ["at", "m"], "gemm_ta", transA=1),
        node("MatMul", ["a", "m"], "mm"),
        node("MatMul", ["b3", "m"], "mm_batch"),
        node("MatMul", ["v", "m"], "vec_mat"),
        node("MatMul", ["a", "v"], "mat_vec"),
        node("MatMul", ["b4", "m3"], "mm_broadcast"),
    ]
    names = ("gemm_tb", "gemm_ta", "mm", "mm_batch", "vec_mat", "mat_vec", "mm_broadcast")
    model = build_model(nodes, inputs, {n: "float32" for n in names}, inits)
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["int32", "int64", "float64"])
def test_matmul_dtypes(dtype):
    rng = np.random.default_rng(3)
    inputs = {
        "a": rng.integers(-9, 10, (2, 3, 5)).astype(dtype),
        "b": rng.integers(-9, 10, (5, 4)).astype(dtype),
    }
    model = build_model([node("MatMul", ["a", "b"], "y")], inputs, {"y": dtype})
    assert_matches_onnxruntime(model, inputs, rtol=0, atol=0)
