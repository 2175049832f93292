"""Example models for end-to-end tests and benchmarks, generated deterministically.

Nothing here downloads anything or writes files: every generator builds an ONNX
``ModelProto`` in memory from a seed, so the same call gives byte-identical models.

* :func:`mobilenet_v2` - MobileNetV2 (inverted residual blocks, depthwise convs, ReLU6 as
  ``Clip``, global average pool, ``Gemm`` classifier), opset 17; ``image_size`` and
  ``width`` shrink it for fast tests.
* :func:`bert_encoder` - a BERT-style encoder (embeddings, LayerNormalization, multi-head
  attention with an additive mask input, Erf-based GELU MLP, residuals), opset 17.
* :func:`light_model` - one of the nine ``light_*`` models shipped with onnx's backend
  tests, whose ``ConstantOfShape`` weights (every value 0.02) are replaced by seeded
  random weights of the right shape and role, so outputs are not degenerate.
* ResNeXt-50 and RegNetX (ember.examples.grouped): grouped 3x3 convolutions of 4 to 32
  channels per group.
* :func:`ember.examples.vit.vit` - a vision transformer of DeiT-Tiny's shape (197 tokens).
* :func:`ember.examples.efficientnet.efficientnet_b0` - EfficientNet-B0 (SiLU, 5x5
  depthwise, squeeze-excitation with a Sigmoid gate).
* :func:`ember.examples.audio.wav2vec2` - a wav2vec 2.0-style speech encoder (1-D
  convolutions over the waveform, GroupNorm, a grouped position convolution of kernel 128),
  and :func:`ember.examples.audio.whisper_encoder` - Whisper-tiny's encoder (1500 tokens).
* :func:`ember.examples.convnext.convnext_tiny` - ConvNeXt-T (7x7 depthwise, LayerNorm and
  an MLP over NHWC between the model's own transposes).
* :func:`ember.examples.unet.unet` - a diffusion-style U-Net (GroupNorm as PyTorch exports
  it, SiLU, ConvTranspose, skip concatenations).

Each comes as a :class:`ModelCase` (name, model, seeded inputs); :data:`MODELS` names them::

    case = make_model("mobilenet_v2_96")
    outs = ember.testing.run_onnx_compiled(case.model, case.inputs)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ember.errors import EmberValueError, FrontendError
from ember.examples.audio import wav2vec2_case, whisper_case
from ember.examples.builder import IR_VERSION, OPSET
from ember.examples.builder import GraphBuilder as _Graph
from ember.examples.classification import pp_lcnet_case
from ember.examples.convnext import convnext_case
from ember.examples.deeplab import deeplabv3_case
from ember.examples.detection import yolo_case
from ember.examples.efficientnet import efficientnet_case
from ember.examples.gpt2 import gpt2_decode_case, gpt2_prefill_case
from ember.examples.grouped import REGNETX, regnetx_case, resnext_case
from ember.examples.ocr import crnn_case, dbnet_case
from ember.examples.tiny import TINY_MODELS, tiny_case
from ember.examples.unet import unet_case
from ember.examples.vit import vit_case
from ember.support.registry import Registry
from ember.testing import run_onnxruntime  # imports onnxruntime only when called

#: the nine ``light`` models of onnx's backend test data, by short name.
LIGHT_MODELS: tuple[str, ...] = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)

#: MobileNetV2's inverted residual settings: (expansion t, channels c, repeats n, stride s).
MOBILENET_V2_BLOCKS: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


@dataclass(frozen=True)
class ModelCase:
    """A model with its seeded inputs, ready for ember and onnxruntime."""

    name: str
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Input name -> static shape (what ``from_onnx(shape=...)`` takes)."""
        return {k: tuple(v.shape) for k, v in self.inputs.items()}


# ----------------------------------------------------------------------------- MobileNetV2


