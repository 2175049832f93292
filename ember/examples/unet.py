"""A diffusion-style U-Net (the residual blocks of DDPM and Stable Diffusion's UNet, without
attention or a time embedding), with seeded weights.

:func:`unet`: a 3x3 input convolution, then per level a residual block (GroupNorm, SiLU,
3x3 convolution, twice, and a 1x1 shortcut where the channels change) and a 3x3 stride-2
convolution down; a middle block; per level up a 2x2 stride-2 ConvTranspose, a Concat with
the level's skip and a residual block; GroupNorm, SiLU and a 3x3 output convolution.

GroupNorm is exported as PyTorch does before opset 18: ``Reshape`` to (N, groups, -1),
``InstanceNormalization`` with unit scale and zero bias, ``Reshape`` back to the ``Shape``
of its input, then ``Mul`` and ``Add`` by the per-channel weight and bias.
"""

from __future__ import annotations

import numpy as np
import onnx

from ember.errors import EmberValueError
from ember.examples.blocks import activation, conv, seeded_input
from ember.examples.builder import GraphBuilder

#: the channels of each level (a base of 64 multiplied by 1, 2, 4).
UNET_CHANNELS: tuple[int, ...] = (64, 128, 256)
#: GroupNorm's groups (32, as in DDPM and Stable Diffusion).
UNET_GROUPS = 32


def group_norm(
    g: GraphBuilder, x: str, name: str, channels: int, groups: int, rank: int = 4
) -> str:
    """GroupNorm as PyTorch exports it at opset 17 (see the module docstring) on a tensor
    of ``rank``."""
    view = (channels,) + (1,) * (rank - 2)
    shape = g.const(f"{name}.grouped", np.array([0, groups, -1], np.int64))
    ones = g.const(f"{name}.ones", np.ones(groups, np.float32))
    zeros = g.const(f"{name}.zeros", np.zeros(groups, np.float32))
    y = g.node("Reshape", [x, shape], f"{name}.reshape")
    y = g.node("InstanceNormalization", [y, ones, zeros], f"{name}.norm", epsilon=1e-5)
    y = g.node("Reshape", [y, g.node("Shape", [x], f"{name}.shape")], f"{name}.back")
    gamma = g.const(f"{name}.weight", (1.0 + 0.1 * g.rng.standard_normal(view)).astype("float32"))
    beta = g.weight(f"{name}.bias", view, 0.05)
    return g.node("Add", [g.node("Mul", [y, gamma], f"{name}.scale"), beta], f"{name}.shift")


def _res_block(g: GraphBuilder, x: str, name: str, cin: int, cout: int, groups: int) -> str:
    """GroupNorm, SiLU, conv; GroupNorm, SiLU, conv; plus the (1x1 when cin != cout) input."""
    y = activation(g, group_norm(g, x, f"{name}.norm1", cin, groups), f"{name}.act1", "silu")
    y = conv(g, y, f"{name}.conv1", cin, cout, 3)
    y = activation(g, group_norm(g, y, f"{name}.norm2", cout, groups), f"{name}.act2", "silu")
    y = conv(g, y, f"{name}.conv2", cout, cout, 3, gain=0.5)
    skip = x if cin == cout else conv(g, x, f"{name}.shortcut", cin, cout)
    return g.node("Add", [y, skip], f"{name}.add")


def unet(
    image_size: int = 64,
    channels: tuple[int, ...] = UNET_CHANNELS,
    groups: int = UNET_GROUPS,
    seed: int = 0,
) -> onnx.ModelProto:
    """The U-Net on a ``1x3ximage_sizeximage_size`` input ``image``; output ``output`` of
    the same shape."""
    levels = len(channels)
    if image_size < 2**levels or image_size % 2 ** (levels - 1):
        raise EmberValueError(
            f"unet: image_size must be a multiple of {2 ** (levels - 1)}, got {image_size}"
        )
    if any(c % groups for c in channels):
        raise EmberValueError(f"unet: every level's channels {channels} must split into {groups}")
    g = GraphBuilder(seed)
    x, cin = conv(g, "image", "conv_in", 3, channels[0], 3), channels[0]
    skips: list[tuple[str, int]] = []
    for level, cout in enumerate(channels):
        x, cin = _res_block(g, x, f"down.{level}", cin, cout, groups), cout
        if level < levels - 1:
            skips.append((x, cout))
            x = conv(g, x, f"down.{level}.downsample", cout, cout, 3, 2)
    x = _res_block(g, x, "mid", cin, cin, groups)
    for level in reversed(range(levels - 1)):
        skip, width = skips[level]
        w = g.weight(f"up.{level}.upsample.weight", (cin, width, 2, 2), (1.0 / cin) ** 0.5)
        up = g.node(
            "ConvTranspose", [x, w], f"up.{level}.upsample", kernel_shape=[2, 2], strides=[2, 2]
        )
        x = g.node("Concat", [up, skip], f"up.{level}.concat", axis=1)
        x, cin = _res_block(g, x, f"up.{level}", 2 * width, width, groups), width
    x = activation(g, group_norm(g, x, "norm_out", cin, groups), "act_out", "silu")
    conv(g, x, "output", cin, 3, 3, gain=0.5)
    return g.image_model("unet", image_size, "output", (1, 3, image_size, image_size))


def unet_case(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The U-Net and a seeded 64x64 image."""
    return unet(seed=seed), seeded_input((1, 3, 64, 64), "image", seed + 1)
