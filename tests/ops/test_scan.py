"""Scan computes (cumsum cumprod topk), lowered and interpreted, against the graph-IR numpy
references."""

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.testing import random_input
from ember.testing.lowering import check_lowered, primitive


def _one(op: str, x: np.ndarray, **attrs) -> None:
    v = Var("x", TensorType(x.shape, x.dtype.name))
    check_lowered(primitive([v], call(op, v, **attrs)), [x])


def _x(shape, dtype="float32", seed=0) -> np.ndarray:
    return random_input(shape, dtype, seed, int_range=(-9, 10))


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_running_sum_and_product(op, exclusive, reverse):
    x = (1.0 + 0.1 * _x((3, 5))).astype("float32")
    for axis in (0, 1):
        _one(op, x, axis=axis, exclusive=exclusive, reverse=reverse)
    _one(op, _x((20,), "int64"), axis=0, exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_and_nan(largest):
    x = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 0, 0], [5, 4, 3, 2, 1]], "float32")
    for axis, k in ((1, 3), (0, 2), (1, 5), (1, 0)):
        v = Var("x", TensorType(x.shape, "float32"))
        check_lowered(primitive([v], call("topk", v, k=k, axis=axis, largest=largest)), [x])
    xn = np.array([[1.0, np.nan, 3.0, -1.0]], "float32")
    v = Var("x", TensorType(xn.shape, "float32"))
    check_lowered(primitive([v], call("topk", v, k=3, axis=1, largest=largest)), [xn])
    xi = _x((2, 3, 6), "int32")
    v = Var("x", TensorType(xi.shape, "int32"))
    check_lowered(primitive([v], call("topk", v, k=4, axis=2, largest=largest)), [xi])


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_topk_selection_rounds_on_long_axis(largest, dtype):
    x = _x((2, 40), dtype)
    x[0, 5] = x[0, 20] = x[0, 33] = 9  # ties at the top
    x[1, 7] = x[1, 8] = -9  # ties at the bottom
    if dtype == "float32":
        x[1, 30] = np.nan
        x[0, 1] = -np.inf
    v = Var("x", TensorType(x.shape, dtype))
    for k in (1, 3, 6):
        check_lowered(primitive([v], call("topk", v, k=k, axis=1, largest=largest)), [x])


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_long_cumsum_in_blocks(exclusive, reverse):
    x = _x((2, 300))
    _one("cumsum", x, axis=1, exclusive=exclusive, reverse=reverse)
    _one("cumsum", _x((261, 2), "int32"), axis=0, exclusive=exclusive, reverse=reverse)
