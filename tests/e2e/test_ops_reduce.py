"""Compiled reductions against onnxruntime: ReduceSum/Mean/Max/Min/Prod and the composed
ReduceL1/L2/SumSquare/LogSum/LogSumExp, ArgMax/ArgMin (ties, select_last_index), TopK,
CumSum and the Hardmax/Softmax-free compositions the importer builds from them.

Each test builds one ONNX model holding several nodes (one C compile per model).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from onnx import helper

from ember import testing
from ember.testing import assert_matches_onnxruntime

pytestmark = pytest.mark.cc

#: the models of this file default to opset 18.
build_model = partial(testing.build_model, opset=18)


REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"]
COMPOSED = ["ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("axes,keep", [((1,), 1), ((0, 2), 0), ((-1,), 1), (None, 0)])
def test_reductions(dtype, axes, keep):
    rng = np.random.default_rng(0)
    if dtype == "float32":
        x = (rng.standard_normal((3, 4, 5)) * 0.5 + 1.0).astype(dtype)
    else:
        x = rng.integers(-3, 4, (3, 4, 5)).astype(dtype)
    ops = REDUCE + (COMPOSED if dtype == "float32" else [])
    inputs = ["x"] if axes is None else ["x", "axes"]
    nodes = [helper.make_node(op, inputs, [f"y{k}"], keepdims=keep) for k, op in enumerate(ops)]
    inits = {} if axes is None else {"axes": np.array(axes, "int64")}
    outs = [f"y{k}" for k in range(len(ops))]
    model = build_model(nodes, {"x": x}, outs, inits)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_long_axis_sum_max_prod_and_logsum():
    rng = np.random.default_rng(1)
    x = (1.0 + 0.001 * rng.standard_normal((8, 1000))).astype("float32")
    ops = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSum", "ReduceMean"]
    nodes = [helper.make_node(op, ["x", "axes"], [f"y{k}"], keepdims=0) for k, op in enumerate(ops)]
    model = build_model(
        nodes, {"x": x}, [f"y{k}" for k in range(len(ops))], {"axes": np.array([1])}
    )
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_argmax_argmin_ties_and_last_index(dtype):
    x = np.array([[[1, 3, 3, 0], [2, 2, 2, 2], [5, 0, 5, 0]]] * 2, dtype)
    x[1] = np.random.default_rng(2).integers(-5, 5, (3, 4)).astype(dtype)
    nodes = []
    for op in ("ArgMax", "ArgMin"):
        for axis in (1, 2):
            for last in (0, 1):
                k = len(nodes)
                nodes.append(
                    helper.make_node(
                        op, ["x"], [f"y{k}"], axis=axis, keepdims=axis == 1, select_last_index=last
                    )
                )
    model = build_model(nodes, {"x": x}, [f"y{k}" for k in range(len(nodes))])
    assert_matches_onnxruntime(model, {"x": x})


def test_topk_and_cumsum():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 10)).astype("float32")
    x[0, 3] = x[0, 7]  # a tie
    node = helper.make_node
    nodes = [
        node("TopK", ["x", "k"], ["v0", "i0"], axis=1, largest=1),
        node("TopK", ["x", "k"], ["v1", "i1"], axis=-1, largest=0),
        node("TopK", ["x", "k2"], ["v2", "i2"], axis=0),
        node("CumSum", ["x", "ax"], ["c0"]),
        node("CumSum", ["x", "ax"], ["c1"], exclusive=1, reverse=1),
    ]
    z = rng.standard_normal((2, 500)).astype("float32")
    z[1, 100] = z[1, 400] = 10.0  # a tie at the top
    nodes.append(node("TopK", ["z", "k"], ["v3", "i3"], axis=1))  # selection rounds
    nodes.append(node("TopK", ["z", "k"], ["v4", "i4"], axis=1, largest=0))
    nodes.append(node("CumSum", ["z", "ax"], ["c2"], reverse=1))  # blocked scan
    inits = {"k": np.array([4], "int64"), "k2": np.array([2], "int64"), "ax": np.array(1)}
    outs = ["v0", "i0", "v1", "i1", "v2", "i2", "c0", "c1", "v3", "i3", "v4", "i4", "c2"]
    feeds = {"x": x, "z": z}
    assert_matches_onnxruntime(build_model(nodes, feeds, outs, inits), feeds, rtol=1e-5)


def test_empty_tensors_reduce_to_identities():
    node = helper.make_node
    x = np.zeros((2, 0, 3), "float32")
    y = np.random.default_rng(4).standard_normal((2, 4, 3)).astype("float32")
    nodes = [
        node("ReduceSum", ["x", "ax"], ["y0"], keepdims=0),
        node("ReduceMax", ["x", "ax"], ["y1"], keepdims=1),
        node("ReduceProd", ["x", "ax"], ["y2"], keepdims=0),
        node("Concat", ["x", "y"], ["y3"], axis=1),
        node("Relu", ["x"], ["y4"]),
        node("ArgMax", ["y"], ["y5"], axis=1),
    ]
    outs = [f"y{k}" for k in range(6)]
    feeds = {"x": x, "y": y}
    model = build_model(nodes, feeds, outs, {"ax": np.array([1])})
    assert_matches_onnxruntime(model, feeds)
