"""float16 versions of real models, compiled for C, against onnxruntime's float16 run.

``to_float16`` converts a float32 ONNX model the way a deployment tool does: float32
initializers, constant attributes, graph inputs and outputs become float16, Casts to
float32 cast to float16, value infos are dropped (shape inference redoes them).

The tolerance. float16 keeps 11 significant bits: every rounding moves a value by at most
u = 2^-11 (4.9e-4) of itself. Both sides start from the same float16 weights and inputs
and compute convolutions, matmuls, pools and normalizations in float32; they differ in
where activations are rounded to float16. ember rounds every op's output, as the float16
graph says; onnxruntime's CPU provider runs these nodes in float32 and drops the casts
between consecutive ones, so it rounds less often. Over L rounding points with bounded
gains the outputs drift apart like u * sqrt(L) of the output's scale: for MobileNetV2
(about 100 ops on the longest path) 5e-3. The test allows 2e-2 of the largest output
(four times that estimate) and asks ember's float16 run to stay as close to the float32
model's own output. Measured against onnxruntime, as a share of the largest output:
MobileNetV2 0.4% (64x64, width 0.35: 0.7%), ResNet-50 0.3%, BERT encoder 0.2%, SqueezeNet
0.1%; wall time of build + run 12-70 s, so all but the two small ones are marked slow.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

import ember
from ember.examples.models import make_model
from ember.testing import run_onnx_compiled, run_onnxruntime

pytestmark = pytest.mark.cc

#: share of the largest output that ember's float16 run may differ by (see the docstring).
REL_SCALE_TOL = 2e-2
DEV = ember.cpu(0)


def _half(t: onnx.TensorProto) -> onnx.TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name)


def to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    """A float16 copy of the float32 ``model`` (initializers, constants, I/O and Casts)."""
    out = copy.deepcopy(model)
    g = out.graph
    for k, init in enumerate(g.initializer):
        if init.data_type == TensorProto.FLOAT:
            g.initializer[k].CopyFrom(_half(init))
    for vi in (*g.input, *g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    del g.value_info[:]
    for node in g.node:
        for a in node.attribute:
            if node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = TensorProto.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == TensorProto.FLOAT:
                a.t.CopyFrom(_half(a.t))
    return out


def _check(name: str) -> None:
    case = make_model(name)
    model = to_float16(case.model)
    inputs = {
        k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in case.inputs.items()
    }
    ours = run_onnx_compiled(model, inputs, target="c")
    theirs = run_onnxruntime(model, inputs)
    wide = run_onnxruntime(case.model, case.inputs)
    for a, b, ref in zip(ours, theirs, wide, strict=True):
        assert a.dtype == np.float16 and a.shape == b.shape
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        scale = float(np.abs(ref).max())
        assert np.all(np.isfinite(a32)) and float(np.std(a32)) > 1e-3 * scale
        np.testing.assert_allclose(a32, b32, rtol=0, atol=REL_SCALE_TOL * scale)
        np.testing.assert_allclose(a32, ref, rtol=0, atol=REL_SCALE_TOL * scale)


def test_to_float16_converts_every_float_tensor() -> None:
    model = to_float16(make_model("squeezenet").model)
    g = model.graph
    assert {i.data_type for i in g.initializer} <= {TensorProto.FLOAT16, TensorProto.INT64}
    assert {v.type.tensor_type.elem_type for v in (*g.input, *g.output)} == {TensorProto.FLOAT16}
    onnx.checker.check_model(model)


@pytest.mark.parametrize("name", ["squeezenet", "mobilenet_v2_64_w0.35"])
def test_small_float16_model_matches_onnxruntime(name: str) -> None:
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "bert"])
def test_float16_model_matches_onnxruntime(name: str) -> None:
    _check(name)


def test_float16_model_runs_the_same_under_the_aot_executor() -> None:
    case = make_model("squeezenet")
    mod, params = ember.frontend.from_onnx(to_float16(case.model))
    inputs = {k: v.astype(np.float16) for k, v in case.inputs.items()}
    outs = []
    for kind, executor in (("graph", ember.GraphExecutor), ("aot", ember.AotExecutor)):
        top = ember.load_artifacts(ember.build(mod, "c", params, executor=kind), DEV)
        ex = executor(top["default"](DEV))
        for name, value in inputs.items():
            ex.set_input(name, value)
        ex.run()
        outs.append(ex.get_output(0).numpy())
    assert outs[0].dtype == np.float16
    assert np.array_equal(outs[0].view(np.uint16), outs[1].view(np.uint16))
