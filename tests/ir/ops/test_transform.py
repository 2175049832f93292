"""Layout and indexing ops: type rules, messages and numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import Constant, OpPattern, TensorType, Var, call, evaluate_expr, get_op
from ember.ir.ops.transform import normalize_slice, slice_length

RNG = np.random.default_rng(2)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def run(op: str, *arrays: np.ndarray, **attrs: object) -> object:
    return evaluate_expr(call(op, *[Constant(a) for a in arrays], **attrs), {})


def var(shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var("x", TensorType(shape, dtype))


def test_reshape_transpose() -> None:
    np.testing.assert_array_equal(run("reshape", X, newshape=(4, 6)), X.reshape(4, 6))
    np.testing.assert_array_equal(run("transpose", X, axes=(2, 0, 1)), X.transpose(2, 0, 1))
    with pytest.raises(IRError, match=r"cannot reshape .* \(24 elements\) to \(5, 5\)"):
        call("reshape", var((2, 3, 4)), newshape=(5, 5))
    with pytest.raises(IRError, match="must be explicit"):
        call("reshape", var((2, 3, 4)), newshape=(-1, 4))
    with pytest.raises(IRError, match="not a permutation"):
        call("transpose", var((2, 3)), axes=(0, 0))
    assert get_op("reshape").pattern == OpPattern.INJECTIVE


def test_concatenate_split() -> None:
    y = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    np.testing.assert_array_equal(run("concatenate", X, y, axis=1), np.concatenate([X, y], 1))
    with pytest.raises(IRError, match=r"input 1 has shape \(2, 5, 3\), incompatible"):
        call("concatenate", var((2, 3, 4)), var((2, 5, 3)), axis=1)
    parts = run("split", X, sizes=(1, 3, 0), axis=2)
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [
        (2, 3, 1),
        (2, 3, 3),
        (2, 3, 0),
    ]
    np.testing.assert_array_equal(parts[1], X[:, :, 1:])
    with pytest.raises(IRError, match="must be >= 0 and sum to 4"):
        call("split", var((2, 3, 4)), sizes=(1, 2), axis=2)


@pytest.mark.parametrize(
    ("start", "end", "step"),
    [(0, 4, 1), (1, -1, 2), (-1, -100, -1), (10, -10, -2), (-100, 100, 3), (2, 2, 1), (3, 0, -1)],
)
def test_normalize_slice_matches_python(start: int, end: int, step: int) -> None:
    data = np.arange(4)
    b, e = normalize_slice(start, end, step, 4)
    got = b + step * np.arange(slice_length(b, e, step))
    np.testing.assert_array_equal(got, data[start:end:step])
    out = run("strided_slice", data, begin=(b,), end=(e,), strides=(step,))
    np.testing.assert_array_equal(out, data[start:end:step])


def test_strided_slice_checks() -> None:
    out = run("strided_slice", X, begin=(1, 2, 0), end=(2, -1, 4), strides=(1, -1, 2))
    np.testing.assert_array_equal(out, X[1:2, ::-1, 0:4:2])
    with pytest.raises(IRError, match="axis 1: .* is not normalised for size 3"):
        call("strided_slice", var((2, 3, 4)), begin=(0, -2, 0), end=(2, 3, 4), strides=(1, 1, 1))
    with pytest.raises(IRError, match="one entry per axis"):
        call("strided_slice", var((2, 3)), begin=(0,), end=(1,), strides=(1,))


def test_broadcast_tile_pad() -> None:
    a = RNG.standard_normal((3, 1)).astype(np.float32)
    np.testing.assert_array_equal(
        run("broadcast_to", a, shape=(2, 3, 5)), np.broadcast_to(a, (2, 3, 5))
    )
    with pytest.raises(IRError, match="cannot broadcast"):
        call("broadcast_to", var((3, 2)), shape=(3, 1))
    np.testing.assert_array_equal(run("tile", a, reps=(2, 3)), np.tile(a, (2, 3)))
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(
        run("nn.pad", m, pad_width=(1, 0, 0, 2), pad_value=-1.0),
        np.pad(m, ((1, 0), (0, 2)), constant_values=-1),
    )
    for mode in ("edge", "reflect", "wrap"):
        np.testing.assert_array_equal(
            run("nn.pad", m, pad_width=(2, 1, 0, 3), pad_mode=mode),
            np.pad(m, ((2, 0), (1, 3)), mode=mode),
        )
    with pytest.raises(IRError, match="reflect padding of 3 needs axis 0 longer than 3"):
        call("nn.pad", var((3, 4)), pad_width=(3, 0, 0, 0), pad_mode="reflect")
    with pytest.raises(IRError, match="pad_mode 'mirror' is unknown"):
        call("nn.pad", var((3, 4)), pad_width=(0, 0, 0, 0), pad_mode="mirror")


def test_take_and_gather_elements() -> None:
    idx = np.array([[0, -1], [2, 1]], np.int64)
    np.testing.assert_array_equal(run("take", X, idx, axis=1), np.take(X, [[0, 2], [2, 1]], axis=1))
    assert call("take", var((2, 3, 4)), Constant(idx), axis=2).type.shape == (2, 3, 2, 2)  # type: ignore[attr-defined]
    with pytest.raises(IRError, match="index 5 is out of range for an axis of size 3"):
        run("take", X, np.array([5], np.int32), axis=1)
    d = np.arange(9, dtype=np.float32).reshape(3, 3)
    gi = np.array([[1, 2, 0], [-1, 0, 0]], np.int32)
    np.testing.assert_array_equal(
        run("gather_elements", d, gi, axis=0),
        np.take_along_axis(d[:, :3], np.where(gi < 0, gi + 3, gi), 0),
    )
    with pytest.raises(IRError, match="indices of 'take' has dtype float32"):
        call("take", var((3,)), var((2,)))


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_trilu(k: int) -> None:
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(run("trilu", x, k=k), np.triu(x, k))
    np.testing.assert_array_equal(run("trilu", x, upper=False, k=k), np.tril(x, k))
    with pytest.raises(IRError, match="needs a rank >= 2 input"):
        call("trilu", var((3,)))


def test_gather_nd() -> None:
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[0, 1], [1, -1]], np.int64)
    np.testing.assert_array_equal(run("gather_nd", data, idx), data[[0, 1], [1, 2]])
    bidx = np.array([[2], [0]], np.int64)
    np.testing.assert_array_equal(run("gather_nd", data, bidx, batch_dims=1), data[[0, 1], [2, 0]])
    with pytest.raises(IRError, match="indices address 4 axes"):
        call("gather_nd", var((2, 3)), Constant(np.zeros((1, 4), np.int64)))


def test_one_hot() -> None:
    idx = np.array([[0, 2], [-1, 5]], np.int64)
    on, off = np.float32(5), np.float32(-1)
    out = run("one_hot", idx, on, off, depth=3, axis=2)
    expected = np.full((2, 2, 3), -1, np.float32)
    expected[0, 0, 0] = expected[0, 1, 2] = expected[1, 0, 2] = 5
    np.testing.assert_array_equal(out, expected)
    out0 = run("one_hot", idx, on, off, depth=3, axis=0)
    np.testing.assert_array_equal(out0, np.moveaxis(expected, 2, 0))


def test_scatter_elements_and_nd() -> None:
    data = np.zeros((3, 3), np.float32)
    idx = np.array([[1, 0, 2], [0, 2, -2]], np.int64)
    upd = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    out = run("scatter_elements", data, idx, upd, axis=0)
    want = data.copy()
    for i in range(2):
        for j in range(3):
            want[idx[i, j] % 3, j] = upd[i, j]
    np.testing.assert_array_equal(out, want)
    added = run(
        "scatter_elements",
        np.ones((1, 4), np.int32),
        np.array([[1, 1]]),
        np.array([[2, 3]], np.int32),
        axis=1,
        reduction="add",
    )
    np.testing.assert_array_equal(added, [[1, 6, 1, 1]])
    nd = run(
        "scatter_nd",
        np.zeros((2, 3), np.int64),
        np.array([[1], [0]]),
        np.array([[1, 2, 3], [4, 5, 6]]),
    )
    np.testing.assert_array_equal(nd, [[4, 5, 6], [1, 2, 3]])
    with pytest.raises(IRError, match="reduction 'sum' is unknown"):
        call(
            "scatter_nd",
            var((2,)),
            Constant(np.zeros((1, 1), np.int64)),
            var((1,)),
            reduction="sum",
        )
