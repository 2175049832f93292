"""Index handlers against onnxruntime: Gather GatherElements GatherND ScatterElements
ScatterND OneHot EyeLike Compress Trilu."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import random_input

from .conftest import Compare, make_model, one

RNG = np.random.default_rng(7)
I64 = np.int64


def rand(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    """Seeded inputs of ``dtype`` (integers in [-50, 50))."""
    return random_input(shape, dtype, seed=int(RNG.integers(1 << 16)), int_range=(-50, 50))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize(
    ("idx_dtype", "dtype"), [("int32", "float32"), ("int64", "bool"), ("int64", "int64")]
)
def test_gather(compare_ort: Compare, axis: int, idx_dtype: str, dtype: str) -> None:
    x = rand((3, 4, 5), dtype)
    dim = x.shape[axis]
    for idx in (np.array([[0, -1], [dim - 1, 1]]), np.array(-2), np.array([1])):
        node = helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)
        inputs = {"x": (dtype, x.shape), "i": (idx_dtype, idx.shape)}
        model = make_model([node], inputs, ["y"], opset=13)
        compare_ort(model, {"x": x, "i": idx.astype(idx_dtype)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements(compare_ort: Compare, axis: int) -> None:
    x = rand((3, 4), "int64")
    idx = RNG.integers(-x.shape[axis], x.shape[axis], (2, 3)).astype(np.int64)
    node = helper.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)
    model = make_model(
        [node], {"x": ("int64", x.shape), "i": ("int64", idx.shape)}, ["y"], opset=13
    )
    compare_ort(model, {"x": x, "i": idx})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2, 10])
def test_trilu(compare_ort: Compare, upper: int, k: int | None) -> None:
    x = rand((2, 4, 5))
    consts = {} if k is None else {"k": np.array(k, I64)}
    compare_ort(one("Trilu", x, consts, opset=14, upper=upper), {"x": x})


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd(compare_ort: Compare, batch_dims: int) -> None:
    x = rand((2, 3, 4))
    idx = np.array([[[1, 2]], [[0, -1]]], I64) if batch_dims else np.array([[1, 2], [0, 0]], I64)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims)
    model = make_model([node], {"x": ("float32", x.shape), "i": ("int64", idx.shape)}, ["y"])
    compare_ort(model, {"x": x, "i": idx})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter(compare_ort: Compare, reduction: str) -> None:
    x = rand((3, 4))
    idx = np.array([[0, 2, 1, 0], [2, 0, 1, 1]], I64)
    upd = rand((2, 4))
    if reduction == "none":  # distinct targets only: duplicates are undefined in ONNX
        idx = np.array([[0, 2, 1, 0], [2, 0, 0, 1]], I64)
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction=reduction)
    inputs = {"x": ("float32", x.shape), "i": ("int64", idx.shape), "u": ("float32", upd.shape)}
    compare_ort(make_model([node], inputs, ["y"], opset=18), {"x": x, "i": idx, "u": upd})
    nidx = (
        np.array([[1, 0], [2, 3], [1, 1]], I64)
        if reduction == "none"
        else np.array([[1, 0], [1, 0], [0, 3]], I64)
    )
    nupd = rand((3,))
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    inputs = {"x": ("float32", x.shape), "i": ("int64", nidx.shape), "u": ("float32", nupd.shape)}
    compare_ort(make_model([node], inputs, ["y"], opset=18), {"x": x, "i": nidx, "u": nupd})


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(compare_ort: Compare, axis: int) -> None:
    idx = np.array([[0, 3], [-1, 7]], I64)
    consts = {"d": np.array(5, I64), "v": np.array([-2.0, 3.0], np.float32)}
    compare_ort(one("OneHot", idx, consts, opset=11, axis=axis), {"x": idx})


@pytest.mark.parametrize("k", [0, 1, -2])
def test_eye_like(compare_ort: Compare, k: int) -> None:
    x = rand((3, 5))
    compare_ort(one("EyeLike", x, opset=9, k=k), {"x": x})
    compare_ort(one("EyeLike", x, opset=9, k=k, dtype=7), {"x": x})


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress(compare_ort: Compare, axis: int | None) -> None:
    x = rand((3, 4))
    cond = np.array([True, False, True], bool)
    attrs = {} if axis is None else {"axis": axis}
    compare_ort(one("Compress", x, {"c": cond}, opset=11, **attrs), {"x": x})
