"""Scan computes (cumsum cumprod topk), lowered and interpreted, against the graph-IR numpy
references."""

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.lowering.lower_group import lower_group
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
def test_topk_on_long_axis(largest, dtype):
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
def test_long_cumsum(exclusive, reverse):
    x = _x((2, 300))
    _one("cumsum", x, axis=1, exclusive=exclusive, reverse=reverse)
    _one("cumsum", _x((261, 2), "int32"), axis=0, exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans_carry_the_running_value(op, exclusive, reverse):
    """Regression: scans summed masked prefixes, O(n^2) (CumSum of 64x1000 1675 us at one
    thread, onnxruntime 177); they now carry the running value along each line, lines of
    an inner axis side by side in SCAN_LANES vector lanes (the last block narrower)."""
    x = (1.0 + 0.05 * _x((2, 9, 70))).astype("float32")
    for axis in (0, 1, 2):
        _one(op, x, axis=axis, exclusive=exclusive, reverse=reverse)
    _one(op, _x((3, 7, 5, 30), "float16"), axis=1, exclusive=exclusive, reverse=reverse)
    _one(op, _x((4, 33), "int8"), axis=1, exclusive=exclusive, reverse=reverse)  # wraps
    xn = _x((2, 41))
    xn[0, 7], xn[1, 30] = np.nan, np.inf
    _one(op, xn, axis=1, exclusive=exclusive, reverse=reverse)


def test_scan_lines_run_in_parallel_and_vectorized():
    v = Var("x", TensorType((64, 1000), "float32"))
    rows = str(lower_group(primitive([v], call("cumsum", v, axis=1)), "k"))
    assert "parallel" in rows  # a scalar chain per row, rows in parallel
    cols = str(lower_group(primitive([v], call("cumsum", v, axis=0)), "k"))
    assert "parallel" in cols and "vectorized" in cols  # blocks of 64 columns


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_topk_keeps_the_best_k_sorted(largest, dtype):
    """Regression: topk ranked every element against every other (TopK 50 of 64x1000
    56.7 ms at one thread, onnxruntime 0.47) or ran k selection rounds; each line now keeps
    its best k sorted in the outputs, a later element entering when it beats the k-th."""
    x = _x((3, 50, 4), dtype)
    x[0, [2, 9, 30], 1] = 11  # ties at the top
    x[1, [4, 5], 2] = 0  # ties at the bottom (uint8's lowest)
    if dtype.startswith("float"):
        x[2, [3, 40], 0] = np.nan
        x[0, 10:20, 3] = -np.inf
    v = Var("x", TensorType(x.shape, dtype))
    for axis, k in ((1, 1), (1, 7), (1, 50), (0, 2), (2, 3)):
        check_lowered(primitive([v], call("topk", v, k=k, axis=axis, largest=largest)), [x])
    ramp = np.arange(40, dtype=dtype).reshape(1, 40)  # every element enters (worst case)
    w = Var("x", TensorType(ramp.shape, dtype))
    for k in (5, 40):
        check_lowered(primitive([w], call("topk", w, k=k, axis=1, largest=largest)), [ramp])
        check_lowered(
            primitive([w], call("topk", w, k=k, axis=1, largest=largest)), [ramp[:, ::-1].copy()]
        )


def test_topk_lines_run_in_parallel():
    v = Var("x", TensorType((64, 1000), "float32"))
    text = str(lower_group(primitive([v], call("topk", v, k=5, axis=1)), "k"))
    assert "parallel" in text
