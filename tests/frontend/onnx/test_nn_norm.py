"""BatchNormalization, InstanceNormalization, GroupNormalization, LayerNormalization, LRN,
Softmax and LogSoftmax against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ember.errors import FrontendError
from ember.ir import Function, TensorType, Var, call, evaluate

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from .nn_check import check_node, rand
except ImportError:
    from nn_check import check_node, rand  # type: ignore[no-redef]


def _bn_params(c: int, dtype: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "s": rng.standard_normal(c).astype(dtype),
        "b": rng.standard_normal(c).astype(dtype),
        "m": rng.standard_normal(c).astype(dtype),
        "v": (rng.random(c) + 0.5).astype(dtype),
    }


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 4, 3, 3)])
def test_batch_norm(opset: int, shape: tuple[int, ...]) -> None:
    check_node(
        "BatchNormalization",
        {"x": rand(shape)},
        {"epsilon": 1e-3},
        _bn_params(shape[1], "float32"),
        opset=opset,
    )


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_batch_norm_dtypes(dtype: str) -> None:
    check_node(
        "BatchNormalization", {"x": rand((1, 3, 4, 4), dtype)}, {}, _bn_params(3, dtype), opset=15
    )


def test_batch_norm_training_mode() -> None:
    check_node(
        "BatchNormalization",
        {"x": rand((2, 3, 4, 5))},
        {"training_mode": 1, "momentum": 0.8},
        _bn_params(3, "float32"),
        opset=15,
        outputs=3,
    )


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 3), (1, 2, 3, 2, 2)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_instance_norm(shape: tuple[int, ...], dtype: str) -> None:
    c = shape[1]
    params = {"s": rand((c,), dtype, 1), "b": rand((c,), dtype, 2)}
    check_node("InstanceNormalization", {"x": rand(shape, dtype)}, {"epsilon": 1e-4}, params)


@pytest.mark.parametrize(
    ("opset", "shape", "groups"),
    [(18, (2, 6, 5), 3), (18, (1, 8, 3, 4), 2), (21, (1, 8, 3, 4), 4), (21, (2, 6), 2)],
)
def test_group_norm(opset: int, shape: tuple[int, ...], groups: int) -> None:
    """Opset 18's scale and bias are per group, opset 21's per channel (the ONNX reference:
    onnxruntime has no kernel for either)."""
    size = groups if opset < 21 else shape[1]
    params = {"s": rand((size,), "float32", 1), "b": rand((size,), "float32", 2)}
    attrs = {"num_groups": groups, "epsilon": 1e-4}
    check_node("GroupNormalization", {"x": rand(shape)}, attrs, params, opset=opset, reference=True)


def test_group_norm_groups_must_divide_the_channels() -> None:
    params = {"s": rand((3,), "float32", 1), "b": rand((3,), "float32", 2)}
    with pytest.raises(FrontendError, match="must divide the channels"):
        check_node("GroupNormalization", {"x": rand((1, 4, 3))}, {"num_groups": 3}, params, 18)


@pytest.mark.parametrize("axis", [-1, 1, 2, 0])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(axis: int, with_bias: bool) -> None:
    shape = (2, 3, 4)
    inner = shape[axis % 3 :]
    params = {"s": rand(inner, seed=1)}
    if with_bias:
        params["b"] = rand(inner, seed=2)
    check_node("LayerNormalization", {"x": rand(shape)}, {"axis": axis, "epsilon": 1e-3}, params)
    check_node("LayerNormalization", {"x": rand(shape)}, {"axis": axis}, params, outputs=3)


def test_layer_norm_float16() -> None:
    params = {"s": rand((4,), "float16", 1), "b": rand((4,), "float16", 2)}
    check_node("LayerNormalization", {"x": rand((3, 4), "float16")}, {}, params)


@pytest.mark.parametrize(
    "attrs", [{"size": 3}, {"size": 5, "alpha": 1e-2, "beta": 0.5, "bias": 2.0}]
)
@pytest.mark.parametrize("shape", [(1, 5, 3, 3), (2, 7, 4, 2)])
def test_lrn(attrs: dict[str, Any], shape: tuple[int, ...]) -> None:
    check_node("LRN", {"x": rand(shape)}, attrs)


@pytest.mark.parametrize("size", [2, 4, 5])
def test_lrn_reference_loops(size: int) -> None:
    """ORT only takes odd sizes on 4-D data: check even sizes and 3-D data with loops."""
    x = rand((2, 6, 4)).astype(np.float64)
    xv = Var("x", TensorType(x.shape, "float64"))
    expr = call("nn.lrn", xv, size=size, alpha=0.1, beta=0.6, bias=1.5)
    (y,) = evaluate(Function((xv,), expr), [x])
    want = np.empty_like(x)
    for c in range(6):
        lo, hi = max(0, c - (size - 1) // 2), min(6, c + size // 2 + 1)
        sq = (x[:, lo:hi] ** 2).sum(axis=1)
        want[:, c] = x[:, c] / (1.5 + 0.1 / size * sq) ** 0.6
    np.testing.assert_allclose(y, want, rtol=1e-12)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, -2])
def test_softmax(op: str, opset: int, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    check_node(op, {"x": rand((2, 3, 4)) * 3}, attrs, opset=opset)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_softmax_dtypes(op: str, dtype: str) -> None:
    check_node(op, {"x": rand((3, 5), dtype)}, {"axis": 1}, opset=13)


@pytest.mark.parametrize(("p", "axis"), [(1, -1), (2, 0), (2, 1)])
def test_lp_normalization(p, axis):
    x = rand((3, 4), "float32")
    x[1] = 0.0  # a zero norm along axis -1/1 gives zeros, not NaN
    check_node("LpNormalization", {"x": x}, {"p": p, "axis": axis})
