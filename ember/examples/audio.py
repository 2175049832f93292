"""Speech encoders as PyTorch exports them, with seeded weights: a wav2vec 2.0-style one and
Whisper's (:func:`whisper_encoder`).

A wav2vec 2.0-style speech encoder (Baevski et al. 2020, the base model's shapes) as
PyTorch exports it, with seeded weights.

:func:`wav2vec2`: the feature encoder, seven 1-D convolutions of 512 channels over the raw
waveform (kernels 10, 3, 3, 3, 3, 2, 2; strides 5, 2, 2, 2, 2, 2, 2; no bias), the first
followed by a GroupNorm of one channel per group, each by an Erf-based GELU; then the
features transposed to (N, T, 512), a LayerNormalization and a projection to 768; the
convolutional position embedding (a 1-D convolution of kernel 128 in 16 groups, its last
frame dropped, GELU) added; a LayerNormalization; and ``layers`` post-norm encoder blocks
(fused QKV MatMul, 12 heads, Softmax, the output projection, a residual and
LayerNormalization; a GELU MLP of 3072, a residual and LayerNormalization). One second of
16 kHz audio gives 49 frames. GroupNorm is exported as PyTorch does before opset 18
(Reshape, InstanceNormalization, Reshape, Mul, Add: ember.examples.unet.group_norm).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from ember.errors import EmberValueError
from ember.examples.blocks import linear, seeded_input
from ember.examples.builder import GraphBuilder
from ember.examples.unet import group_norm

#: the feature encoder's convolutions: (kernel, stride), 512 channels each.
WAV2VEC2_CONVS: tuple[tuple[int, int], ...] = (
    (10, 5),
    (3, 2),
    (3, 2),
    (3, 2),
    (3, 2),
    (2, 2),
    (2, 2),
)


def gelu(g: GraphBuilder, x: str, name: str) -> str:
    """``x * (1 + erf(x / sqrt 2)) / 2``, as PyTorch exports nn.GELU."""
    root = g.const(f"{name}.sqrt2", np.array(math.sqrt(2.0), np.float32))
    one = g.const(f"{name}.one", np.array(1.0, np.float32))
    half = g.const(f"{name}.half", np.array(0.5, np.float32))
    erf = g.node("Erf", [g.node("Div", [x, root], f"{name}.div")], f"{name}.erf")
    y = g.node("Mul", [x, g.node("Add", [erf, one], f"{name}.add")], f"{name}.mul")
    return g.node("Mul", [y, half], f"{name}")


def layer_norm(g: GraphBuilder, x: str, name: str, dim: int) -> str:
    """LayerNormalization over the last axis (``dim``) with seeded scale and shift."""
    scale = g.const(f"{name}.weight", (1.0 + 0.1 * g.rng.standard_normal(dim)).astype(np.float32))
    bias = g.weight(f"{name}.bias", (dim,), 0.05)
    return g.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-5)


def _conv1d(
    g: GraphBuilder,
    x: str,
    name: str,
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    pad: int = 0,
    group: int = 1,
    bias: bool = False,
) -> str:
    w = g.weight(f"{name}.weight", (cout, cin // group, k), math.sqrt(2.0 / (cin // group * k)))
    inputs = [x, w] + ([g.weight(f"{name}.bias", (cout,), 0.05)] if bias else [])
    return g.node(
        "Conv", inputs, name, kernel_shape=[k], strides=[stride], pads=[pad, pad], group=group
    )


def _attention(g: GraphBuilder, x: str, name: str, frames: int, dim: int, heads: int) -> str:
    """Multi-head self-attention: a fused QKV MatMul, heads by Reshape/Transpose, a scaled
    ``q @ k^T``, Softmax, ``@ v`` and the output projection."""
    head = dim // heads
    qkv = linear(g, x, f"{name}.qkv", dim, 3 * dim)
    split = g.const(f"{name}.split", np.array([dim] * 3, np.int64))
    q, k, v = (f"{name}.{p}" for p in "qkv")
    g.nodes.append(
        helper.make_node("Split", [qkv, split], [q, k, v], name=f"{name}.split", axis=-1)
    )
    shape = g.const(f"{name}.heads", np.array([1, frames, heads, head], np.int64))
    q, k, v = (
        g.node("Transpose", [g.node("Reshape", [t, shape], f"{t}.r")], f"{t}.t", perm=perm)
        for t, perm in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3]))
    )
    scale = g.const(f"{name}.scale", np.array(1.0 / math.sqrt(head), np.float32))
    scores = g.node("Mul", [g.node("MatMul", [q, k], f"{name}.qk"), scale], f"{name}.scaled")
    probs = g.node("Softmax", [scores], f"{name}.softmax", axis=-1)
    ctx = g.node(
        "Transpose", [g.node("MatMul", [probs, v], f"{name}.av")], f"{name}.ctx", perm=[0, 2, 1, 3]
    )
    flat = g.const(f"{name}.flat", np.array([1, frames, dim], np.int64))
    return linear(g, g.node("Reshape", [ctx, flat], f"{name}.merge"), f"{name}.out", dim, dim, 0.5)


def _mlp(g: GraphBuilder, x: str, name: str, dim: int) -> str:
    y = gelu(g, linear(g, x, f"{name}.fc1", dim, 4 * dim), f"{name}.gelu")
    return linear(g, y, f"{name}.fc2", 4 * dim, dim, 0.5)


def _encoder_block(g: GraphBuilder, x: str, name: str, frames: int, dim: int, heads: int) -> str:
    """A post-norm transformer block (wav2vec2 base's)."""
    attn = _attention(g, x, f"{name}.attn", frames, dim, heads)
    x = layer_norm(g, g.node("Add", [x, attn], f"{name}.res1"), f"{name}.norm1", dim)
    y = _mlp(g, x, f"{name}.mlp", dim)
    return layer_norm(g, g.node("Add", [x, y], f"{name}.res2"), f"{name}.norm2", dim)


def _pre_norm_block(g: GraphBuilder, x: str, name: str, frames: int, dim: int, heads: int) -> str:
    """A pre-norm transformer block (Whisper's)."""
    y = _attention(g, layer_norm(g, x, f"{name}.norm1", dim), f"{name}.attn", frames, dim, heads)
    x = g.node("Add", [x, y], f"{name}.res1")
    y = _mlp(g, layer_norm(g, x, f"{name}.norm2", dim), f"{name}.mlp", dim)
    return g.node("Add", [x, y], f"{name}.res2")


def wav2vec2_frames(samples: int) -> int:
    """The feature encoder's frames for ``samples`` waveform samples."""
    for k, s in WAV2VEC2_CONVS:
        samples = (samples - k) // s + 1
    return samples


def wav2vec2(
    samples: int = 16000, layers: int = 2, dim: int = 768, heads: int = 12, seed: int = 0
) -> onnx.ModelProto:
    """The encoder on a ``1x1xsamples`` waveform ``audio``; output ``features`` (1, T, dim)."""
    if wav2vec2_frames(samples) < 2:
        raise EmberValueError(f"wav2vec2: {samples} samples are too few (at least 800)")
    if dim % heads or dim % 16:
        raise EmberValueError(f"wav2vec2: dim {dim} must split into {heads} heads and 16 groups")
    g = GraphBuilder(seed)
    x, cin = "audio", 1
    for i, (k, s) in enumerate(WAV2VEC2_CONVS):
        x = _conv1d(g, x, f"feature.{i}", cin, 512, k, s)
        if i == 0:
            x = group_norm(g, x, f"feature.{i}.norm", 512, 512, rank=3)
        x, cin = gelu(g, x, f"feature.{i}.gelu"), 512
    frames = wav2vec2_frames(samples)
    x = g.node("Transpose", [x], "features.t", perm=[0, 2, 1])
    x = linear(g, layer_norm(g, x, "features.norm", 512), "projection", 512, dim)
    pos = g.node("Transpose", [x], "pos.t", perm=[0, 2, 1])
    pos = _conv1d(g, pos, "pos.conv", dim, dim, 128, pad=64, group=16, bias=True)
    starts, ends, axes = (
        g.const(f"pos.{n}", np.array([v], np.int64))
        for n, v in (("start", 0), ("end", frames), ("axis", 2))
    )
    pos = g.node("Slice", [pos, starts, ends, axes], "pos.trim")
    pos = g.node("Transpose", [gelu(g, pos, "pos.gelu")], "pos.back", perm=[0, 2, 1])
    x = layer_norm(g, g.node("Add", [x, pos], "pos.add"), "encoder.norm", dim)
    for i in range(layers):
        x = _encoder_block(g, x, f"layers.{i}", frames, dim, heads)
    g.node("Identity", [x], "features")
    return g.model(
        "wav2vec2",
        [helper.make_tensor_value_info("audio", onnx.TensorProto.FLOAT, [1, 1, samples])],
        [helper.make_tensor_value_info("features", onnx.TensorProto.FLOAT, [1, frames, dim])],
    )


def wav2vec2_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The encoder and one second of seeded 16 kHz noise-like audio."""
    inputs = seeded_input((1, 1, 16000), "audio", seed + 1)
    inputs["audio"] *= np.float32(0.1)
    return wav2vec2(seed=seed), inputs


def whisper_encoder(
    mel_frames: int = 3000,
    mels: int = 80,
    layers: int = 4,
    dim: int = 384,
    heads: int = 6,
    seed: int = 0,
) -> onnx.ModelProto:
    """Whisper's audio encoder (Radford et al. 2022; tiny's shapes by default) on a
    ``1 x mels x mel_frames`` log-mel spectrogram ``mel``: two 1-D convolutions of kernel 3
    with GELU (the second of stride 2), the frames transposed to (N, T, dim) plus the
    sinusoidal position embedding, pre-norm transformer blocks and a final
    LayerNormalization; output ``features`` (1, mel_frames / 2, dim). Thirty seconds of
    audio are 3000 mel frames, 1500 tokens: no multiple of 16."""
    if mel_frames < 2 or mel_frames % 2:
        raise EmberValueError(f"whisper_encoder: mel_frames must be even, got {mel_frames}")
    if dim % heads or dim % 2:
        raise EmberValueError(f"whisper_encoder: dim {dim} must split into {heads} heads")
    g = GraphBuilder(seed)
    x = gelu(g, _conv1d(g, "mel", "conv1", mels, dim, 3, pad=1, bias=True), "conv1.gelu")
    x = gelu(g, _conv1d(g, x, "conv2", dim, dim, 3, 2, pad=1, bias=True), "conv2.gelu")
    frames = mel_frames // 2
    x = g.node("Transpose", [x], "conv.t", perm=[0, 2, 1])
    x = g.node("Add", [x, g.const("positions", _sinusoids(frames, dim))], "embed")
    for i in range(layers):
        x = _pre_norm_block(g, x, f"blocks.{i}", frames, dim, heads)
    layer_norm(g, x, "features", dim)
    return g.model(
        "whisper_encoder",
        [helper.make_tensor_value_info("mel", onnx.TensorProto.FLOAT, [1, mels, mel_frames])],
        [helper.make_tensor_value_info("features", onnx.TensorProto.FLOAT, [1, frames, dim])],
    )


def _sinusoids(length: int, dim: int) -> np.ndarray:
    """Whisper's position embedding: sines then cosines of log-spaced timescales."""
    scales = np.exp(-math.log(10000) / (dim // 2 - 1) * np.arange(dim // 2))
    t = np.arange(length)[:, None] * scales[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)[None]


def whisper_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Whisper-tiny's encoder and a seeded 3000-frame spectrogram."""
    return whisper_encoder(seed=seed), seeded_input((1, 80, 3000), "mel", seed + 1)
