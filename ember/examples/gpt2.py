"""A GPT-2-style decoder-only language model as PyTorch exports Hugging Face's GPT-2, with
seeded weights: the prompt's forward pass (prefill) and one decoding step with a key/value
cache.

:func:`gpt2`: token and position embeddings (Gather), ``layers`` pre-norm blocks (a fused
QKV MatMul, 12 heads split by Reshape/Transpose, ``q @ k^T / sqrt(d)``, the causal mask as
``Where(mask, scores, float32 min)``, Softmax, ``@ v``, the output projection and a
residual; an MLP of ``4 * dim`` with the tanh GELU exported as Pow, Tanh and Mul, and a
residual), a final LayerNormalization and the language-model head tied to the token
embedding (a MatMul by its transpose). With ``past`` > 0 it is a decoding step: inputs
``past.{i}.key`` / ``past.{i}.value`` of ``past`` cached positions, concatenated with the
new ones into the outputs ``present.{i}.key`` / ``present.{i}.value``, as the models
exported for generation (``use_cache=True``) do. The published GPT-2 small is dim 768, 12
layers and heads, a vocabulary of 50257; the registered ones are smaller (dim 384, 6
layers and heads, 8192 tokens).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ember.errors import EmberValueError
from ember.examples.audio import layer_norm
from ember.examples.blocks import linear
from ember.examples.builder import GraphBuilder

#: the longest context of the position embedding (GPT-2's n_positions).
CONTEXT = 1024


def gelu_tanh(g: GraphBuilder, x: str, name: str) -> str:
    """``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``, as GPT-2's ``gelu_new``
    exports (Pow by 3)."""
    c = g.const(f"{name}.c", np.array(0.044715, np.float32))
    k = g.const(f"{name}.k", np.array(math.sqrt(2 / math.pi), np.float32))
    three = g.const(f"{name}.three", np.array(3.0, np.float32))
    one = g.const(f"{name}.one", np.array(1.0, np.float32))
    half = g.const(f"{name}.half", np.array(0.5, np.float32))
    cube = g.node("Mul", [g.node("Pow", [x, three], f"{name}.pow"), c], f"{name}.cube")
    inner = g.node("Mul", [g.node("Add", [x, cube], f"{name}.sum"), k], f"{name}.inner")
    gate = g.node("Add", [g.node("Tanh", [inner], f"{name}.tanh"), one], f"{name}.gate")
    return g.node("Mul", [g.node("Mul", [x, half], f"{name}.half_x"), gate], name)


def gpt2(
    seq: int = 128,
    past: int = 0,
    dim: int = 384,
    layers: int = 6,
    heads: int = 6,
    vocab: int = 8192,
    seed: int = 0,
) -> onnx.ModelProto:
    """GPT-2 over ``seq`` new tokens after ``past`` cached ones (see the module docstring):
    input ``input_ids`` (1, seq) int64, output ``logits`` (1, seq, vocab) first."""
    if dim % heads or seq < 1 or past < 0 or past + seq > CONTEXT:
        raise EmberValueError(
            f"gpt2: dim {dim} must be a multiple of heads {heads}, seq >= 1, past >= 0 and "
            f"past + seq at most {CONTEXT}"
        )
    g = GraphBuilder(seed)
    head = dim // heads
    total = past + seq
    wte = g.weight("wte", (vocab, dim), 0.02)
    wpe = g.weight("wpe", (CONTEXT, dim), 0.01)
    x = g.node("Gather", [wte, "input_ids"], "tokens", axis=0)
    positions = g.const("positions", np.arange(past, total, dtype=np.int64).reshape(1, seq))
    x = g.node("Add", [x, g.node("Gather", [wpe, positions], "wpe.at", axis=0)], "embedded")
    causal = np.tril(np.ones((total, total), bool))[past:].reshape(1, 1, seq, total)
    mask = g.const("causal_mask", causal)
    lowest = g.const("mask_value", np.array(np.finfo(np.float32).min, np.float32))
    scale = g.const("attn.scale", np.array(math.sqrt(head), np.float32))
    split_heads = g.const("heads", np.array([1, seq, heads, head], np.int64))
    merge = g.const("merge", np.array([1, seq, dim], np.int64))
    split = g.const("qkv.split", np.array([dim] * 3, np.int64))
    float_t = onnx.TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("input_ids", onnx.TensorProto.INT64, [1, seq])]
    outputs = [helper.make_tensor_value_info("logits", float_t, [1, seq, vocab])]
    for i in range(layers):
        p = f"h.{i}"
        qkv = linear(g, layer_norm(g, x, f"{p}.ln_1", dim), f"{p}.attn.c_attn", dim, 3 * dim)
        q, k, v = (f"{p}.attn.{n}" for n in "qkv")
        g.nodes.append(helper.make_node("Split", [qkv, split], [q, k, v], f"{p}.split", axis=2))
        q, k, v = (
            g.node(
                "Transpose",
                [g.node("Reshape", [t, split_heads], f"{t}.r")],
                f"{t}.t",
                perm=[0, 2, 1, 3],
            )
            for t in (q, k, v)
        )
        if past:
            cached = []
            for part, new in (("key", k), ("value", v)):
                name = f"past.{i}.{part}"
                inputs.append(helper.make_tensor_value_info(name, float_t, [1, heads, past, head]))
                cached.append(g.node("Concat", [name, new], f"present.{i}.{part}", axis=2))
                outputs.append(
                    helper.make_tensor_value_info(cached[-1], float_t, [1, heads, total, head])
                )
            k, v = cached
        kt = g.node("Transpose", [k], f"{p}.attn.kt", perm=[0, 1, 3, 2])
        scores = g.node("Div", [g.node("MatMul", [q, kt], f"{p}.attn.qk"), scale], f"{p}.attn.s")
        scores = g.node("Where", [mask, scores, lowest], f"{p}.attn.masked")
        probs = g.node("Softmax", [scores], f"{p}.attn.probs", axis=-1)
        ctx = g.node("MatMul", [probs, v], f"{p}.attn.ctx")
        ctx = g.node("Transpose", [ctx], f"{p}.attn.merge_t", perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, merge], f"{p}.attn.merge")
        x = g.node("Add", [x, linear(g, ctx, f"{p}.attn.c_proj", dim, dim, 0.5)], f"{p}.res1")
        h = linear(g, layer_norm(g, x, f"{p}.ln_2", dim), f"{p}.mlp.c_fc", dim, 4 * dim)
        h = linear(g, gelu_tanh(g, h, f"{p}.mlp.gelu"), f"{p}.mlp.c_proj", 4 * dim, dim, 0.5)
        x = g.node("Add", [x, h], f"{p}.res2")
    x = layer_norm(g, x, "ln_f", dim)
    tied = np.ascontiguousarray(numpy_helper.to_array(g.inits[0]).T)  # wte, transposed
    g.node("MatMul", [x, g.const("lm_head", tied)], "logits")
    return g.model("gpt2", inputs, outputs)


def gpt2_inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    """Seeded inputs of a :func:`gpt2` model: token ids below its vocabulary and, for a
    decoding step, a key/value cache of standard normal values."""
    rng = np.random.default_rng(seed)
    vocab = next(int(t.dims[0]) for t in model.graph.initializer if t.name == "wte")
    feeds: dict[str, np.ndarray] = {}
    for value in model.graph.input:
        shape = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
        if value.name == "input_ids":
            feeds[value.name] = rng.integers(0, vocab, shape).astype(np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def gpt2_prefill_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A 128-token prompt through the registered GPT-2 (dim 384, 6 layers, 8192 tokens)."""
    model = gpt2(seed=seed)
    return model, gpt2_inputs(model, seed + 1)


def gpt2_decode_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One decoding step after 127 cached tokens through the same GPT-2."""
    model = gpt2(seq=1, past=127, seed=seed)
    return model, gpt2_inputs(model, seed + 1)
