"""The speech encoders (ember/examples/audio.py). wav2vec2: valid, deterministic, its ops;
a small one compiled against onnxruntime with its 1-D convolutions, GroupNorm and
the features' transpose into the transformer all channels last (convert_layout's rank-3
path), so that the waveform's transpose is the only layout transpose."""

import json

import numpy as np
import pytest
from published_classifier import check_registered_example

from ember.errors import EmberValueError
from ember.examples.audio import wav2vec2, wav2vec2_frames, whisper_encoder
from ember.examples.blocks import seeded_input
from ember.testing import compile_onnx, run_artifacts, run_onnxruntime


def test_wav2vec2_is_registered_deterministic_and_has_its_ops():
    case = check_registered_example("wav2vec2")
    ops = {n.op_type for n in case.model.graph.node}
    assert {"Conv", "InstanceNormalization", "Erf", "LayerNormalization", "Softmax"} <= ops
    assert wav2vec2_frames(16000) == 49  # 20 ms frames, as published
    groups = [a.i for n in case.model.graph.node for a in n.attribute if a.name == "group"]
    assert 16 in groups  # the position convolution
    with pytest.raises(EmberValueError, match="too few"):
        wav2vec2(samples=400)


def test_small_wav2vec2_compiles_channels_last_and_matches_onnxruntime():
    model = wav2vec2(samples=4000, layers=1, dim=128, heads=2, seed=3)
    rng = np.random.default_rng(4)
    inputs = {"audio": (0.1 * rng.standard_normal((1, 1, 4000))).astype(np.float32)}
    built = compile_onnx(model, shape={"audio": (1, 1, 4000)}, executor="graph")
    graph = json.loads(next(a.content for a in built.artifacts if a.file_name == "graph.json"))
    ops = [json.loads(n["attrs"]["ops"]) for n in graph["nodes"] if n["op"] == "tvm_op"]
    front = ops[: next(i for i, o in enumerate(ops) if o == ["nn.layer_norm"])]
    assert ["reshape", "transpose"] in front and ["reshape"] in front  # waveform in, NWC out
    assert sum("transpose" in o for o in front) == 1, front
    assert any("nn.group_norm" in o for o in front)  # the instance norm, channels last
    assert all("nn.conv" not in o for o in ops), ops  # every conv packed, the position one too
    (out,) = run_artifacts(built, inputs)
    (want,) = run_onnxruntime(model, inputs)
    assert float(np.std(want)) > 1e-2
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)


def test_whisper_encoder_shapes_and_a_small_one_against_onnxruntime():
    """Whisper-tiny's encoder: 3000 mel frames are 1500 tokens (no multiple of 16); a small
    one compiled (197 tokens: the padded scores read in place, row by row) against onnxruntime."""
    full = check_registered_example("whisper_tiny_encoder").model
    out_dims = [d.dim_value for d in full.graph.output[0].type.tensor_type.shape.dim]
    assert out_dims == [1, 1500, 384]
    with pytest.raises(EmberValueError, match="even"):
        whisper_encoder(mel_frames=301)
    model = whisper_encoder(mel_frames=394, layers=1, dim=64, heads=2, seed=5)  # 197 tokens
    inputs = seeded_input((1, 80, 394), "mel", 6)
    built = compile_onnx(model, shape={"mel": (1, 80, 394)}, executor="graph")
    (out,) = run_artifacts(built, inputs)
    (want,) = run_onnxruntime(model, inputs)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)
    graph = json.loads(next(a.content for a in built.artifacts if a.file_name == "graph.json"))
    ops = [json.loads(n["attrs"]["ops"]) for n in graph["nodes"] if n["op"] == "tvm_op"]
    assert ["nn.softmax_rows"] in ops  # the padded scores read in place: no slice pass
    assert not any("strided_slice" in o for o in ops), ops
