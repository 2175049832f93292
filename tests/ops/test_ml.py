"""The ml computes (tree_ensemble, tfidf_vectorizer), lowered and interpreted, against the
numpy references; the tables are given as parameters, as the graph planner lifts them."""

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.testing.lowering import check_lowered, primitive


def _vars(arrays: dict[str, np.ndarray]) -> list[Var]:
    return [Var(n, TensorType(a.shape, a.dtype.name)) for n, a in arrays.items()]


@pytest.mark.parametrize("aggregate", ["sum", "average", "min", "max"])
def test_tree_ensemble_every_mode(aggregate: str) -> None:
    # tree 0: node 0 (x0 <= 0.5) -> node 1 (x1 member of {1, 3}) / node 2 (x2 != 2)
    # tree 1: node 3 (x0 > -1, NaN goes true) -> leaf 4 / leaf 5; tree 2: a lone leaf 6
    ints = np.array(
        [
            [0, 0, 1, 2, 0, 0, 0],
            [1, 6, -1, -2, 0, 0, 2],
            [2, 5, -3, -4, 0, 0, 0],
            [0, 3, -5, -6, 1, 0, 0],
        ],
        np.int32,
    )
    tables = {
        "x": np.array([[0.0, 1, 2], [1, 3, 5], [np.nan, 0, 2], [-2, 2, 2]], np.float32),
        "ints": ints,
        "splits": np.array([0.5, 0, 2, -1], np.float32),
        "members": np.array([1, 3], np.float32),
        "roots": np.array([0, 3, -7], np.int32),
        "targets": np.array([0, 1, 2, 0, 1, 2, 0], np.int32),
        "weights": np.array([1, 2, 4, 8, 16, 32, 64], np.float32),
    }
    vs = _vars(tables)
    body = call("tree_ensemble", *vs, n_targets=3, aggregate=aggregate, depth=2)
    check_lowered(primitive(vs, body), list(tables.values()))


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("max_skip", [0, 2])
def test_tfidf_vectorizer(mode: str, max_skip: int) -> None:
    pool = np.zeros((3, 2, 2), np.int64)
    lengths = np.zeros((3, 2), np.int32)
    pool[0, 0, 0], lengths[0, 0] = 5, 1  # unigram 5
    pool[1, 0], lengths[1, 0] = (5, 7), 2  # bigram 5 7
    pool[1, 1, 0], lengths[1, 1] = 2, 1  # a second gram in column 1: unigram 2
    pool[2, 0], lengths[2, 0] = (7, 7), 2
    tables = {
        "x": np.array([[5, 7, 7, 2, 5, 1, 7], [2, 2, 5, 5, 7, 7, 7]], np.int32),
        "pool": pool,
        "lengths": lengths,
        "weights": np.array([0.5, 2.0, 3.0], np.float32),
    }
    vs = _vars(tables)
    body = call("tfidf_vectorizer", *vs, mode=mode, max_skip=max_skip)
    check_lowered(primitive(vs, body), list(tables.values()))
