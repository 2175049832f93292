"""Reduction computes (sum mean max min prod argmax argmin), lowered and interpreted,
against the graph-IR numpy references."""

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.lowering.lower_group import lower_group
from ember.testing import random_input
from ember.testing.lowering import check_lowered, primitive

_group = primitive
check = check_lowered


def _one(op: str, x: np.ndarray, **attrs) -> None:
    v = Var("x", TensorType(x.shape, x.dtype.name))
    check(_group([v], call(op, v, **attrs)), [x])


def _x(shape, dtype="float32", seed=0) -> np.ndarray:
    return random_input(shape, dtype, seed, int_range=(-9, 10))


AXES = [((0,), False), ((1,), True), ((0, 2), False), ((0, 1, 2), True), ((), False)]


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_reductions(op, dtype):
    x = _x((3, 4, 5), dtype)
    if op == "prod" and dtype == "float32":
        x = (x * 0.5 + np.sign(x)).astype(dtype)
    for axes, keep in AXES:
        _one(op, x, axes=axes, keepdims=keep)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
def test_empty_reduction_gives_identity(op):
    _one(op, np.zeros((2, 0, 3), "float32"), axes=(1,), keepdims=False)
    _one(op, np.zeros((2, 0, 3), "int64"), axes=(1,), keepdims=True)


def test_long_product_is_staged():
    x = (1.0 + 0.01 * _x((2, 300))).astype("float64")
    _one("prod", x, axes=(1,), keepdims=False)
    xi = np.random.default_rng(1).integers(-3, 4, (3, 50)).astype("int64")
    _one("prod", xi, axes=(0, 1), keepdims=True)


def test_bool_max_min_are_any_all():
    x = _x((4, 5), "bool")
    _one("max", x, axes=(1,), keepdims=False)
    _one("min", x, axes=(0, 1), keepdims=True)


def test_max_min_propagate_nan():
    x = _x((3, 4))
    x[1, 2] = np.nan
    for op in ("max", "min", "sum", "mean"):
        _one(op, x, axes=(1,), keepdims=False)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("last", [False, True])
def test_arg_extremes_with_ties(op, last):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [5, 0, 5, 0]], "float32")
    for axis in (0, 1):
        for keep in (False, True):
            _one(op, x, axis=axis, keepdims=keep, select_last_index=last)
    _one(op, _x((2, 3, 4), "int32"), axis=2, keepdims=False, select_last_index=last)
    xn = np.array([[1.0, np.nan, 5.0, np.nan], [3.0, 2.0, 1.0, 0.0]], "float32")
    _one(op, xn, axis=1, keepdims=False, select_last_index=last)


def test_reduction_with_epilogue_fuses():
    x = _x((4, 6))
    v = Var("x", TensorType(x.shape, "float32"))
    body = call("exp", call("mean", call("relu", v), axes=(1,), keepdims=True))
    check(_group([v], call("subtract", v, body)), [x])


def test_long_last_axis_float_sums_use_vector_lanes():
    x = _x((3, 2, 128))
    v = Var("x", TensorType(x.shape, "float32"))
    for op in ("sum", "mean"):
        func = _group([v], call(op, v, axes=(2,), keepdims=op == "mean"))
        check(func, [x])
        assert "_lanes" in str(lower_group(func, "k"))


def test_reduction_schedules_parallel_rows_and_vector_lanes():
    v = Var("x", TensorType((64, 768), "float32"))
    text = str(lower_group(_group([v], call("mean", v, axes=(1,), keepdims=False)), "k"))
    assert "parallel" in text and "vectorized" in text  # rows in parallel, 8 summing lanes
    w = Var("w", TensorType((256, 64), "float32"))
    text = str(lower_group(_group([w], call("max", w, axes=(0,), keepdims=False)), "k"))
    assert "vectorized" in text  # axis 0 reduced: the contiguous last axis is the vector


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize(("axes", "keep"), [((2, 3), True), ((2, 3), False), ((1, 2, 3), False)])
@pytest.mark.parametrize("hw", [(6, 12), (7, 7), (14, 14)])
def test_trailing_axes_float_reductions_use_vector_lanes(op, axes, keep, hw):
    """Regression: ReduceMean over H and W of NCHW (PyTorch's ``mean((2, 3))``) ran one
    scalar chain per channel, 7x slower than onnxruntime; trailing axes now
    reduce over their flattened extent in lanes (a tail of n % 8 elements summed with the
    lanes: SE blocks' 7 x 7), a NaN still propagating through max/min."""
    x = _x((2, 3, *hw))
    x[1, 2, 4, 5] = np.nan
    x[0, 1, -1, -1] = 50.0  # the last element, in the tail when n % 8
    v = Var("x", TensorType(x.shape, "float32"))
    func = _group([v], call(op, v, axes=axes, keepdims=keep))
    check(func, [x])
    assert "_lanes" in str(lower_group(func, "k"))
    unit = Var("u", TensorType((1, 3, *hw), "float32"))  # axis 0 of extent 1 does not count
    batch1 = _group([unit], call(op, unit, axes=(0, 2, 3), keepdims=keep))
    check(batch1, [x[:1]])
    assert "_lanes" in str(lower_group(batch1, "k"))
    if op in ("max", "min"):  # not trailing: no lanes
        other = _group([v], call(op, v, axes=(1, 3), keepdims=False))
        check(other, [x])
        assert "_lanes" not in str(lower_group(other, "k"))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("last", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8"])
def test_arg_extremes_over_long_rows_in_lanes(op, last, dtype):
    """Regression: argmax/argmin over a last axis of ARG_LANES or more run as one pass of
    running (value, index) lanes per row (ArgMax of 64x1000 74 -> 7.5 us at one thread);
    ties to the first (last) index across lanes and the tail, NaN winning."""
    x = _x((3, 2, 77), dtype)  # 77: two whole blocks of 32 and a tail of 13
    top, bottom = 11, 0 if dtype == "uint8" else -11
    x[0, 0, [5, 40, 70]] = top  # ties at the top in two lanes and the tail
    x[0, 1, [3, 35]] = bottom  # ties at the bottom in two blocks of the same lane
    x[1, 0, 76] = top  # the extreme in the tail only
    x[1, 0, 0] = bottom
    if dtype.startswith("float"):
        x[2, 0, [10, 50]] = np.nan
        x[2, 1, 70] = np.nan  # NaN in the tail
        x[1, 1, :] = np.inf
    for keep in (False, True):
        _one(op, x, axis=2, keepdims=keep, select_last_index=last)
    _one(op, _x((32,), dtype, seed=2), axis=0, keepdims=False, select_last_index=last)


def test_arg_extremes_row_kernel_structure_and_fused_producer():
    v = Var("x", TensorType((64, 1000), "float32"))
    text = str(lower_group(_group([v], call("argmax", v, axis=1, keepdims=True)), "k"))
    assert "parallel" in text and "vectorized" in text  # rows in parallel, vector lanes
    x = _x((4, 100))
    w = Var("x", TensorType(x.shape, "float32"))
    check(_group([w], call("argmin", call("relu", w), axis=1, keepdims=False)), [x])
