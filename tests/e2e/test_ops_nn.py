"""Compiled nn ops against onnxruntime: convolutions, matrix products, pools and norms.

Each test builds one small ONNX model holding several nodes of one family (one C compile
per model), compiles it for the C target and compares every output with onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from onnx import helper

from ember.testing import assert_matches_onnxruntime, build_model

pytestmark = pytest.mark.cc


def rand(rng: np.random.Generator, *shape: int, dtype: str = "float32") -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def node(op: str, ins: Sequence[str], out: str, **attrs: Any) -> Any:
    return helper.make_node(op, list(ins), [out], name=out, **attrs)


def test_conv_1d_2d_3d_grouped_strided_dilated():
    rng = np.random.default_rng(0)
    inputs = {
        "x2": rand(rng, 2, 4, 11, 10),
        "x1": rand(rng, 1, 3, 17),
        "x3": rand(rng, 1, 2, 6, 7, 5),
    }
    inits = {
        "w_a": rand(rng, 8, 4, 3, 3),
        "b_a": rand(rng, 8),
        "w_b": rand(rng, 6, 2, 3, 2),
        "w_dw": rand(rng, 4, 1, 3, 3),
        "w_1x1": rand(rng, 5, 4, 1, 1),
        "w_12": rand(rng, 12, 4, 3, 3),
        "w_1d": rand(rng, 4, 3, 5),
        "w_3d": rand(rng, 3, 2, 3, 2, 3),
        "b_3d": rand(rng, 3),
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
    inputs = {"x2": rand(rng, 1, 4, 5, 6), "x1": rand(rng, 2, 3, 7), "x3": rand(rng, 1, 2, 3, 4, 3)}
    inits = {
        "w_a": rand(rng, 4, 3, 3, 3),
        "b_a": rand(rng, 3),
        "w_g": rand(rng, 4, 2, 2, 3),
        "w_1d": rand(rng, 3, 2, 4),
        "w_3d": rand(rng, 2, 2, 2, 3, 2),
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
        "a": rand(rng, 6, 8),
        "at": rand(rng, 8, 6),
        "b3": rand(rng, 2, 6, 8),
        "v": rand(rng, 8),
        "b4": rand(rng, 3, 1, 4, 8),
    }
    inits = {
        "w": rand(rng, 5, 8),
        "c": rand(rng, 5),
        "m": rand(rng, 8, 7),
        "m3": rand(rng, 2, 8, 4),
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


def test_pools():
    rng = np.random.default_rng(4)
    inputs = {
        "x": rand(rng, 2, 3, 11, 10),
        "x1": rand(rng, 1, 2, 13),
        "x3": rand(rng, 1, 2, 5, 6, 7),
    }
    nodes = [
        node("MaxPool", ["x"], "max_pad", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        node("MaxPool", ["x"], "max_ceil", kernel_shape=[3, 2], strides=[2, 3], ceil_mode=1),
        node("MaxPool", ["x"], "max_dil", kernel_shape=[2, 2], dilations=[2, 3], pads=[1, 0, 1, 1]),
        node(
            "AveragePool",
            ["x"],
            "avg_excl",
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            ceil_mode=1,
        ),
        node(
            "AveragePool",
            ["x"],
            "avg_incl",
            kernel_shape=[3, 3],
            strides=[2, 2],
            pads=[1, 2, 1, 0],
            count_include_pad=1,
        ),
        node("AveragePool", ["x"], "avg_same", kernel_shape=[4, 3], auto_pad="SAME_UPPER"),
        node("GlobalAveragePool", ["x"], "gap"),
        node("GlobalMaxPool", ["x"], "gmp"),
        node("MaxPool", ["x1"], "max1d", kernel_shape=[4], strides=[3], pads=[2, 2]),
        node(
            "AveragePool",
            ["x3"],
            "avg3d",
            kernel_shape=[2, 3, 2],
            strides=[2, 1, 2],
            pads=[1, 1, 0, 0, 1, 1],
        ),
        node("GlobalAveragePool", ["x3"], "gap3d"),
    ]
    names = [n.output[0] for n in nodes]
    model = build_model(nodes, inputs, {n: "float32" for n in names}, opset=19)
    assert_matches_onnxruntime(model, inputs, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_max_pool_small_ints(dtype):
    rng = np.random.default_rng(5)
    inputs = {"x": rng.integers(0 if dtype == "uint8" else -128, 127, (1, 3, 7, 7)).astype(dtype)}
    nodes = [node("MaxPool", ["x"], "y", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
    assert_matches_onnxruntime(build_model(nodes, inputs, {"y": dtype}), inputs, rtol=0, atol=0)


def test_norms_and_softmax():
    rng = np.random.default_rng(6)
    inputs = {
        "x": rand(rng, 2, 4, 5, 6),
        "t": rand(rng, 3, 5, 16),
        "mean": rand(rng, 4),
        "var": np.abs(rand(rng, 4)) + 0.5,
    }
    inits = {
        "gamma": rand(rng, 4),
        "beta": rand(rng, 4),
        "cmean": rand(rng, 4),
        "cvar": np.abs(rand(rng, 4)) + 0.5,
        "ln_s": rand(rng, 16),
        "ln_b": rand(rng, 16),
        "ln2_s": rand(rng, 5, 16),
    }
    nodes = [
        node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], "bn_dyn", epsilon=1e-3),
        node("BatchNormalization", ["x", "gamma", "beta", "cmean", "cvar"], "bn_const"),
        node("InstanceNormalization", ["x", "gamma", "beta"], "inorm", epsilon=1e-4),
        node("LayerNormalization", ["t", "ln_s", "ln_b"], "lnorm"),
        node("LayerNormalization", ["t", "ln2_s"], "lnorm_axis1", axis=1),
        node("LRN", ["x"], "lrn", size=3, alpha=1e-3, beta=0.75, bias=2.0),
        node("Softmax", ["t"], "softmax_last"),
        node("Softmax", ["x"], "softmax_c", axis=1),
        node("LogSoftmax", ["t"], "logsoftmax", axis=-1),
        node("LogSoftmax", ["x"], "logsoftmax_h", axis=2),
    ]
    names = [n.output[0] for n in nodes]
    model = build_model(nodes, inputs, {n: "float32" for n in names}, inits)
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4)


def test_softmax_opset11_flattens():
    rng = np.random.default_rng(7)
    inputs = {"x": rand(rng, 2, 3, 4)}
    nodes = [node("Softmax", ["x"], "y", axis=1), node("LogSoftmax", ["x"], "z", axis=2)]
    model = build_model(nodes, inputs, {"y": "float32", "z": "float32"}, opset=11)
    assert_matches_onnxruntime(model, inputs, rtol=1e-5, atol=1e-6)


def test_einsum():
    rng = np.random.default_rng(8)
    inputs = {
        "a": rand(rng, 2, 3, 4),
        "b": rand(rng, 2, 4, 5),
        "m": rand(rng, 4, 4),
        "q": rand(rng, 1, 2, 3, 8),
        "k": rand(rng, 1, 2, 6, 8),
    }
    cases = [
        ("bij,bjk->bik", ["a", "b"]),
        ("ii->i", ["m"]),
        ("ij->ji", ["m"]),
        ("bhqd,bhkd->bhqk", ["q", "k"]),
        ("...ij,...jk->...ik", ["a", "b"]),
        ("bij->", ["a"]),
        ("bij,bjk", ["a", "b"]),
    ]
    nodes = [
        helper.make_node("Einsum", ins, [f"e{i}"], name=f"e{i}", equation=eq)
        for i, (eq, ins) in enumerate(cases)
    ]
    outs = {f"e{i}": "float32" for i in range(len(cases))}
    assert_matches_onnxruntime(build_model(nodes, inputs, outs), inputs, rtol=1e-4, atol=1e-5)
