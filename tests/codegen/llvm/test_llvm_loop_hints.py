"""Loop hints: a vectorized loop that can return early (a failing check) is not forced
through LLVM's vectorizer, which cannot vectorize it and printed a warning to stderr."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.testing import run_onnx_compiled

pytest.importorskip("llvmlite")


def _stft():
    step = helper.make_tensor("step", TensorProto.INT64, [], [8])
    length = helper.make_tensor("length", TensorProto.INT64, [], [16])
    node = helper.make_node("STFT", ["x", "step", "", "length"], ["y"])
    graph = helper.make_graph(
        [node],
        "stft",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 15, 16, 2])],
        [step, length],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_stft_compiles_without_llvm_warnings(capfd: pytest.CaptureFixture[str]) -> None:
    """STFT's vectorized loops with index checks: no 'loop not vectorized' warning."""
    x = np.random.default_rng(2).standard_normal((1, 128, 1)).astype(np.float32)
    capfd.readouterr()
    got = run_onnx_compiled(_stft(), {"x": x}, target="llvm -jobs=1")[0]
    err = capfd.readouterr().err
    assert "loop not vectorized" not in err
    want = run_onnx_compiled(_stft(), {"x": x}, target="c")[0]
    np.testing.assert_array_equal(got, want)
