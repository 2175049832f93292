"""Ops ember has no handler for but ONNX defines as functions import by expansion."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.frontend.onnx.expand import expand_functions
from ember.frontend.onnx.registry import find_handler
from ember.testing import run_onnx_compiled

from .conftest import make_model

RNG = np.random.default_rng(11)


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _has_handler(op: str, opset: int, domain: str) -> bool:
    return find_handler(op, opset, domain) is not None


def _single(op: str, feeds: dict[str, np.ndarray], opset: int, outputs: int = 1, **attrs):
    node = helper.make_node(op, list(feeds), [f"y{i}" for i in range(outputs)], **attrs)
    inputs = {k: (v.dtype.name, v.shape) for k, v in feeds.items()}
    return make_model([node], inputs, [f"y{i}" for i in range(outputs)], opset=opset)


CASES = [
    ("Attention", {"q": _f(2, 4, 8), "k": _f(2, 6, 8), "v": _f(2, 6, 8)}, 23,
     {"q_num_heads": 2, "kv_num_heads": 2}),
    ("Attention", {"q": _f(1, 2, 4, 3), "k": _f(1, 2, 4, 3), "v": _f(1, 2, 4, 5)}, 24,
     {"is_causal": 1, "scale": 0.5}),
    ("RMSNormalization", {"x": _f(2, 3, 8), "s": _f(8)}, 23, {"epsilon": 1e-4}),
    ("RotaryEmbedding",
     {"x": _f(1, 2, 3, 4), "cos": _f(1, 3, 2), "sin": _f(1, 3, 2)}, 23, {}),
    ("SwiGLU", {"x": _f(2, 6), "b": _f(2, 6)}, 28, {}),
    ("GroupNormalization", {"x": _f(2, 4, 3), "s": _f(4), "b": _f(4)}, 21, {"num_groups": 2}),
    ("MeanVarianceNormalization", {"x": _f(2, 3, 4, 2)}, 18, {}),
]  # fmt: skip


def _usable(opset: int) -> bool:
    return opset <= onnx.defs.onnx_opset_version()


@pytest.mark.parametrize(("op", "feeds", "opset", "attrs"), CASES, ids=[c[0] for c in CASES])
def test_function_op_matches_onnx_reference(op, feeds, opset, attrs, run_ember):
    if not _usable(opset):
        pytest.skip(f"the installed onnx does not know opset {opset}")
    model = _single(op, feeds, opset, **attrs)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = run_ember(model, feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)


def test_window_op_with_constant_size(run_ember):
    node = helper.make_node("HannWindow", ["n"], ["y"], periodic=0)
    model = make_model([node], {}, ["y"], {"n": np.array(8, np.int64)}, opset=17)
    want = ReferenceEvaluator(model).run(None, {})
    np.testing.assert_allclose(run_ember(model, {})[0], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.cc
def test_expanded_attention_compiles():
    feeds = {"q": _f(2, 4, 8), "k": _f(2, 6, 8), "v": _f(2, 6, 8)}
    model = _single("Attention", feeds, 23, q_num_heads=2, kv_num_heads=2)
    want = ReferenceEvaluator(model).run(None, feeds)
    np.testing.assert_allclose(run_onnx_compiled(model, feeds)[0], want[0], rtol=1e-5, atol=1e-5)


def test_ops_with_a_handler_are_not_expanded():
    model = _single("LayerNormalization", {"x": _f(2, 4), "s": _f(4)}, 17)
    assert expand_functions(model, _has_handler) is model


def test_a_body_with_unsupported_ops_leaves_the_op_to_the_report():
    # AffineGrid's body uses If; without an If handler the node stays AffineGrid, so the
    # unsupported-op report names the op the user wrote.
    node = helper.make_node("AffineGrid", ["theta", "size"], ["y"])
    model = make_model(
        [node], {"theta": ("float32", (2, 2, 3))}, ["y"],
        {"size": np.array([2, 1, 3, 4], np.int64)}, opset=20,
    )  # fmt: skip

    def no_if(op: str, opset: int, domain: str) -> bool:
        return op != "If" and _has_handler(op, opset, domain)

    assert expand_functions(model, no_if) is model
    assert [n.op_type for n in expand_functions(model, _has_handler).graph.node] != ["AffineGrid"]