def _divisible(value: float, divisor: int = 8) -> int:
    """Round channels as the reference implementation does (never down by more than 10%)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def mobilenet_v2(
    image_size: int = 224, width: float = 1.0, num_classes: int = 1000, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV2 on a ``1x3ximage_sizeximage_size`` input ``input``; output ``logits``.

    Batch norms are folded into the convolutions (as an exported inference model has
    them); weights are He-normal so activations neither vanish nor saturate.
    """
    if image_size < 32 or image_size % 32:
        raise EmberValueError(
            f"mobilenet_v2: image_size must be a positive multiple of 32, got {image_size}"
        )
    g = _Graph(seed)
    relu6 = (
        g.const("relu6.min", np.array(0.0, "float32")),
        g.const("relu6.max", np.array(6.0, "float32")),
    )

    def conv(
        x: str, name: str, cin: int, cout: int, k: int, stride: int, groups: int, act: bool
    ) -> str:
        std = math.sqrt(2.0 / (cin // groups * k * k))
        w = g.weight(f"{name}.weight", (cout, cin // groups, k, k), std)
        b = g.weight(f"{name}.bias", (cout,), 0.05)
        pad = k // 2
        y = g.node(
            "Conv",
            [x, w, b],
            name,
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[pad] * 4,
            group=groups,
        )
        return g.node("Clip", [y, *relu6], f"{name}.relu6") if act else y

    channels = _divisible(32 * width)
    x = conv("input", "features.0", 3, channels, 3, 2, 1, True)
    index = 1
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        out = _divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            block = f"features.{index}"
            hidden = channels * t
            y = x
            if t != 1:
                y = conv(y, f"{block}.expand", channels, hidden, 1, 1, 1, True)
            y = conv(y, f"{block}.depthwise", hidden, hidden, 3, stride, hidden, True)
            y = conv(y, f"{block}.project", hidden, out, 1, 1, 1, False)
            if stride == 1 and channels == out:
                y = g.node("Add", [x, y], f"{block}.residual")
            x, channels, index = y, out, index + 1
    last = _divisible(1280 * max(1.0, width))
    x = conv(x, f"features.{index}", channels, last, 1, 1, 1, True)
    x = g.node("GlobalAveragePool", [x], "pool")
    x = g.node("Flatten", [x], "flatten", axis=1)
    w = g.weight("classifier.weight", (num_classes, last), math.sqrt(1.0 / last))
    b = g.weight("classifier.bias", (num_classes,), 0.05)
    g.node("Gemm", [x, w, b], "logits", transB=1)
    shape = [1, 3, image_size, image_size]
    return g.model(
        "mobilenet_v2",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, num_classes])],
    )


def mobilenet_v2_inputs(image_size: int = 224, seed: int = 1) -> dict[str, np.ndarray]:
    """A seeded normalized image for :func:`mobilenet_v2`."""
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, image_size, image_size)).astype(np.float32)}


# ----------------------------------------------------------------------------- BERT encoder


