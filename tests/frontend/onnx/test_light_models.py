"""The nine 'light' models onnx ships (backend/test/data/light) import, evaluate to their
shipped expected outputs, agree with onnxruntime before the final softmax, and the
optimized graph evaluates to the same result as the unoptimized one.

Inputs are built the way onnx's backend runner builds them for these models:
``arange(n).reshape(shape) / n`` in float32 (``generate_dummy_data(random=False)``).
The weights of these models are ConstantOfShape fills, so every class gets the same logit
and the softmax output is flat; comparing the logits with onnxruntime as well checks the
whole computation, not just a uniform distribution.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ember.frontend import from_onnx
from ember.ir import Constant, evaluate, post_order
from ember.transform.optimize import optimize

from .conftest import ort_run

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

#: (model, rtol, atol) as onnx's own test list gives them; slow ones are marked.
LIGHT_MODELS = [
    pytest.param("squeezenet", 1e-3, 1e-7),
    pytest.param("shufflenet", 1e-3, 1e-7),
    pytest.param("zfnet512", 1e-3, 1e-7, marks=pytest.mark.slow),
    pytest.param("bvlc_alexnet", 1e-3, 1e-7, marks=pytest.mark.slow),
    pytest.param("resnet50", 1e-3, 1e-7, marks=pytest.mark.slow),
    pytest.param("inception_v1", 1e-3, 1e-7, marks=pytest.mark.slow),
    pytest.param("inception_v2", 1e-3, 1e-7, marks=pytest.mark.slow),
    pytest.param("densenet121", 2e-3, 1e-7, marks=pytest.mark.slow),
    pytest.param("vgg19", 1e-3, 1e-7, marks=pytest.mark.slow),
]


def _dummy_input(shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def _with_logits_output(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """A copy that also outputs the final Softmax's input (if any); and the output count."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    softmax = [n for n in out.graph.node if n.op_type == "Softmax"]
    if softmax:
        out.graph.output.append(onnx.helper.make_empty_tensor_value_info(softmax[-1].input[0]))
    return out, len(out.graph.output)


@pytest.mark.parametrize("name,rtol,atol", LIGHT_MODELS)
def test_light_model(name, rtol, atol):
    model = onnx.load(str(LIGHT_DIR / f"light_{name}.onnx"))
    expected = numpy_helper.to_array(onnx.load_tensor(str(LIGHT_DIR / f"light_{name}_output_0.pb")))
    probe, n_out = _with_logits_output(model)
    mod, params = from_onnx(probe)
    (data,) = [p for p in mod.main.params if p.name not in params]
    x = _dummy_input(data.type.shape)

    # 1. the shipped expected output
    got = evaluate(mod, [x], params)
    assert len(got) == n_out
    assert got[0].shape == expected.shape and got[0].dtype == expected.dtype
    np.testing.assert_allclose(got[0], expected, rtol=rtol, atol=atol)

    # 2. every output (incl. the logits) against onnxruntime
    want = ort_run(probe, {data.name: x})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)

    # 3. optimized == unoptimized (convert_layout changes the order of the pools' sums)
    opt = optimize(mod, params)
    assert [p.name for p in opt.main.params] == [data.name]
    got_opt = evaluate(opt, [x])
    for g, o in zip(got[1:], got_opt[1:], strict=True):
        np.testing.assert_allclose(o, g, rtol=1e-5, atol=1e-6)
    has_logits = n_out > len(model.graph.output)
    if not has_logits or _softmax_well_conditioned(got[-1]):
        np.testing.assert_allclose(got_opt[0], got[0], rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got_opt[0].sum(axis=1), 1.0, rtol=1e-5)


def _softmax_well_conditioned(logits: np.ndarray) -> bool:
    """Whether a softmax of ``logits`` moves by less than 1e-3 when they move by one float32
    rounding: squeezenet's light model has logits near 1e10, where one ulp is ~1e3 and
    which of equal logits rounds highest decides a one-hot output (the logits themselves
    are compared above)."""
    return float(np.spacing(np.abs(logits).max().astype(np.float32))) < 1e-3


def test_weight_fills_are_not_materialised_at_import():
    # VGG's fc6 weight is a 25088 x 4096 ConstantOfShape fill: it must stay a broadcast of a
    # scalar in the imported module instead of a 400 MB literal.
    mod, _ = from_onnx(str(LIGHT_DIR / "light_vgg19.onnx"))
    biggest = max(
        (n.data.size for n in post_order(mod.main.body) if isinstance(n, Constant)), default=0
    )
    assert biggest <= 1 << 16
