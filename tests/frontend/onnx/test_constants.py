"""Constant/structural handlers against onnxruntime: Constant, Identity, Dropout, Shape, Size,
ConstantOfShape, Range; and that they fold to constants."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.errors import FrontendError
from ember.frontend import from_onnx
from ember.ir import Constant

from .conftest import ort_run

RNG = np.random.default_rng(0)


def _x(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    "attrs",
    [
        {"value": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))},
        {"value": numpy_helper.from_array(np.array([1, -2, 3], dtype=np.int32))},
        {"value": numpy_helper.from_array(np.array(True))},
        {"value_float": 2.5},
        {"value_floats": [1.0, 2.0, 3.5]},
        {"value_int": -7},
        {"value_ints": [3, 1, 4, 1, 5]},
        {
            "sparse_value": helper.make_sparse_tensor(
                numpy_helper.from_array(np.array([5.0, 6.0], dtype=np.float32), "v"),
                numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "i"),
                [2, 3],
            )
        },
    ],
    ids=["tensor_f32", "tensor_i32", "tensor_bool", "float", "floats", "int", "ints", "sparse"],
)
def test_constant_forms(onnx_model, compare_ort, attrs):
    model = onnx_model(
        [
            helper.make_node("Constant", [], ["c"], **attrs),
            helper.make_node("Identity", ["c"], ["y"]),
        ],
        inputs={},
        outputs=["y"],
        opset=13,
    )
    (got,) = compare_ort(model, {})
    mod, params = from_onnx(model)
    assert isinstance(mod.main.body, Constant)
    assert params == {}
    assert got.size > 0


def test_constant_needs_exactly_one_value(onnx_model):
    model = onnx_model(
        [helper.make_node("Constant", [], ["c"], value_float=1.0, value_int=2)],
        inputs={},
        outputs=["c"],
    )
    with pytest.raises(FrontendError, match="exactly one value attribute"):
        from_onnx(model)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_identity(onnx_model, compare_ort, dtype):
    x = _x((2, 3, 4)).astype(dtype)
    model = onnx_model(
        [helper.make_node("Identity", ["x"], ["y"])], inputs={"x": (dtype, x.shape)}, outputs=["y"]
    )
    compare_ort(model, {"x": x})


@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
@pytest.mark.parametrize("with_mask", [False, True])
def test_dropout_inference(onnx_model, run_ember, opset, with_mask):
    outs = ["y", "mask"] if with_mask else ["y"]
    model = onnx_model(
        [
            helper.make_node("Dropout", ["x"], outs, ratio=0.3)
            if opset < 12
            else helper.make_node("Dropout", ["x"], outs)
        ],
        inputs={"x": ("float32", (3, 5))},
        outputs=outs,
        opset=opset,
    )
    x = _x((3, 5))
    got = run_ember(model, {"x": x})
    np.testing.assert_array_equal(got[0], ort_run(model, {"x": x})[0])
    if with_mask:
        # The mask marks kept elements: all of them in inference (ONNX's reference and
        # backend tests say ones; onnxruntime zero-fills it, so it is not compared).
        assert got[1].dtype == (np.bool_ if opset >= 10 else np.float32)
        assert got[1].shape == x.shape and (got[1] == 1).all()


def test_dropout_training_mode_draws_numpy_s_mask(onnx_model, run_ember):
    # (training mode used to be refused; it is numpy's RandomState now, docs/random.md)
    model = onnx_model(
        [helper.make_node("Dropout", ["x", "r", "t"], ["y"], name="drop1")],
        inputs={"x": ("float32", (3, 5))},
        outputs=["y"],
        initializers={"r": np.array(0.5, np.float32), "t": np.array(True)},
        opset=13,
    )
    x = _x((3, 5))
    (got,) = run_ember(model, {"x": x})
    seed = zlib.crc32(b"Dropout:y")  # no seed attribute: one from the build
    keep = np.random.RandomState(seed).uniform(0.0, 1.0, x.shape) >= 0.5
    np.testing.assert_array_equal(got, keep * x * np.float32(2.0))


def test_dropout_training_with_zero_ratio_is_identity(onnx_model, compare_ort):
    model = onnx_model(
        [helper.make_node("Dropout", ["x", "r", "t"], ["y"])],
        inputs={"x": ("float32", (3, 5))},
        outputs=["y"],
        initializers={"r": np.array(0.0, np.float32), "t": np.array(True)},
        opset=13,
    )
    compare_ort(model, {"x": _x((3, 5))})


@pytest.mark.parametrize(
    "opset,attrs",
    [
        (13, {}),
        (15, {}),
        (15, {"start": 1}),
        (15, {"start": -2}),
        (15, {"end": -1}),
        (15, {"start": 1, "end": 3}),
        (19, {"start": 5}),
        (21, {"start": -9, "end": 2}),
    ],
)
def test_shape(onnx_model, compare_ort, opset, attrs):
    model = onnx_model(
        [helper.make_node("Shape", ["x"], ["s"], **attrs)],
        inputs={"x": ("float32", (2, 3, 4, 5))},
        outputs=["s"],
        opset=opset,
    )
    compare_ort(model, {"x": _x((2, 3, 4, 5))})
    mod, _ = from_onnx(model)
    assert isinstance(mod.main.body, Constant)


@pytest.mark.parametrize("shape", [(), (7,), (2, 3, 4)])
def test_size(onnx_model, compare_ort, shape):
    model = onnx_model(
        [helper.make_node("Size", ["x"], ["n"])], inputs={"x": ("int32", shape)}, outputs=["n"]
    )
    compare_ort(model, {"x": np.ones(shape, np.int32)})


@pytest.mark.parametrize(
    "value",
    [
        None,
        np.array([3.5], np.float32),
        np.array([4], np.int32),
        np.array([1], np.int64),
        np.array([True]),
        np.array([2.0], np.float16),
    ],
)
@pytest.mark.parametrize("dims", [[2, 3], [4], [0, 3]])
def test_constant_of_shape(onnx_model, compare_ort, value, dims):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    model = onnx_model(
        [helper.make_node("ConstantOfShape", ["s"], ["y"], **attrs)],
        inputs={},
        outputs=["y"],
        initializers={"s": np.array(dims, np.int64)},
    )
    compare_ort(model, {})


def test_constant_of_shape_from_input_shape(onnx_model, compare_ort):
    model = onnx_model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node(
                "ConstantOfShape",
                ["s"],
                ["y"],
                value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5]),
            ),
        ],
        inputs={"x": ("float32", ("N", 5))},
        outputs=["y"],
    )
    want = np.full((4, 5), 1.5, np.float32)
    got = compare_ort(model, {"x": _x((4, 5))}, shape={"x": (4, 5)})
    np.testing.assert_array_equal(got[0], want)


def test_constant_of_shape_large_stays_a_broadcast(onnx_model):
    model = onnx_model(
        [helper.make_node("ConstantOfShape", ["s"], ["y"])],
        inputs={},
        outputs=["y"],
        initializers={"s": np.array([512, 1024], np.int64)},
    )
    mod, params = from_onnx(model)
    body = mod.main.body
    assert not isinstance(body, Constant)
    from ember.ir import evaluate

    (y,) = evaluate(mod, {}, params)
    assert y.shape == (512, 1024) and not y.any()


@pytest.mark.parametrize(
    "start,limit,delta,dtype",
    [
        (0, 10, 3, "int64"),
        (10, 0, -3, "int32"),
        (1.0, 2.5, 0.25, "float32"),
        (5, 5, 1, "int64"),
        (0.5, -1.0, -0.5, "float64"),
        (3, 1, 1, "int16"),
    ],
)
def test_range(onnx_model, compare_ort, start, limit, delta, dtype):
    model = onnx_model(
        [helper.make_node("Range", ["a", "b", "c"], ["y"])],
        inputs={},
        outputs=["y"],
        initializers={k: np.array(v, dtype) for k, v in zip("abc", (start, limit, delta))},
    )
    compare_ort(model, {})


def test_range_of_dynamic_input_is_reported(onnx_model):
    model = onnx_model(
        [helper.make_node("Range", ["a", "b", "c"], ["y"], name="rng")],
        inputs={"b": ("int64", ())},
        outputs=["y"],
        initializers={"a": np.array(0, np.int64), "c": np.array(1, np.int64)},
    )
    with pytest.raises(FrontendError, match="node 'rng' \\(Range.*must be constant"):
        from_onnx(model)
