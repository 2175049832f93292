"""The diffusion-style U-Net example (ember/examples/unet.py): valid, deterministic, the ops
it stands for; a small one compiled against onnxruntime, its GroupNorms one channels-last
``nn.group_norm`` each (PyTorch's Reshape / InstanceNormalization / Reshape export), so
that the only layout transposes are the graph's two borders."""

import json

import numpy as np
import pytest
from published_classifier import check_registered_example

from ember.errors import EmberValueError
from ember.examples.blocks import seeded_input
from ember.examples.unet import unet
from ember.testing import compile_onnx, run_artifacts, run_onnxruntime


def test_unet_is_registered_deterministic_and_has_its_ops():
    case = check_registered_example("unet")
    ops = {n.op_type for n in case.model.graph.node}
    assert {"InstanceNormalization", "Reshape", "Shape", "ConvTranspose", "Concat"} <= ops
    with pytest.raises(EmberValueError, match="multiple of 4"):
        unet(image_size=30)
    with pytest.raises(EmberValueError, match="must split"):
        unet(channels=(48, 96), groups=32)


def test_small_unet_compiles_channels_last_and_matches_onnxruntime():
    model = unet(image_size=16, channels=(32, 64), groups=8, seed=3)
    inputs = seeded_input((1, 3, 16, 16), "image", 4)
    built = compile_onnx(model, shape={"image": (1, 3, 16, 16)}, executor="graph")
    graph = json.loads(next(a.content for a in built.artifacts if a.file_name == "graph.json"))
    ops = [json.loads(n["attrs"]["ops"]) for n in graph["nodes"] if n["op"] == "tvm_op"]
    norms = [o for o in ops if "nn.group_norm" in o]
    assert len(norms) == 2 * 4 + 1  # two per residual block, one before the output
    assert sum(o == ["transpose"] for o in ops) == 2, ops  # the input's and the output's
    (out,) = run_artifacts(built, inputs)
    (want,) = run_onnxruntime(model, inputs)
    assert float(np.std(want)) > 1e-2
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
