"""A vision transformer as PyTorch exports it (DeiT-Tiny's shape by default), seeded weights.

:func:`vit`: a 16x16 stride-16 patch convolution, a class token concatenated in front of
the 196 patch tokens (197 tokens: no multiple of 8 or 16), learned position embeddings,
then pre-norm encoder blocks (LayerNormalization, one fused QKV MatMul split into heads
with Reshape/Transpose, ``q @ k^T`` scaled, Softmax, ``@ v``, the output projection, a
residual; LayerNormalization, an Erf-based GELU MLP, a residual), a final
LayerNormalization and a classifier on the class token.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import numpy_helper

from ember.errors import EmberValueError
from ember.examples.blocks import conv, linear, seeded_input
from ember.examples.builder import GraphBuilder


def vit(
    image_size: int = 224,
    patch: int = 16,
    dim: int = 192,
    depth: int = 12,
    heads: int = 3,
    num_classes: int = 1000,
    seed: int = 0,
) -> onnx.ModelProto:
    """A ViT on a ``1x3ximage_sizeximage_size`` input ``image``; output ``logits``."""
    if image_size % patch or dim % heads:
        raise EmberValueError(
            f"vit: image_size {image_size} must be a multiple of patch {patch} and dim "
            f"{dim} of heads {heads}"
        )
    g = GraphBuilder(seed)
    tokens = (image_size // patch) ** 2 + 1
    head_dim = dim // heads

    def shape(name: str, dims: list[int]) -> str:
        return g.const(name, np.array(dims, np.int64))

    def index(name: str, value: int) -> str:  # a 0-d initializer (GraphBuilder.const: 1-d)
        g.inits.append(numpy_helper.from_array(np.array(value, np.int64), name))
        return name

    def norm(x: str, name: str) -> str:
        scale = g.const(f"{name}.weight", np.ones(dim, np.float32))
        bias = g.const(f"{name}.bias", np.zeros(dim, np.float32))
        return g.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-6)

    x = conv(g, "image", "patch_embed", 3, dim, patch, patch, pads=(0, 0, 0, 0))
    x = g.node("Reshape", [x, shape("patch_embed.shape", [1, dim, tokens - 1])], "flatten")
    x = g.node("Transpose", [x], "patch_tokens", perm=[0, 2, 1])
    cls = g.weight("cls_token", (1, 1, dim), 0.02)
    x = g.node("Concat", [cls, x], "tokens", axis=1)
    x = g.node("Add", [x, g.weight("pos_embed", (1, tokens, dim), 0.02)], "embedded")
    split_shape = shape("qkv.shape", [1, tokens, 3, heads, head_dim])
    merge_shape = shape("merge.shape", [1, tokens, dim])
    scale = g.const("attn.scale", np.array(head_dim**-0.5, np.float32))
    half = g.const("gelu.half", np.array(0.5, np.float32))
    one = g.const("gelu.one", np.array(1.0, np.float32))
    root2 = g.const("gelu.sqrt2", np.array(math.sqrt(2.0), np.float32))
    for i in range(depth):
        p = f"blocks.{i}"
        h = norm(x, f"{p}.norm1")
        qkv = linear(g, h, f"{p}.attn.qkv", dim, 3 * dim)
        qkv = g.node("Reshape", [qkv, split_shape], f"{p}.attn.split")
        qkv = g.node("Transpose", [qkv], f"{p}.attn.heads", perm=[2, 0, 3, 1, 4])
        q, k, v = (
            g.node("Gather", [qkv, index(f"{p}.attn.{n}.index", j)], f"{p}.attn.{n}", axis=0)
            for j, n in enumerate("qkv")
        )
        kt = g.node("Transpose", [k], f"{p}.attn.kt", perm=[0, 1, 3, 2])
        scores = g.node("Mul", [g.node("MatMul", [q, kt], f"{p}.attn.qk"), scale], f"{p}.attn.s")
        probs = g.node("Softmax", [scores], f"{p}.attn.probs", axis=-1)
        ctx = g.node("MatMul", [probs, v], f"{p}.attn.ctx")
        ctx = g.node("Transpose", [ctx], f"{p}.attn.merge_t", perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, merge_shape], f"{p}.attn.merge")
        x = g.node("Add", [x, linear(g, ctx, f"{p}.attn.proj", dim, dim, 0.5)], f"{p}.res1")
        h = linear(g, norm(x, f"{p}.norm2"), f"{p}.mlp.fc1", dim, 4 * dim, 2.0)
        erf = g.node("Erf", [g.node("Div", [h, root2], f"{p}.mlp.div")], f"{p}.mlp.erf")
        gate = g.node("Mul", [g.node("Add", [erf, one], f"{p}.mlp.add"), half], f"{p}.mlp.gate")
        h = g.node("Mul", [h, gate], f"{p}.mlp.gelu")
        x = g.node("Add", [x, linear(g, h, f"{p}.mlp.fc2", 4 * dim, dim, 0.5)], f"{p}.res2")
    x = norm(x, "norm")
    x = g.node("Gather", [x, index("cls.index", 0)], "cls", axis=1)
    g.logits(x, "head", dim, num_classes, 0.02)
    return g.classifier("vit", image_size, num_classes)


def vit_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """DeiT-Tiny's shape (197 tokens of 192, 3 heads, 12 blocks) and a seeded image."""
    return vit(seed=seed), seeded_input((1, 3, 224, 224), "image", seed + 1)