def bert_encoder(
    layers: int = 2,
    hidden: int = 128,
    heads: int = 4,
    seq: int = 64,
    vocab: int = 1000,
    intermediate: int | None = None,
    batch: int = 1,
    seed: int = 0,
) -> onnx.ModelProto:
    """A BERT-style encoder: inputs ``input_ids`` (int64, batch x seq) and ``attention_mask``
    (float32, batch x seq, additive: 0 keeps a position, -10000 masks it); output
    ``last_hidden_state`` (batch x seq x hidden).

    The graph is what PyTorch exports for a post-LayerNorm encoder: word + position
    embedding Gathers, LayerNormalization, MatMul/Add projections, Reshape/Transpose to
    heads, ``softmax(q k^T / sqrt(d) + mask) v``, an Erf-based GELU MLP and residuals.
    """
    if hidden % heads:
        raise EmberValueError(f"bert_encoder: hidden={hidden} is not divisible by heads={heads}")
    head_dim = hidden // heads
    inner = intermediate if intermediate is not None else 4 * hidden
    g = _Graph(seed)
    std = 0.02 * math.sqrt(768 / hidden)  # BERT's 0.02 at hidden 768, scaled to keep q.k ~ 1

    def linear(x: str, name: str, cin: int, cout: int) -> str:
        w = g.weight(f"{name}.weight", (cin, cout), std)
        b = g.weight(f"{name}.bias", (cout,), 0.02)
        return g.node("Add", [g.node("MatMul", [x, w], f"{name}.matmul"), b], name)

    def layer_norm(x: str, name: str) -> str:
        scale = g.const(f"{name}.weight", g.rng.uniform(0.8, 1.2, hidden).astype(np.float32))
        bias = g.weight(f"{name}.bias", (hidden,), 0.05)
        return g.node("LayerNormalization", [x, scale, bias], name, axis=-1, epsilon=1e-12)

    def split_heads(x: str, name: str, perm: Sequence[int]) -> str:
        x = g.node("Reshape", [x, heads_shape], f"{name}.reshape")
        return g.node("Transpose", [x], f"{name}.transpose", perm=list(perm))

    heads_shape = g.const("shape.heads", np.array([batch, seq, heads, head_dim], "int64"))
    hidden_shape = g.const("shape.hidden", np.array([batch, seq, hidden], "int64"))
    unsq_axes = g.const("axes.mask", np.array([1, 2], "int64"))
    scale = g.const("attention.scale", np.array(math.sqrt(head_dim), "float32"))
    half = g.const("gelu.half", np.array(0.5, "float32"))
    one = g.const("gelu.one", np.array(1.0, "float32"))
    sqrt2 = g.const("gelu.sqrt2", np.array(math.sqrt(2.0), "float32"))

    words = g.weight("embeddings.word", (vocab, hidden), std * 25)
    positions = g.weight("embeddings.position", (seq, hidden), std * 25)
    pos_ids = g.const("embeddings.position_ids", np.arange(seq, dtype=np.int64)[None, :])
    x = g.node(
        "Add",
        [
            g.node("Gather", [words, "input_ids"], "embeddings.word_lookup"),
            g.node("Gather", [positions, pos_ids], "embeddings.position_lookup"),
        ],
        "embeddings.sum",
    )
    x = layer_norm(x, "embeddings.norm")
    mask = g.node("Unsqueeze", ["attention_mask", unsq_axes], "mask.unsqueeze")
    for i in range(layers):
        p = f"layer.{i}"
        q = split_heads(linear(x, f"{p}.query", hidden, hidden), f"{p}.q", (0, 2, 1, 3))
        k = split_heads(linear(x, f"{p}.key", hidden, hidden), f"{p}.k", (0, 2, 3, 1))
        v = split_heads(linear(x, f"{p}.value", hidden, hidden), f"{p}.v", (0, 2, 1, 3))
        scores = g.node("Div", [g.node("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled")
        probs = g.node(
            "Softmax", [g.node("Add", [scores, mask], f"{p}.masked")], f"{p}.probs", axis=-1
        )
        ctx = g.node("MatMul", [probs, v], f"{p}.context")
        ctx = g.node("Transpose", [ctx], f"{p}.context.transpose", perm=[0, 2, 1, 3])
        ctx = g.node("Reshape", [ctx, hidden_shape], f"{p}.context.reshape")
        attn = linear(ctx, f"{p}.attention.output", hidden, hidden)
        x = layer_norm(g.node("Add", [x, attn], f"{p}.attention.residual"), f"{p}.attention.norm")
        h = linear(x, f"{p}.intermediate", hidden, inner)
        erf = g.node("Erf", [g.node("Div", [h, sqrt2], f"{p}.gelu.div")], f"{p}.gelu.erf")
        gate = g.node("Mul", [g.node("Add", [erf, one], f"{p}.gelu.add"), half], f"{p}.gelu.half")
        h = g.node("Mul", [h, gate], f"{p}.gelu")
        h = linear(h, f"{p}.output", inner, hidden)
        x = layer_norm(g.node("Add", [x, h], f"{p}.output.residual"), f"{p}.output.norm")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    return g.model(
        "bert_encoder",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, [batch, seq]),
            helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [batch, seq]),
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, [batch, seq, hidden]
            )
        ],
    )


