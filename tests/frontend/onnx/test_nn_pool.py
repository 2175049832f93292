"""MaxPool, AveragePool and the global pools against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from .nn_check import check_node, rand
except ImportError:
    from nn_check import check_node, rand  # type: ignore[no-redef]

POOL_CASES = [
    ((1, 2, 9), {"kernel_shape": [3], "strides": [2]}),
    ((2, 3, 7, 8), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 2, 7, 8), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "ceil_mode": 1, "strides": [2, 2]}),
    ((1, 2, 6, 6), {"kernel_shape": [3, 3], "ceil_mode": 1, "strides": [2, 2], "pads": [1] * 4}),
    ((1, 2, 8, 8), {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 0, 0, 1]}),
    ((1, 2, 5, 6, 4), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [0, 1, 1] * 2}),
]


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
def test_max_pool(shape: tuple[int, ...], attrs: dict[str, Any]) -> None:
    check_node("MaxPool", {"x": rand(shape)}, attrs, opset=12)


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("include", [0, 1])
def test_avg_pool(shape: tuple[int, ...], attrs: dict[str, Any], include: int) -> None:
    check_node("AveragePool", {"x": rand(shape)}, {**attrs, "count_include_pad": include}, opset=19)


@pytest.mark.parametrize("dtype", ["float64", "float16", "uint8", "int8"])
def test_max_pool_dtypes(dtype: str) -> None:
    x = (rand((1, 3, 6, 6)) * 50).astype(dtype)
    check_node("MaxPool", {"x": x}, {"kernel_shape": [2, 2], "pads": [1, 1, 0, 0]}, opset=12)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_avg_pool_dtypes(dtype: str) -> None:
    x = rand((1, 3, 6, 6), dtype)
    check_node("AveragePool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2]}, opset=11)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 5, 6), (1, 2, 3, 4, 5)])
def test_global_pools(op: str, shape: tuple[int, ...]) -> None:
    check_node(op, {"x": rand(shape)})
    check_node(op, {"x": rand(shape, "float16")})


@pytest.mark.parametrize("shape,attrs", POOL_CASES)
@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_indices(shape: tuple[int, ...], attrs: dict[str, Any], order: int) -> None:
    x = rand(shape)
    check_node("MaxPool", {"x": x}, {**attrs, "storage_order": order}, opset=12, outputs=2)


@pytest.mark.parametrize("shape,attrs", POOL_CASES[:4] + POOL_CASES[7:])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(shape: tuple[int, ...], attrs: dict[str, Any], p: int) -> None:
    check_node("LpPool", {"x": rand(shape)}, {**attrs, "p": p}, opset=11)


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 5, 6)])
def test_global_lp_pool(shape: tuple[int, ...]) -> None:
    check_node("GlobalLpPool", {"x": rand(shape)}, {"p": 3}, opset=13)


def test_max_unpool_scatters_to_the_pool_indices():
    x = np.array([[[[5.0, 6.0], [7.0, 8.0]]]], np.float32)
    idx = np.array([[[[5, 7], [13, 15]]]], np.int64)
    attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    check_node("MaxUnpool", {"x": x}, attrs, params={"i": idx}, input_order=["x", "i"])
