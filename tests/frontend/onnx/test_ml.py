"""ml handlers against onnxruntime: Binarizer, ArrayFeatureExtractor and TreeEnsemble
(ai.onnx.ml) and TfIdfVectorizer, through the reference evaluator and compiled."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ember.errors import FrontendError, OpNotSupportedError
from ember.testing import run_onnx_compiled, run_onnxruntime

from .conftest import Compare, assert_close, make_model

#: nearly every test here also compiles the model.
pytestmark = pytest.mark.cc
RNG = np.random.default_rng(17)


def _ml_model(node: onnx.NodeProto, inputs: dict, opset: int = 5) -> onnx.ModelProto:
    return make_model([node], inputs, ["y"], opset=21, extra_opsets={"ai.onnx.ml": opset})


def _both(model: onnx.ModelProto, feeds: dict, compare_ort: Compare, tol: float = 0.0) -> None:
    compare_ort(model, feeds, rtol=tol, atol=tol)
    assert_close(run_onnx_compiled(model, feeds), run_onnxruntime(model, feeds), tol, tol)


@pytest.mark.parametrize("dtype", ["float32"])  # onnxruntime has float32 only
def test_binarizer(compare_ort: Compare, dtype: str) -> None:
    node = helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", threshold=0.25)
    x = RNG.standard_normal((3, 5)).astype(dtype)
    _both(_ml_model(node, {"x": (dtype, x.shape)}, 1), {"x": x}, compare_ort)


@pytest.mark.parametrize(
    ("shape", "indices"), [((3, 4), [3, 0, 3]), ((2, 3, 5), [[1, 4]]), ((6,), [5, 2])]
)
def test_array_feature_extractor(compare_ort: Compare, shape, indices) -> None:
    node = helper.make_node("ArrayFeatureExtractor", ["x", "i"], ["y"], domain="ai.onnx.ml")
    idx = np.asarray(indices, np.int64)
    model = make_model(
        [node],
        {"x": ("float32", shape)},
        ["y"],
        {"i": idx},
        opset=21,
        extra_opsets={"ai.onnx.ml": 1},
    )
    _both(model, {"x": RNG.standard_normal(shape).astype(np.float32)}, compare_ort)


def _forest(dtype: str, aggregate: int, **extra: object) -> onnx.NodeProto:
    """Two trees over 3 features, every comparison mode, a set-membership node and a NaN
    that goes to the true branch; leaves feed 3 targets."""
    np_t = np.dtype(dtype)
    return helper.make_node(
        "TreeEnsemble",
        ["x"],
        ["y"],
        domain="ai.onnx.ml",
        n_targets=3,
        aggregate_function=aggregate,
        tree_roots=[0, 3],
        nodes_featureids=[0, 1, 2, 1, 0, 2],
        nodes_modes=numpy_helper.from_array(np.array([0, 6, 3, 1, 4, 5], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array([0.0, np.nan, 0.5, 0.2, 1.0, -1.0], np_t)),
        nodes_truenodeids=[1, 0, 2, 4, 4, 6],
        nodes_trueleafs=[0, 1, 1, 0, 1, 1],
        nodes_falsenodeids=[2, 1, 3, 5, 5, 7],
        nodes_falseleafs=[0, 1, 1, 1, 1, 1],
        nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0],
        membership_values=numpy_helper.from_array(np.array([1.0, 2.0, np.nan], np_t)),
        leaf_targetids=[0, 1, 2, 0, 1, 2, 0, 1],
        leaf_weights=numpy_helper.from_array(np.arange(1, 9, dtype=np_t) * 1.5),
        **extra,
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("aggregate", [0, 1, 2, 3])
def test_tree_ensemble(compare_ort: Compare, dtype: str, aggregate: int) -> None:
    x = RNG.integers(-2, 3, (8, 3)).astype(dtype)
    x[0, 0] = np.nan
    x[1, 1] = 1.0
    model = _ml_model(_forest(dtype, aggregate), {"x": (dtype, x.shape)})
    _both(model, {"x": x}, compare_ort, 1e-6)


@pytest.mark.parametrize(("post", "fn"), [(1, "softmax"), (2, "logistic")])
def test_tree_ensemble_post_transform(run_ember, post: int, fn: str) -> None:
    """The spec's numbering (1 SOFTMAX, 2 LOGISTIC) on top of the raw scores; onnxruntime
    1.32 swaps the two and onnx's reference ignores the attribute, so the raw scores come
    from onnxruntime and the transform from numpy."""
    x = RNG.integers(-2, 3, (5, 3)).astype(np.float32)
    raw = run_onnxruntime(_ml_model(_forest("float32", 1), {"x": ("float32", x.shape)}), {"x": x})
    if fn == "softmax":
        e = np.exp(raw[0] - raw[0].max(axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    else:
        want = 1 / (1 + np.exp(-raw[0]))
    model = _ml_model(_forest("float32", 1, post_transform=post), {"x": ("float32", x.shape)})
    assert_close(run_ember(model, {"x": x}), [want.astype(np.float32)], 1e-6, 1e-6)
    assert_close(run_onnx_compiled(model, {"x": x}), [want.astype(np.float32)], 1e-6, 1e-6)


def test_tree_ensemble_probit_is_refused(run_ember) -> None:
    model = _ml_model(_forest("float32", 1, post_transform=4), {"x": ("float32", (2, 3))})
    with pytest.raises(OpNotSupportedError, match="post_transform"):
        run_ember(model, {"x": np.zeros((2, 3), np.float32)})


TFIDF = {
    "ngram_counts": [0, 4],
    "ngram_indexes": [0, 1, 2, 3, 4, 5, 6],
    "pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7],
}


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize(("lo", "hi", "skip"), [(1, 2, 0), (2, 2, 3), (1, 1, 2), (1, 2, 5)])
@pytest.mark.parametrize("shape", [(12,), (2, 6)])
def test_tfidf_vectorizer(compare_ort: Compare, mode: str, lo: int, hi: int, skip: int, shape):
    extra = {} if mode == "TF" else {"weights": [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]}
    node = helper.make_node(
        "TfIdfVectorizer",
        ["x"],
        ["y"],
        mode=mode,
        min_gram_length=lo,
        max_gram_length=hi,
        max_skip_count=skip,
        **extra,
        **TFIDF,
    )
    x = np.array([1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8], np.int32).reshape(shape)
    model = make_model([node], {"x": ("int32", shape)}, ["y"], opset=9)
    _both(model, {"x": x}, compare_ort, 1e-6)


def test_tfidf_vectorizer_int64_and_shared_columns(run_ember) -> None:
    """Two n-grams per column: onnx's reference weighs by column (onnxruntime by n-gram,
    which agrees only when each column has one n-gram); ember follows the reference."""
    node = helper.make_node(
        "TfIdfVectorizer",
        ["x"],
        ["y"],
        mode="TFIDF",
        min_gram_length=1,
        max_gram_length=2,
        max_skip_count=1,
        ngram_counts=[0, 3],
        ngram_indexes=[2, 0, 2, 1, 0],
        pool_int64s=[4, 5, 6, 4, 5, 6, 6],
        weights=[2.0, 3.0, 0.5, 9.0, 9.0],
    )
    x = RNG.integers(3, 8, (3, 9)).astype(np.int64)
    model = make_model([node], {"x": ("int64", x.shape)}, ["y"], opset=9)
    want = [np.asarray(v) for v in ReferenceEvaluator(model).run(None, {"x": x})]
    assert_close(run_ember(model, {"x": x}), want, 1e-6, 1e-6)
    assert_close(run_onnx_compiled(model, {"x": x}), want, 1e-6, 1e-6)


def test_tree_ensemble_node_id_out_of_range_is_reported(run_ember) -> None:
    node = _forest("float32", 1)
    for attr in node.attribute:
        if attr.name == "nodes_truenodeids":
            attr.ints[0] = 9
    model = _ml_model(node, {"x": ("float32", (2, 3))})
    with pytest.raises(FrontendError, match="outside the 6 nodes"):
        run_ember(model, {"x": np.zeros((2, 3), np.float32)})