def bert_inputs(
    seq: int = 64, vocab: int = 1000, batch: int = 1, seed: int = 1
) -> dict[str, np.ndarray]:
    """Seeded token ids and an additive mask that hides the last quarter of each sequence."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=(batch, seq), dtype=np.int64)
    mask = np.zeros((batch, seq), np.float32)
    mask[:, seq - seq // 4 :] = -10000.0
    return {"input_ids": ids, "attention_mask": mask}


# ----------------------------------------------------------------------------- light models


def light_model_path(name: str) -> Path:
    """The ``light_<name>.onnx`` file inside the installed onnx package."""
    if name not in LIGHT_MODELS:
        raise EmberValueError(f"unknown light model {name!r}; known: {', '.join(LIGHT_MODELS)}")
    path = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    if not path.is_file():
        raise FrontendError(
            f"{path} is missing; the light models ship with onnx's backend test data "
            f"(reinstall onnx from a wheel that includes onnx/backend/test/data)"
        )
    return path


def _consumers(graph: onnx.GraphProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    uses: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for k, name in enumerate(node.input):
            uses.setdefault(name, []).append((node, k))
    return uses


def _role(
    value: str, uses: dict[str, list[tuple[onnx.NodeProto, int]]]
) -> tuple[str, onnx.NodeProto | None]:
    """What a weight is for: follow it through Reshape/Unsqueeze to the op that reads it."""
    node, k = uses[value][0]
    while node.op_type in ("Reshape", "Unsqueeze") and k == 0 and node.output[0] in uses:
        node, k = uses[node.output[0]][0]
    roles = {
        ("Conv", 1): "conv_weight",
        ("Gemm", 1): "gemm_weight",
        ("BatchNormalization", 1): "scale",
        ("BatchNormalization", 4): "variance",
        ("Mul", 1): "scale",
    }
    role = roles.get((node.op_type, k), "shift")
    readers = uses.get(node.output[0], [])
    if role == "scale" and any(user.op_type in ("Sum", "Add") for user, _ in readers):
        # The last norm of a residual branch: small, or sixteen residual sums multiply the
        # activations' scale until the final softmax is one-hot (as zero-init gamma avoids).
        role = "residual_scale"
    return role, node


def _random_weight(
    rng: np.random.Generator, shape: tuple[int, ...], role: str, node: onnx.NodeProto | None
) -> np.ndarray:
    """Weights that keep activations of a deep net O(1): He-normal convs, scales near 1."""
    if role == "conv_weight":
        std = math.sqrt(2.0 / max(1, math.prod(shape[1:])))
    elif role == "gemm_weight":
        trans_b = any(a.name == "transB" and a.i for a in (node.attribute if node else ()))
        fan_in = shape[-1] if trans_b else shape[-2]
        std = math.sqrt(2.0 / max(1, fan_in))
    elif role in ("scale", "variance"):
        return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)
    elif role == "residual_scale":
        return rng.uniform(0.1, 0.3, size=shape).astype(np.float32)
    else:
        std = 0.1
    return rng.standard_normal(size=shape, dtype=np.float32) * np.float32(std)


def patch_light_model(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """Replace every ``ConstantOfShape`` weight of ``model`` by a seeded random initializer.

    The shape comes from the node's constant shape input; the distribution from the
    weight's role (conv/Gemm weight, batch-norm scale or variance, shift). The shape
    initializers disappear, initializers stop being graph inputs (IR version 7), and the
    opset is unchanged.
    """
    rng = np.random.default_rng(seed)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    uses = _consumers(graph)
    nodes: list[onnx.NodeProto] = []
    new_inits: list[onnx.TensorProto] = []
    dropped: set[str] = set()
    for node in graph.node:
        if node.op_type != "ConstantOfShape":
            nodes.append(node)
            continue
        if node.input[0] not in inits:
            raise FrontendError(
                f"ConstantOfShape node {node.name!r} of {graph.name!r} has a computed shape; "
                f"patch_light_model needs constant shapes"
            )
        shape = tuple(int(d) for d in numpy_helper.to_array(inits[node.input[0]]))
        role, user = _role(node.output[0], uses)
        value = _random_weight(rng, shape, role, user)
        new_inits.append(numpy_helper.from_array(value, node.output[0]))
        dropped.add(node.input[0])
    still_read = {name for n in nodes for name in n.input}
    kept = [t for t in graph.initializer if t.name not in dropped or t.name in still_read]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.ir_version = 7
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept + new_inits)
    names = {t.name for t in out.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in names and i.name not in dropped]
    del out.graph.input[:]
    out.graph.input.extend(inputs)
    onnx.checker.check_model(out)
    return out


#: ops that commute with a positive scale: a weight scaled by f scales their output by f.
_HOMOGENEOUS = ("Relu", "MaxPool", "AveragePool", "GlobalAveragePool", "Dropout", "Reshape")


def calibrate_softmax(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], target_std: float = 2.0
) -> onnx.ModelProto:
    """Scale (in place) the last Gemm/Conv before a final Softmax to logits of std ``target_std``.

    Random weights leave logits anywhere from near-constant (a uniform softmax) to huge (a
    one-hot softmax); both make a comparison weak. One onnxruntime run measures the
    logits; the weight and bias of the layer that makes them (through ReLU, pooling,
    Dropout, Reshape, which commute with a positive scale) are multiplied by the power of
    two nearest to ``target_std / std``, so the result does not depend on the last bits of
    that run. Returns ``model``; one without a final Softmax is left unchanged.
    """
    graph = model.graph
    producers = {o: n for n in graph.node for o in n.output}
    finals = [n for n in graph.node if n.op_type == "Softmax" and n.output[0] in _outputs(graph)]
    if len(finals) != 1:
        return model
    logits = finals[0].input[0]
    source = producers.get(logits)
    while source is not None and source.op_type in _HOMOGENEOUS:
        source = producers.get(source.input[0])
    if source is None or source.op_type not in ("Gemm", "Conv"):
        return model
    saved = list(graph.output)
    del graph.output[:]
    graph.output.append(onnx.ValueInfoProto(name=logits))
    try:
        std = float(np.std(run_onnxruntime(model, inputs)[0]))
    finally:
        del graph.output[:]
        graph.output.extend(saved)
    if not std > 0.0:
        return model
    factor = np.float32(2.0 ** round(math.log2(target_std / std)))
    for k, tensor in enumerate(graph.initializer):
        if tensor.name in _weights_of(source, producers):
            scaled = numpy_helper.to_array(tensor) * factor
            graph.initializer[k].CopyFrom(numpy_helper.from_array(scaled, tensor.name))
    return model


def _outputs(graph: onnx.GraphProto) -> set[str]:
    return {o.name for o in graph.output}


def _weights_of(node: onnx.NodeProto, producers: dict[str, onnx.NodeProto]) -> set[str]:
    """The names of the initializers behind ``node``'s weight and bias (through Reshape)."""
    names = set()
    for name in node.input[1:3]:
        while name in producers and producers[name].op_type == "Reshape":
            name = producers[name].input[0]
        names.add(name)
    return names


