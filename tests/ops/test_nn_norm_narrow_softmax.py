"""nn.softmax on float16/bfloat16, compiled for C: bit for bit onnx's reference, which
computes each step in the narrow type (numpy float16 / ml_dtypes bfloat16): x - max, exp,
the row sum (numpy: float16 summed in float32, rounded once; ml_dtypes: a chain of
bfloat16 additions) and the quotient. The IR reference evaluator agrees with it too."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ember.driver import build
from ember.ir import Function, IRModule, TensorType, Var, call, evaluate
from ember.lowering.widen_half import WIDENED_OPS
from ember.testing.runners import run_artifacts

pytestmark = pytest.mark.cc

NARROW = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def onnx_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    """onnx.reference's Softmax (and Attention's softmax), in x's own dtype."""
    tmp = x - x.max(axis=axis, keepdims=True)
    y = np.exp(tmp)
    return y / y.sum(axis=axis, keepdims=True)


def _module(shape: tuple[int, ...], dtype: str, axis: int) -> IRModule:
    x = Var("x", TensorType(shape, dtype))
    return IRModule.from_expr(Function((x,), call("nn.softmax", x, axis=axis)))


@pytest.mark.parametrize("dtype", sorted(NARROW))
@pytest.mark.parametrize(("shape", "axis"), [((3, 5, 7), -1), ((4, 40), 1), ((6, 5), 0)])
def test_narrow_softmax_matches_onnx_reference_bit_for_bit(
    dtype: str, shape: tuple[int, ...], axis: int
) -> None:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(shape) * 3).astype(NARROW[dtype])
    want = onnx_softmax(x, axis)
    mod = _module(shape, dtype, axis)
    (got,) = run_artifacts(build(mod, target="c"), {"x": x})
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    (ref,) = evaluate(mod, {"x": x})
    np.testing.assert_array_equal(np.asarray(ref).astype(np.float32), want.astype(np.float32))


def test_narrow_sum_differs_from_float32_softmax_rounded_once() -> None:
    """The reference's rounding is what the test above holds to: on these inputs a float32
    softmax rounded once differs from it (so the narrow compute is really exercised)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((4, 40)) * 3).astype(NARROW["bfloat16"])
    wide = x.astype(np.float32)
    once = onnx_softmax(wide, 1).astype(x.dtype)
    assert not np.array_equal(once.astype(np.float32), onnx_softmax(x, 1).astype(np.float32))


def test_softmax_is_not_widened() -> None:
    assert "nn.softmax" not in WIDENED_OPS
    assert "nn.log_softmax" in WIDENED_OPS
