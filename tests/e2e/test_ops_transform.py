"""Compiled layout and indexing ops against onnxruntime: Reshape, Flatten, Squeeze,
Unsqueeze, Transpose, Concat, Split, Slice (negative steps), Expand, Tile, Pad (all modes),
Gather, GatherElements, GatherND, OneHot, Trilu, ScatterElements and ScatterND.

Each test builds one ONNX model holding several nodes (one C compile per model); constant
operands (shapes, pads, indices) are initializers so the importer sees them as static.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from onnx import helper

from ember import testing
from ember.testing import assert_matches_onnxruntime
from ember.testing import random_input as rand

pytestmark = pytest.mark.cc

#: the models of this file default to opset 18.
build_model = partial(testing.build_model, opset=18)


def i64(*values: int) -> np.ndarray:
    return np.array(values, "int64")


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_reshape_transpose_and_friends(dtype):
    x = rand((2, 3, 4), dtype)
    node = helper.make_node
    nodes = [
        node("Reshape", ["x", "s0"], ["y0"]),
        node("Reshape", ["x", "s1"], ["y1"]),
        node("Flatten", ["x"], ["y2"], axis=2),
        node("Unsqueeze", ["x", "ax"], ["u"]),
        node("Squeeze", ["u", "ax"], ["y3"]),
        node("Transpose", ["x"], ["y4"], perm=[2, 0, 1]),
        node("Transpose", ["x"], ["t"], perm=[1, 2, 0]),
        node("Reshape", ["t", "s2"], ["y5"]),
    ]
    inits = {"s0": i64(4, -1), "s1": i64(0, 4, 3), "ax": i64(1), "s2": i64(12, 2)}
    outs = [f"y{k}" for k in range(6)]
    assert_matches_onnxruntime(build_model(nodes, {"x": x}, outs, inits), {"x": x})


def test_concat_split_slice():
    a, b, c = rand((2, 3, 4), seed=1), rand((2, 5, 4), seed=2), rand((2, 1, 4), seed=3)
    node = helper.make_node
    nodes = [
        node("Concat", ["a", "b", "c"], ["y0"], axis=1),
        node("Concat", ["a", "a"], ["y1"], axis=-1),
        node("Split", ["b", "sp"], ["y2", "y3", "y4"], axis=1),
        node("Slice", ["b", "st", "en", "axs", "stp"], ["y5"]),
        node("Slice", ["b", "st2", "en2"], ["y6"]),
    ]
    inits = {
        "sp": i64(1, 3, 1),
        "st": i64(-1, 4, 0),
        "en": i64(-100, 0, 4),
        "axs": i64(1, 0, 2),
        "stp": i64(-2, -1, 3),
        "st2": i64(0, 1, 1),
        "en2": i64(1, 4, 3),
    }
    feeds = {"a": a, "b": b, "c": c}
    outs = [f"y{k}" for k in range(7)]
    assert_matches_onnxruntime(build_model(nodes, feeds, outs, inits), feeds)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_expand_tile_pad(dtype):
    x = rand((3, 1, 4), dtype, 4)
    node = helper.make_node
    nodes = [
        node("Expand", ["x", "shape"], ["y0"]),
        node("Tile", ["x", "reps"], ["y1"]),
        node("Pad", ["x", "pads", "val"], ["y2"], mode="constant"),
        node("Pad", ["x", "pads"], ["y3"], mode="edge"),
        node("Pad", ["x", "rpads"], ["y4"], mode="reflect"),
        node("Pad", ["x", "pads"], ["y5"], mode="wrap"),
    ]
    inits = {
        "shape": i64(2, 3, 5, 4),
        "reps": i64(2, 3, 1),
        "pads": i64(1, 0, 2, 0, 2, 1),
        "rpads": i64(2, 0, 3, 1, 0, 2),
        "val": np.array(7, dtype),
    }
    outs = [f"y{k}" for k in range(6)]
    assert_matches_onnxruntime(build_model(nodes, {"x": x}, outs, inits, opset=19), {"x": x})


def test_gathers_one_hot_trilu():
    x = rand((4, 5, 6), seed=5)
    node = helper.make_node
    nodes = [
        node("Gather", ["x", "gi"], ["y0"], axis=1),
        node("Gather", ["x", "gs"], ["y1"], axis=0),
        node("GatherElements", ["x", "ge"], ["y2"], axis=2),
        node("GatherND", ["x", "gn"], ["y3"]),
        node("GatherND", ["x", "gb"], ["y4"], batch_dims=1),
        node("OneHot", ["oi", "depth", "onoff"], ["y5"], axis=-1),
        node("Trilu", ["x"], ["y6"], upper=1),
        node("Trilu", ["x", "k"], ["y7"], upper=0),
    ]
    rng = np.random.default_rng(6)
    inits = {
        "gi": np.array([[0, -1], [3, 2]], "int64"),
        "gs": np.array(-2, "int64"),
        "ge": rng.integers(-6, 6, (4, 5, 3)).astype("int64"),
        "gn": np.array([[1, 2], [-1, 0], [0, 4]], "int64"),
        "gb": np.array([[1], [0], [4], [2]], "int64"),
        "oi": np.array([[0, 2, -1], [4, 1, 3]], "int64"),
        "depth": np.array(5, "int64"),
        "onoff": np.array([0.0, 2.5], "float32"),
        "k": np.array(-1, "int64"),
    }
    outs = [f"y{k}" for k in range(8)]
    assert_matches_onnxruntime(build_model(nodes, {"x": x}, outs, inits), {"x": x})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatters(reduction):
    data = rand((4, 5), seed=7)
    upd = rand((2, 5), seed=8)
    node = helper.make_node
    nodes = [
        node("ScatterElements", ["data", "ei", "upd"], ["y0"], axis=0, reduction=reduction),
        node("ScatterND", ["data", "ni", "upd"], ["y1"], reduction=reduction),
    ]
    inits = {
        "ei": np.array([[1, 0, 2, -1, 3], [0, 2, 1, 3, 0]], "int64"),
        "ni": np.array([[2], [0]] if reduction == "none" else [[2], [2]], "int64"),
    }
    feeds = {"data": data, "upd": upd}
    if reduction == "none":
        inits["ei"] = np.array([[1, 0, 2, -1, 3], [0, 2, 1, 1, 0]], "int64")
    assert_matches_onnxruntime(build_model(nodes, feeds, ["y0", "y1"], inits), feeds)
