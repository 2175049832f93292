"""Attention handlers: TensorScatter against onnxruntime (reference evaluator and compiled,
write indices constant or fed at run time); FlexAttention (no onnxruntime kernel) against
onnx's reference, with score_mod/prob_mod subgraphs and grouped KV heads."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.testing import run_onnx_compiled, run_onnxruntime

from .conftest import Compare, assert_close, make_model

RNG = np.random.default_rng(7)
PREVIEW = "ai.onnx.preview"


def _scatter_model(
    past: tuple[int, ...], update: tuple[int, ...], write: np.ndarray | None, **attrs: object
) -> onnx.ModelProto:
    inputs = ["past", "update", "write" if write is not None else ""]
    node = helper.make_node("TensorScatter", inputs, ["present"], **attrs)
    inits = {"write": write} if write is not None else None
    specs = {"past": ("float32", past), "update": ("float32", update)}
    return make_model([node], specs, ["present"], inits, opset=24)


@pytest.mark.cc
@pytest.mark.parametrize(
    ("past", "update", "attrs", "write"),
    [
        ((2, 3, 6, 4), (2, 3, 2, 4), {}, [1, 4]),
        ((2, 3, 6, 4), (2, 3, 3, 4), {"mode": "circular"}, [5, 2]),
        ((3, 5, 4), (3, 2, 4), {"axis": 1}, [0, 3, 1]),
        ((2, 4, 3), (2, 4, 2), {"axis": -1, "mode": "circular"}, [2, 0]),
        ((2, 5, 3), (2, 2, 3), {"axis": 1}, None),
    ],
)
def test_tensor_scatter_matches_onnxruntime(compare_ort: Compare, past, update, attrs, write):
    idx = None if write is None else np.asarray(write, np.int64)
    model = _scatter_model(past, update, idx, **attrs)
    feeds = {"past": RNG.standard_normal(past, "float32")}
    feeds["update"] = RNG.standard_normal(update, "float32")
    compare_ort(model, feeds, rtol=0, atol=0)
    assert_close(run_onnx_compiled(model, feeds), run_onnxruntime(model, feeds), 0, 0)


@pytest.mark.cc
def test_compiled_tensor_scatter_reads_write_indices_at_run_time() -> None:
    node = helper.make_node("TensorScatter", ["past", "update", "write"], ["y"], mode="circular")
    specs = {"past": ("float32", (2, 1, 5, 3)), "update": ("float32", (2, 1, 2, 3))}
    specs["write"] = ("int64", (2,))
    model = make_model([node], specs, ["y"], opset=24)
    for write in ([0, 4], [3, 1]):
        feeds = {
            "past": RNG.standard_normal((2, 1, 5, 3), "float32"),
            "update": RNG.standard_normal((2, 1, 2, 3), "float32"),
            "write": np.asarray(write, np.int64),
        }
        assert_close(run_onnx_compiled(model, feeds), run_onnxruntime(model, feeds), 0, 0)


def _mod(name: str, nodes: list[onnx.NodeProto], value: str, out: str) -> onnx.GraphProto:
    shape = ["B", "H", "L", "S"]
    return helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(value, onnx.TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, shape)],
    )


def _flex_model(q: tuple, k: tuple, v: tuple, dtype: str = "float32", **attrs: object):
    node = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain=PREVIEW, **attrs)
    specs = {"q": (dtype, q), "k": (dtype, k), "v": (dtype, v)}
    return make_model([node], specs, ["y"], opset=26, extra_opsets={PREVIEW: 1})


SOFT_CAP = _mod(
    "soft_cap",
    [
        helper.make_node("Constant", [], ["cap"], value_float=2.0),
        helper.make_node("Div", ["s", "cap"], ["d"]),
        helper.make_node("Tanh", ["d"], ["t"]),
        helper.make_node("Mul", ["t", "cap"], ["out"]),
    ],
    "s",
    "out",
)
HALVE = _mod(
    "halve",
    [
        helper.make_node("Constant", [], ["h"], value_float=0.5),
        helper.make_node("Mul", ["p", "h"], ["out"]),
    ],
    "p",
    "out",
)


@pytest.mark.parametrize(
    ("q", "k", "v", "attrs"),
    [
        ((1, 2, 3, 8), (1, 2, 5, 8), (1, 2, 5, 4), {}),
        ((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8), {"scale": 0.3}),  # grouped KV heads
        ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), {"score_mod": SOFT_CAP}),
        ((1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8), {"prob_mod": HALVE, "score_mod": SOFT_CAP}),
    ],
)
@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.cc)])
def test_flex_attention_matches_onnx_reference(run_ember, q, k, v, attrs, compiled) -> None:
    model = _flex_model(q, k, v, **attrs)
    feeds = {n: RNG.standard_normal(s, "float32") for n, s in (("q", q), ("k", k), ("v", v))}
    want = [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]
    got = run_onnx_compiled(model, feeds) if compiled else run_ember(model, feeds)
    assert_close(got, want, rtol=1e-5, atol=1e-6)
