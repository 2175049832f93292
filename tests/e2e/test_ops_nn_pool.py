"""Compiled pools (max, average, Lp, global; small integers) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ember.testing import assert_matches_onnxruntime, build_model, node, random_input

pytestmark = pytest.mark.cc


def test_pools():
    rng = np.random.default_rng(4)
    inputs = {
        "x": random_input((2, 3, 11, 10), seed=rng),
        "x1": random_input((1, 2, 13), seed=rng),
        "x3": random_input((1, 2, 5, 6, 7), seed=rng),
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
