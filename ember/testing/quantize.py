"""Quantize a float ONNX model with onnxruntime's quantizer, for tests and benchmarks, and
measure how close two quantized executions are.

* :func:`quantize_static` - QDQ form (``QuantFormat.QDQ``): uint8 activations, int8 weights
  per output channel, calibrated (MinMax) on a small seeded set around the given inputs.
  Weights use 7 bits (``reduce_range``), onnxruntime's advice for CPUs without VNNI: its
  AVX2 u8s8 kernel adds pairs of u8*s8 products in int16 with saturation (``vpmaddubsw``),
  so full 8-bit weights make its results deviate from the exact integer ones.
* :func:`quantize_dynamic` - MatMul/Conv/Gemm weights int8, activations quantized at run
  time (DynamicQuantizeLinear + MatMulInteger/ConvInteger).
* :func:`quantization_step_agreement` - the fraction of output elements within one
  quantization step (the output's scale) of the reference.

onnxruntime is imported only inside the functions (a test-only dependency).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import version_converter

from ember.errors import EmberError

#: the opset a float model is converted to before quantization when it is older (the
#: quantizer writes per-axis DequantizeLinear nodes, which need opset 13).
MIN_OPSET = 13


def _ort_quantization() -> Any:
    try:
        from onnxruntime import quantization  # optional: a test-only dependency
    except ImportError as err:
        raise EmberError(
            "ember.testing.quantize needs onnxruntime; install it with `pip install onnxruntime`"
        ) from err
    return quantization


def calibration_set(
    inputs: Mapping[str, np.ndarray], count: int = 8, seed: int = 0
) -> list[dict[str, np.ndarray]]:
    """``count`` seeded variations of ``inputs``: float inputs get noise of their own std,
    integer inputs (token ids, masks) are kept."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        feed = {}
        for name, value in inputs.items():
            if value.dtype.kind == "f":
                noise = rng.standard_normal(value.shape) * float(np.std(value) or 1.0)
                feed[name] = (value + 0.5 * noise).astype(value.dtype)
            else:
                feed[name] = value
        out.append(feed)
    return out


def _reader(feeds: list[dict[str, np.ndarray]]) -> Any:
    quant = _ort_quantization()

    class Reader(quant.CalibrationDataReader):  # type: ignore[misc, name-defined]
        """Feeds the seeded calibration set once."""

        def __init__(self) -> None:
            self._it: Iterator[dict[str, np.ndarray]] = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    return Reader()


def _preprocessed(model: onnx.ModelProto, tmp: Path) -> Path:
    """onnxruntime's quantization pre-processing (batch norms folded into convolutions,
    shapes inferred), written to ``tmp``: what its documentation asks before quantizing."""
    quant = _ort_quantization()
    raw, done = tmp / "raw.onnx", tmp / "float.onnx"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:  # per-axis quantization needs opset 13
        model = version_converter.convert_version(model, MIN_OPSET)
    onnx.save(model, raw)
    quant.quant_pre_process(str(raw), str(done), skip_symbolic_shape=True)
    return done


def quantize_static(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    count: int = 8,
    seed: int = 0,
    qoperator: bool = False,
) -> onnx.ModelProto:
    """``model`` quantized to QDQ form (``qoperator``: onnxruntime's QOperator form, QLinearConv
    and com.microsoft QLinearAdd, QGemm, ...), calibrated on :func:`calibration_set`."""
    quant = _ort_quantization()
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = _preprocessed(model, Path(tmp)), Path(tmp) / "int8.onnx"
        quant.quantize_static(
            str(src),
            str(dst),
            _reader(calibration_set(inputs, count, seed)),
            quant_format=quant.QuantFormat.QOperator if qoperator else quant.QuantFormat.QDQ,
            activation_type=quant.QuantType.QUInt8,
            weight_type=quant.QuantType.QInt8,
            per_channel=True,
            reduce_range=True,
            calibrate_method=quant.CalibrationMethod.MinMax,
        )
        return onnx.load(dst)


def quantize_dynamic(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with int8 weights and activations quantized at run time."""
    quant = _ort_quantization()
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = _preprocessed(model, Path(tmp)), Path(tmp) / "int8.onnx"
        quant.quantize_dynamic(
            str(src), str(dst), weight_type=quant.QuantType.QInt8, reduce_range=True
        )
        return onnx.load(dst)


def output_step(model: onnx.ModelProto, output: str) -> float | None:
    """The scale of the DequantizeLinear producing graph output ``output`` (None if not one)."""
    inits = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] == output:
            scale = inits.get(node.input[1])
            if scale is not None:
                return float(np.max(onnx.numpy_helper.to_array(scale)))
    return None


def quantization_step_agreement(got: np.ndarray, want: np.ndarray, step: float) -> float:
    """The fraction of elements of ``got`` within ``step`` (plus float rounding) of ``want``."""
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    tol = step * (1 + 1e-4) + 1e-6 * np.abs(np.asarray(want, np.float64))
    return float(np.mean(diff <= tol))
