"""DFT against numpy's FFT (forward, inverse, onesided, dft_length, axes)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import run_onnx_compiled

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
