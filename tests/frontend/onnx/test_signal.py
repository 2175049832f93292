"""DFT and STFT against numpy's FFT and onnxruntime (forward, inverse, onesided,
dft_length, axes, windows); MelWeightMatrix against the ONNX reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.frontend.onnx import fft
from ember.testing import run_onnx_compiled, run_onnxruntime

from .conftest import make_model

RNG = np.random.default_rng(5)


def _dft_model(shape, opset, axis, length=None, **attrs):
    inputs = ["x", "n" if length is not None else ""]
    inits = {} if length is None else {"n": np.array(length, np.int64)}
    if opset >= 20:
        inputs.append("axis")
        inits["axis"] = np.array(axis, np.int64)
    else:
        attrs["axis"] = axis
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    return make_model([node], {"x": ("float32", shape)}, ["y"], inits, opset=opset)


def _complex(y: np.ndarray) -> np.ndarray:
    return y[..., 0] + 1j * y[..., 1]


@pytest.mark.parametrize("opset", [17, 20])
def test_forward_real_and_onesided(opset, run_ember):
    x = RNG.standard_normal((2, 8, 3, 1)).astype(np.float32)
    full = run_ember(_dft_model(x.shape, opset, 1), {"x": x})[0]
    np.testing.assert_allclose(_complex(full), np.fft.fft(x[..., 0], axis=1), atol=1e-4)
    half = run_ember(_dft_model(x.shape, opset, 1, onesided=1), {"x": x})[0]
    np.testing.assert_allclose(_complex(half), np.fft.rfft(x[..., 0], axis=1), atol=1e-4)


def test_inverse_complex_with_length_and_last_signal_axis(run_ember):
    x = RNG.standard_normal((2, 3, 6, 2)).astype(np.float32)
    z = x[..., 0] + 1j * x[..., 1]
    y = run_ember(_dft_model(x.shape, 20, -2, length=8, inverse=1), {"x": x})[0]
    np.testing.assert_allclose(_complex(y), np.fft.ifft(z, n=8, axis=2), atol=1e-5)


def test_inverse_onesided_gives_the_real_signal(run_ember):
    signal = RNG.standard_normal((2, 10)).astype(np.float32)
    spectrum = np.fft.rfft(signal, axis=1)
    x = np.stack([spectrum.real, spectrum.imag], -1).astype(np.float32)
    y = run_ember(_dft_model(x.shape, 17, 1, inverse=1, onesided=1), {"x": x})[0]
    assert y.shape == (2, 10, 1)
    np.testing.assert_allclose(y[..., 0], signal, atol=1e-5)


@pytest.mark.cc
def test_dft_compiles():
    x = RNG.standard_normal((1, 8, 2)).astype(np.float32)
    y = run_onnx_compiled(_dft_model(x.shape, 17, 1), {"x": x})[0]
    np.testing.assert_allclose(_complex(y), np.fft.fft(_complex(x), axis=1), atol=1e-4)


def _stft_model(shape, step, frame=None, window=None, onesided=1):
    inits = {"step": np.array(step, np.int64)}
    names = ["x", "step", "", ""]
    if window is not None:
        inits["window"] = window
        names[2] = "window"
    if frame is not None:
        inits["frame"] = np.array(frame, np.int64)
        names[3] = "frame"
    while not names[-1]:
        names.pop()
    node = helper.make_node("STFT", names, ["y"], onesided=onesided)
    return make_model([node], {"x": ("float32", shape)}, ["y"], inits, opset=17)


@pytest.mark.cc
def test_stft_compiled_against_onnxruntime():
    """Batch 2, odd length, complex signal (two-sided) and a window, against onnxruntime."""
    real = RNG.standard_normal((2, 45, 1)).astype(np.float32)
    model = _stft_model(real.shape, 6, frame=10)
    np.testing.assert_allclose(
        run_onnx_compiled(model, {"x": real})[0], run_onnxruntime(model, {"x": real})[0], atol=1e-4
    )
    window = np.hanning(9).astype(np.float32)
    model = _stft_model(real.shape, 4, window=window)
    np.testing.assert_allclose(
        run_onnx_compiled(model, {"x": real})[0], run_onnxruntime(model, {"x": real})[0], atol=1e-4
    )


def test_stft_complex_two_sided_against_numpy(run_ember):
    x = RNG.standard_normal((3, 20, 2)).astype(np.float32)
    y = run_ember(_stft_model(x.shape, 5, frame=8, onesided=0), {"x": x})[0]
    z = x[..., 0] + 1j * x[..., 1]
    frames = np.stack([z[:, f * 5 : f * 5 + 8] for f in range(3)], 1)
    assert y.shape == (3, 3, 8, 2)
    np.testing.assert_allclose(_complex(y), np.fft.fft(frames, axis=2), atol=1e-4)


@pytest.mark.parametrize(
    ("bins", "length", "rate", "low", "high"), [(8, 16, 8192, 0, 4096), (5, 31, 16000, 300, 7000)]
)
def test_mel_weight_matrix_is_onnx_reference_constant(run_ember, bins, length, rate, low, high):
    inits = {
        "b": np.array(bins, np.int32),
        "n": np.array(length, np.int32),
        "r": np.array(rate, np.int32),
        "lo": np.array(low, np.float32),
        "hi": np.array(high, np.float32),
    }
    node = helper.make_node("MelWeightMatrix", list(inits), ["y"], output_datatype=11)
    model = make_model([node], {}, ["y"], inits, opset=17)
    want = ReferenceEvaluator(model).run(None, {})[0]
    got = run_ember(model, {})[0]
    assert got.dtype == np.float64 and got.shape == (length // 2 + 1, bins)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 10, 12, 15, 20, 36, 60])
def test_inverse_dft_matches_numpy_float32_bit_for_bit(run_ember, n):
    """Lengths of radix 2/3/4/5 run pocketfft's float32 passes: numpy's complex64 ifft
    exactly, including the rounding noise where the exact result is 0."""
    x = RNG.standard_normal((3, n, 2)).astype(np.float32)
    x[0] = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    y = run_ember(_dft_model(x.shape, 17, 1, inverse=1), {"x": x})[0]
    want = np.fft.ifft(_complex(x).astype(np.complex64), axis=1)
    assert want.dtype == np.complex64
    np.testing.assert_array_equal(_complex(y), want)


def test_fft_factors_follow_pocketfft():
    assert fft.factors(10) == [2, 5]
    assert fft.factors(12) == [4, 3] and fft.factors(60) == [4, 3, 5]
    assert fft.factors(16) is None and fft.factors(7) is None and fft.factors(1) == []
