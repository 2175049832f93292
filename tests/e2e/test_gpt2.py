"""The GPT-2 decoder (ember/examples/gpt2.py): registered and deterministic, its ops; a small
one compiled against onnxruntime for a prompt (prefill) and for one decoding step with a
key/value cache (every present output too), with the kernels the compiler made for it."""

import json

import numpy as np
import pytest
from published_classifier import check_registered_example

from ember.errors import EmberValueError
from ember.examples.gpt2 import gpt2, gpt2_inputs
from ember.testing import compile_onnx, run_artifacts, run_onnxruntime

SMALL = {"dim": 64, "layers": 2, "heads": 4, "vocab": 512}


def _kernels(built) -> list[list[str]]:
    graph = json.loads(next(a.content for a in built.artifacts if a.file_name == "graph.json"))
    return [json.loads(n["attrs"]["ops"]) for n in graph["nodes"] if n["op"] == "tvm_op"]


def test_gpt2_examples_are_registered_deterministic_and_have_their_ops():
    prefill = check_registered_example("gpt2_prefill").model
    ops = {n.op_type for n in prefill.graph.node}
    assert {"Gather", "Pow", "Tanh", "Where", "Softmax", "LayerNormalization"} <= ops
    decode = check_registered_example("gpt2_decode")
    names = [o.name for o in decode.model.graph.output]
    assert names[:3] == ["logits", "present.0.key", "present.0.value"]
    assert decode.inputs["past.5.value"].shape == (1, 6, 127, 64)
    with pytest.raises(EmberValueError, match="multiple of heads"):
        gpt2(dim=100, heads=6)


def test_small_gpt2_prompt_matches_onnxruntime_without_a_pow_call():
    model = gpt2(seq=16, seed=3, **SMALL)
    inputs = gpt2_inputs(model, seed=4)
    built = compile_onnx(model, shape={"input_ids": (1, 16)}, executor="graph")
    source = b"".join(a.content for a in built.artifacts if a.file_name.endswith(".c"))
    assert b"powf(" not in source  # the GELU's Pow by 3 is x * x * x
    (out,) = run_artifacts(built, inputs)
    (want,) = run_onnxruntime(model, inputs)
    assert float(np.std(want)) > 1e-2
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)


def test_small_gpt2_decoding_step_matches_onnxruntime_with_its_cache():
    model = gpt2(seq=1, past=15, seed=5, **SMALL)
    inputs = gpt2_inputs(model, seed=6)
    shapes = {k: v.shape for k, v in inputs.items()}
    built = compile_onnx(model, shape=shapes, executor="graph")
    outs = run_artifacts(built, inputs)
    wants = run_onnxruntime(model, inputs)
    assert len(outs) == len(wants) == 1 + 2 * SMALL["layers"]
    for out, want in zip(outs, wants, strict=True):
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-5)
    kernels = _kernels(built)
    # one query against the cached keys: dot products along the keys' rows, no transpose
    assert sum("sum" in ops and "multiply" in ops for ops in kernels) == SMALL["layers"], kernels
    assert ["transpose"] not in kernels
