"""Test helper: the float32 tile kernels' compiled tests (tests/ops) for ``llvm`` and
``llvmjit``, bitwise against ``c``.

``tile_suite(module, only)`` loads a private copy of ``tests/ops/<module>.py`` (its fixtures
and the tests named in ``only``) with an autouse fixture over the two kinds. It lets the
llvm kinds take the kernels on every layer c takes them (``nn_conv_f32.loop_tiles_win`` and
``nn_conv_nhwc.llvm_loop_tiles`` off) and replaces ``ember.testing.assert_matches_onnxruntime``
for the test: the model is compiled for the kind and for ``c`` (as the test asks) and both
run; the kind's library must call the runtime's tile kernels exactly when c's calls its own,
its outputs must equal c's bit for bit and match onnxruntime with the test's tolerances. An
epilogue with a transcendental function (SiLU's sigmoid) is computed by each back end's own
polynomial, so such a model is compared bitwise up to its convolutions (their outputs made
the graph's) and within 1e-5 whole."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import pytest
from llvm_build import E2E_KINDS, e2e_suite

import ember.testing
from ember.codegen.llvm.tiles import TILE_KERNEL_NAMES
from ember.ops import (
    nn_conv_f32,
    nn_conv_lanes,
    nn_conv_nhwc,
    nn_conv_pack,
    nn_conv_winograd,
    nn_schedule_tiles,
)
from ember.testing.runners import compile_onnx, run_artifacts, run_onnxruntime


def calls_tile_kernel(artifacts: Any) -> bool:
    """Whether generated code of ``artifacts`` names one of the float32 tile kernels (C
    source, LLVM object or JIT bitcode: c pastes a kernel's text only when it calls it)."""
    for art in artifacts:
        blobs = (getattr(art, "content", b"") or b"", getattr(art, "bitcode", b"") or b"")
        if any(name.encode() in blob for blob in blobs for name in TILE_KERNEL_NAMES):
            return True
    return False


#: ops whose float32 results the back ends compute with their own polynomials (c: its
#: vector math or libm, llvm: ember.codegen.llvm.mathfn), equal to a few ulp, not bitwise.
INEXACT_OPS = frozenset({"Sigmoid", "Tanh", "Exp", "Log", "Erf", "Gelu", "Softmax", "Mish"})


def _conv_outputs(model: Any) -> Any:
    """``model`` with its Conv outputs as the graph's outputs (its epilogue dropped)."""
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    del cut.graph.output[:]
    for node in cut.graph.node:
        if node.op_type == "Conv":
            cut.graph.output.append(onnx.helper.make_tensor_value_info(node.output[0], 1, None))
    return cut


def _same_as_c(
    model: Any,
    inputs: Mapping[str, np.ndarray],
    kind: str,
    build_kw: dict[str, Any],
    rtol: float = 0.0,
) -> list[np.ndarray]:
    """``model``'s outputs built for ``kind``, checked against c's: bitwise (``rtol`` 0), else
    within ``rtol``; both call tile kernels or neither does."""
    shapes = {k: tuple(np.shape(v)) for k, v in inputs.items()}
    c_arts = compile_onnx(model, shape=shapes, target="c", **build_kw)
    arts = compile_onnx(model, shape=shapes, target=kind, **build_kw)
    assert calls_tile_kernel(arts) == calls_tile_kernel(c_arts)
    want, ours = run_artifacts(c_arts, inputs), run_artifacts(arts, inputs)
    for i, (a, b) in enumerate(zip(ours, want, strict=True)):
        assert a.dtype == b.dtype and a.shape == b.shape
        if rtol:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=f"output {i}")
        else:
            assert a.tobytes() == b.tobytes(), f"output {i}: {kind} differs from c"
    return ours


def _bitwise_fixture() -> Any:
    @pytest.fixture(params=list(E2E_KINDS), autouse=True)
    def compiled_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
        kind: str = request.param

        def check(
            model: Any,
            inputs: Mapping[str, np.ndarray],
            rtol: float = 1e-4,
            atol: float = 1e-5,
            **build_kw: Any,
        ) -> list[np.ndarray]:
            assert str(build_kw.pop("target", "c")).split()[0] == "c"
            exact = not {n.op_type for n in model.graph.node} & INEXACT_OPS
            ours = _same_as_c(model if exact else _conv_outputs(model), inputs, kind, build_kw)
            if not exact:
                ours = _same_as_c(model, inputs, kind, build_kw, rtol=1e-5)
            for i, (a, b) in enumerate(zip(ours, run_onnxruntime(model, inputs), strict=True)):
                np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {i}")
            return ours

        monkeypatch.setattr(ember.testing, "assert_matches_onnxruntime", check)
        # the kernels on every layer
        for module in (nn_conv_pack, nn_conv_lanes, nn_schedule_tiles):
            monkeypatch.setattr(module, "loop_tiles_win", lambda *args: False)
        monkeypatch.setattr(nn_conv_nhwc, "LLVM_LOOP_TILE_REDUCTION", 0)
        # c on an AVX-512 CPU: the loop-IR tiles, as the llvm kinds there (the runtime's
        # kernels are compiled for AVX2; c's own have AVX-512 register tiles)
        monkeypatch.setattr(nn_conv_f32, "AVX512_KERNEL", False)
        # and the direct kernels on the 3x3 layers, for both kinds (their Winograd calls are
        # compared in test_llvm_winograd.py)
        monkeypatch.setattr(nn_conv_winograd, "winograd_pays", lambda *args: 0)
        return kind

    return compiled_kind


def tile_suite(module: str, only: set[str]) -> dict[str, Any]:
    """The tests ``only`` (and the fixtures) of ``tests/ops/<module>.py``, for each llvm kind
    bitwise against c (see the module text)."""
    found = e2e_suite(module, folder="ops", only=only)
    found["compiled_kind"] = _bitwise_fixture()
    return found
