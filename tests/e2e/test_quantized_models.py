"""Quantized models end to end: onnxruntime's quantizer, ember compiled, onnxruntime run.

Each float model of ember.examples.models is quantized with ``onnxruntime.quantization``
(``static``: QDQ, uint8 activations, int8 per-channel 7-bit weights, MinMax calibration on
8 seeded inputs; ``qoperator``: the same in onnxruntime's QOperator form, QLinearConv,
QLinearMatMul and the com.microsoft QLinearAdd, QGemm, QLinearSoftmax, ...; ``dynamic``:
int8 weights, DynamicQuantizeLinear + MatMulInteger or ConvInteger), compiled for the C
target and compared with onnxruntime's execution of the same quantized model (all graph
optimizations on, so its QDQ transformer runs QLinearConv/QLinearMatMul/QGemm/QLinearAdd
kernels).

The tolerance: at least 99.9% of the output elements within one quantization step.
For a static model the output is a DequantizeLinear, so its values lie on a grid of the
output scale; one step is the smallest difference two executions can show at all, and
where both compute the same integers with the same float32 requantization (what ember
does, in onnxruntime's order of operations, QLinearAdd included) any difference is a
rounding tie decided differently, which moves one value by one step. Float ops between
quantized ones (LayerNormalization, Softmax, Erf, pools) use different but equally
accurate math libraries, and a last-bit difference that flips a rounding in one layer may
move a few outputs of later layers by one step: 0.1% of the elements is the budget for
that. For a dynamic model the output is float; its step is the output's range / 255, the
resolution of the uint8 activations the model quantizes at run time. Measured: every
model here agrees on 100% of the elements (most of them bit for bit).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from ember.examples.audio import wav2vec2
from ember.examples.blocks import seeded_input
from ember.examples.detection import yolo
from ember.examples.gpt2 import gpt2, gpt2_inputs
from ember.examples.models import bert_encoder, bert_inputs, make_model
from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.testing import run_onnx_compiled, run_onnxruntime
from ember.testing.quantize import (
    output_step,
    quantization_step_agreement,
    quantize_dynamic,
    quantize_static,
)
from ember.transform import optimize

MIN_AGREEMENT = 0.999


def kernel_ops(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[str]:
    """The graph ops of ``model`` after ember's standard optimizations (fuse_qdq's kernels)."""
    shapes = {k: v.shape for k, v in inputs.items()}
    mod, params = from_onnx(model, shape=shapes)
    body = optimize(mod, params).main.body
    return [n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")]


#: an op each mode's quantizer writes.
_MARK = {"static": "QuantizeLinear", "qoperator": "QLinearConv", "dynamic": "DynamicQuantizeLinear"}


def _quantized(model: onnx.ModelProto, inputs: dict[str, np.ndarray], mode: str):
    if mode == "dynamic":
        return quantize_dynamic(model)
    return quantize_static(model, inputs, qoperator=mode == "qoperator")


def _check(model: onnx.ModelProto, inputs: dict[str, np.ndarray], mode: str) -> None:
    quantized = _quantized(model, inputs, mode)
    kinds = {n.op_type for n in quantized.graph.node}
    assert _MARK[mode] in kinds or mode == "qoperator" and "QLinearMatMul" in kinds, kinds
    if mode == "qoperator":  # the products run as int8 kernels, as the QDQ form's do
        assert "int8" in " ".join(kernel_ops(quantized, inputs))
    ours = run_onnx_compiled(quantized, inputs)
    want = run_onnxruntime(quantized, inputs)
    for out, got, ref in zip(quantized.graph.output, ours, want, strict=True):
        assert got.shape == ref.shape and got.dtype == ref.dtype
        step = output_step(quantized, out.name) or float(np.ptp(ref)) / 255
        agreement = quantization_step_agreement(got, ref, step)
        assert agreement >= MIN_AGREEMENT, f"{out.name}: {agreement:.4%} within one step"


def _small_bert() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    return bert_encoder(layers=1, hidden=64, heads=2, seq=16), bert_inputs(seq=16)


@pytest.mark.parametrize("mode", ["static", "qoperator", "dynamic"])
@pytest.mark.parametrize(
    "name", ["resnet8", pytest.param("mobilenet_v2_64_w0.35", marks=pytest.mark.slow)]
)
def test_small_cnn(name: str, mode: str) -> None:
    case = make_model(name)
    _check(case.model, case.inputs, mode)


@pytest.mark.parametrize("mode", ["static", "qoperator", "dynamic"])
def test_small_bert(mode: str) -> None:
    _check(*_small_bert(), mode)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "bert"])
def test_full_size(name: str, mode: str) -> None:
    case = make_model(name)
    _check(case.model, case.inputs, mode)


def test_portable_target_gives_the_same_integers() -> None:
    """The integer kernels are plain C: built for a generic x86-64 (SSE2 only, no OpenMP,
    no libmvec), what a microcontroller build also compiles, they give the native build's
    outputs bit for bit."""
    case = make_model("resnet8")
    quantized = quantize_static(case.model, case.inputs)
    native = run_onnx_compiled(quantized, case.inputs)
    target = "c -mcpu=x86-64 -openmp=false -vector-math=false"
    portable = run_onnx_compiled(quantized, case.inputs, target=target)
    for a, b in zip(native, portable, strict=True):
        np.testing.assert_array_equal(a, b)


def _family(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Small members of the zoo's families with the quantized paths of stop 39: GPT-2's
    tanh GELU (dequantized constants, an add of a constant), wav2vec2's 1-D convolutions
    and erf GELU, YOLO's concatenations of differently quantized inputs. The transformers
    in QOperator form, which onnxruntime runs as written (in QDQ form its fused kernels and
    its own unfused run disagree on a few percent of a transformer's outputs)."""
    if name == "gpt2":
        model = gpt2(seq=16, dim=64, layers=1, heads=2, vocab=256)
        return model, gpt2_inputs(model)
    if name == "wav2vec2":
        audio = seeded_input((1, 1, 1600), "audio", 1)
        audio["audio"] *= np.float32(0.1)
        return wav2vec2(samples=1600, layers=1, dim=64, heads=2), audio
    return yolo(image_size=64), seeded_input((1, 3, 64, 64), "images", 1)


@pytest.mark.parametrize(
    "name,mode",
    [("gpt2", "qoperator"), ("wav2vec2", "qoperator"), ("yolo", "static"), ("yolo", "qoperator")],
)  # fmt: skip
def test_families(name: str, mode: str) -> None:
    _check(*_family(name), mode)
