"""Reductions, arg reductions and topk: type rules, messages and references."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import Constant, OpPattern, TensorType, TupleType, Var, call, evaluate_expr, get_op
from ember.ir.ops.common import normalize_axes

RNG = np.random.default_rng(1)


def run(op: str, *arrays: np.ndarray, **attrs: object) -> object:
    return evaluate_expr(call(op, *[Constant(a) for a in arrays], **attrs), {})


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("axes", [(0,), (1, 2), (0, 1, 2), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(dtype: str, axes: tuple[int, ...], keepdims: bool) -> None:
    x = (RNG.standard_normal((2, 3, 4)) * 4).astype(dtype)
    for op, fn in [("sum", np.sum), ("max", np.max), ("min", np.min), ("prod", np.prod)]:
        out = run(op, x, axes=axes, keepdims=keepdims)
        want = (
            fn(x, axis=axes, keepdims=keepdims, dtype=x.dtype)
            if op in ("sum", "prod")
            else fn(x, axis=axes, keepdims=keepdims)
        )
        assert isinstance(out, np.ndarray) and out.dtype == x.dtype
        np.testing.assert_allclose(out, want, rtol=1e-5)
    mean = run("mean", x, axes=axes, keepdims=keepdims)
    if dtype.startswith("float"):
        np.testing.assert_allclose(mean, np.mean(x, axis=axes, keepdims=keepdims), rtol=1e-5)
    else:
        total = np.sum(x, axis=axes, keepdims=keepdims)
        count = int(np.prod([x.shape[a] for a in axes]))
        np.testing.assert_array_equal(mean, np.trunc(total / count).astype(dtype))
    assert get_op("sum").pattern == OpPattern.COMM_REDUCE


def test_reduce_type_rule_and_errors() -> None:
    x = Var("x", TensorType((2, 3, 4), "float32"))
    assert call("sum", x, axes=(0, 2)).type == TensorType((3,), "float32")
    assert call("max", x, axes=(1,), keepdims=True).type == TensorType((2, 1, 4), "float32")
    with pytest.raises(IRError, match=r"axes \(-1,\) must be sorted, unique and in \[0, 3\)"):
        call("sum", x, axes=(-1,))
    with pytest.raises(IRError, match="missing required attribute 'axes'"):
        call("sum", x)
    assert normalize_axes((-1, 0), 3) == (0, 2)
    with pytest.raises(IRError, match="repeat an axis"):
        normalize_axes((1, -2), 3)
    with pytest.raises(IRError, match="axis 3 is out of range for a tensor of rank 3"):
        normalize_axes((3,), 3, "axis")


def test_empty_reductions_give_identities() -> None:
    x = np.zeros((2, 0, 3), np.float32)
    np.testing.assert_array_equal(run("sum", x, axes=(1,)), np.zeros((2, 3)))
    np.testing.assert_array_equal(run("prod", x, axes=(1,)), np.ones((2, 3)))
    np.testing.assert_array_equal(run("max", x, axes=(1,)), np.full((2, 3), -np.inf))
    np.testing.assert_array_equal(
        run("min", x.astype(np.int32), axes=(1,)), np.full((2, 3), 2**31 - 1)
    )


def test_half_sum_accumulates_in_float32() -> None:
    x = np.full((4096,), 1.0, np.float16)
    out = run("sum", x, axes=(0,))
    assert isinstance(out, np.ndarray) and out.dtype == np.float16 and float(out) == 4096.0


def test_argmax_argmin() -> None:
    x = np.array([[1, 3, 3, 0], [2, 2, 0, 0]], np.float32)
    np.testing.assert_array_equal(run("argmax", x, axis=1), [1, 0])
    np.testing.assert_array_equal(run("argmax", x, axis=1, select_last_index=True), [2, 1])
    np.testing.assert_array_equal(run("argmin", x, axis=1, select_last_index=True), [3, 3])
    out = run("argmin", x, axis=0, keepdims=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.int64 and out.shape == (1, 4)
    with pytest.raises(IRError, match="axis of size 0 has no result|axis 1 of size 0"):
        call("argmax", Var("x", TensorType((2, 0), "float32")), axis=1)


def test_topk_ties_and_order() -> None:
    x = np.array([[3, 1, 3, 2, 1]], np.int32)
    values, idx = run("topk", x, k=3, axis=1)  # type: ignore[misc]
    np.testing.assert_array_equal(values, [[3, 3, 2]])
    np.testing.assert_array_equal(idx, [[0, 2, 3]])
    values, idx = run("topk", x, k=3, axis=1, largest=False)  # type: ignore[misc]
    np.testing.assert_array_equal(values, [[1, 1, 2]])
    np.testing.assert_array_equal(idx, [[1, 4, 3]])
    v = Var("x", TensorType((2, 5), "float32"))
    assert call("topk", v, k=2, axis=1).type == TupleType(
        (TensorType((2, 2), "float32"), TensorType((2, 2), "int64"))
    )
    with pytest.raises(IRError, match=r"k=6 is outside \[0, 5\]"):
        call("topk", v, k=6, axis=1)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_cumprod(exclusive: bool, reverse: bool) -> None:
    x = np.array([[1, 2, 3, 4], [2, 2, 2, 2]], np.int32)

    def expect(fn: object, ident: int) -> np.ndarray:
        y = x[:, ::-1] if reverse else x
        out = fn(y, axis=1)  # type: ignore[operator]
        if exclusive:
            out = np.concatenate([np.full((2, 1), ident), out[:, :-1]], axis=1)
        return out[:, ::-1] if reverse else out

    got = run("cumsum", x, axis=1, exclusive=exclusive, reverse=reverse)
    np.testing.assert_array_equal(got, expect(np.cumsum, 0))
    got = run("cumprod", x, axis=1, exclusive=exclusive, reverse=reverse)
    np.testing.assert_array_equal(got, expect(np.cumprod, 1))
    assert get_op("cumsum").pattern == OpPattern.OPAQUE
