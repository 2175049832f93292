"""BitCast handler: against onnxruntime where it has a kernel (onnx's reference for bool),
through the reference evaluator and compiled; width mismatches and half floats refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.errors import FrontendError, OpNotSupportedError
from ember.testing import run_onnx_compiled

from .conftest import Compare, assert_close, make_model

PAIRS = [
    ("float32", "int32"),
    ("int32", "float32"),
    ("float64", "int64"),
    ("int64", "float64"),
    ("uint32", "int32"),
    ("int8", "uint8"),
    ("uint16", "int16"),
]


def _model(src: str, dst: str, shape: tuple[int, ...]) -> onnx.ModelProto:
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    node = helper.make_node("BitCast", ["x"], ["y"], to=to)
    return make_model([node], {"x": (src, shape)}, ["y"], opset=26)


def _input(src: str, shape: tuple[int, ...]) -> np.ndarray:
    raw = np.random.default_rng(3).integers(0, 256, (*shape, np.dtype(src).itemsize), np.uint8)
    x = raw.view(src).reshape(shape)
    if np.dtype(src).kind == "f":  # finite floats: onnxruntime and numpy agree on NaN only
        x = np.where(np.isfinite(x), x, np.array(1.5, src))
    return x


@pytest.mark.parametrize(("src", "dst"), PAIRS)
def test_bitcast_matches_onnxruntime(compare_ort: Compare, src: str, dst: str) -> None:
    x = _input(src, (3, 4))
    got = compare_ort(_model(src, dst, x.shape), {"x": x}, rtol=0, atol=0)
    assert got[0].tobytes() == x.tobytes()


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(("src", "dst"), [*PAIRS, ("bool", "uint8")])
def test_compiled_bitcast_keeps_every_bit(src: str, dst: str, target: str) -> None:
    if target == "llvm":
        pytest.importorskip("llvmlite")
    x = np.array([True, False, True]) if src == "bool" else _input(src, (2, 5))
    model = _model(src, dst, x.shape)
    got = run_onnx_compiled(model, {"x": x}, target=target)
    want = [np.asarray(v) for v in ReferenceEvaluator(model).run(None, {"x": x})]
    assert_close(got, want, rtol=0, atol=0)
    assert got[0].tobytes() == x.tobytes()


@pytest.mark.cc
def test_compiled_bitcast_of_nan_and_signed_zero() -> None:
    x = np.array([np.nan, -0.0, np.inf, -np.inf], np.float32)
    got = run_onnx_compiled(_model("float32", "int32", x.shape), {"x": x})
    assert got[0].tobytes() == x.tobytes()


def test_width_mismatch_is_reported(run_ember) -> None:
    with pytest.raises(FrontendError, match="one width"):
        run_ember(_model("float32", "int64", (2,)), {"x": np.zeros(2, np.float32)})


@pytest.mark.cc
def test_half_floats_are_refused_at_compile_time() -> None:
    model = _model("float16", "int16", (2,))
    with pytest.raises(OpNotSupportedError, match="16-bit"):
        run_onnx_compiled(model, {"x": np.zeros(2, np.float16)})