def light_model(name: str, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The patched, calibrated ``light_<name>`` model and a seeded input for it."""
    model = patch_light_model(onnx.load(str(light_model_path(name))), seed=seed)
    (inp,) = model.graph.input
    shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
    inputs = {inp.name: np.random.default_rng(seed + 1).standard_normal(shape).astype(np.float32)}
    return calibrate_softmax(model, inputs), inputs


# ----------------------------------------------------------------------------- the catalogue

#: the benchmark zoo of issue 12: mobile OCR and detection models, a PP-LCNet, the three
#: MLPerf Tiny shapes, MobileNetV2 and ResNet-50 (``benchmarks/models.py --zoo``).
ZOO: tuple[str, ...] = (
    "crnn",
    "yolo",
    "pp_lcnet",
    "dbnet",
    *TINY_MODELS,
    "mobilenet_v2",
    "resnet50",
)

#: example models by name: ``MODELS.get(name)()`` gives ``(model, inputs)``.
MODELS: Registry[Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]]] = Registry(
    "example model"
)


def make_model(name: str) -> ModelCase:
    """Build the example model ``name`` with its inputs (see :data:`MODELS` for the names)."""
    model, inputs = MODELS.get(name)()
    return ModelCase(name, model, inputs)


def register_builtin_models() -> None:
    """Fill :data:`MODELS` (idempotent): the light models, MobileNetV2s, BERT encoders,
    the three MLPerf Tiny models, the zoo of issue 12 (:data:`ZOO`'s new four) and the
    grouped-convolution classifiers (ResNeXt-50, RegNetX-200MF and -400MF), a ViT,
    EfficientNet-B0, ConvNeXt-T, a U-Net, two speech encoders (wav2vec2, Whisper-tiny's),
    a GPT-2 (a prompt's prefill and one decoding step with a key/value cache) and
    DeepLabV3."""
    builders = {name: partial(light_model, name) for name in LIGHT_MODELS}
    for size, width in ((224, 1.0), (96, 1.0), (64, 0.35)):
        name = "mobilenet_v2" + ("" if size == 224 else f"_{size}")
        name += "" if width == 1.0 else f"_w{width:g}"
        builders[name] = partial(_mobilenet_case, size, width)
    builders["bert"] = partial(_bert_case, 2, 128, 4, 64)
    builders["bert_large"] = partial(_bert_case, 4, 256, 4, 128)
    for name in TINY_MODELS:
        builders[name] = partial(tiny_case, name)
    builders["crnn"] = partial(crnn_case)
    builders["yolo"] = partial(yolo_case)
    builders["pp_lcnet"] = partial(_calibrated, pp_lcnet_case)
    builders["dbnet"] = partial(dbnet_case)
    builders["resnext50"] = partial(resnext_case)
    for setting in REGNETX:
        builders[f"regnetx_{setting}"] = partial(regnetx_case, setting)
    builders["vit_tiny"] = partial(vit_case)
    builders["efficientnet_b0"] = partial(efficientnet_case)
    builders["unet"] = partial(unet_case)
    builders["convnext_tiny"] = partial(convnext_case)
    builders["wav2vec2"] = partial(wav2vec2_case)
    builders["whisper_tiny_encoder"] = partial(whisper_case)
    builders["gpt2_prefill"] = partial(gpt2_prefill_case)
    builders["gpt2_decode"] = partial(gpt2_decode_case)
    builders["deeplabv3"] = partial(deeplabv3_case)
    for name, build in builders.items():
        if name not in MODELS:
            MODELS.register(name, build)


def _mobilenet_case(size: int, width: float) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    return mobilenet_v2(image_size=size, width=width), mobilenet_v2_inputs(size)


def _calibrated(
    build: Callable[[], tuple[onnx.ModelProto, dict[str, np.ndarray]]],
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model, inputs = build()
    return calibrate_softmax(model, inputs), inputs


def _bert_case(
    layers: int, hidden: int, heads: int, seq: int
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    model = bert_encoder(layers=layers, hidden=hidden, heads=heads, seq=seq)
    return model, bert_inputs(seq=seq)


register_builtin_models()

__all__ = [
    "IR_VERSION",
    "LIGHT_MODELS",
    "MODELS",
    "OPSET",
    "ZOO",
    "ModelCase",
    "bert_encoder",
    "bert_inputs",
    "calibrate_softmax",
    "light_model",
    "light_model_path",
    "make_model",
    "mobilenet_v2",
    "mobilenet_v2_inputs",
    "register_builtin_models",
]
