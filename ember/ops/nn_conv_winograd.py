"""Winograd float32 3x3 convolutions (TVM's conv2d_winograd_without_weight_transform).

The nn.conv legalizer (ember.ops.nn_conv.conv_to_packed) asks ``winograd_form`` first: a
channels-last (NHWC, convert_layout's default on x86) float32 convolution with a constant
3x3 weight, stride 1 (or 2: below), dilation 1, one group, input channels a multiple of 16
and output channels either one or padded to one by at most a quarter (``padding_pays``:
zero filters, the last block stored masked),
becomes ``nn.conv_winograd`` with the weight transformed and packed at build time
(ember.ir.ops.nn_conv_winograd_form) when the build's target has an AVX-512 CPU record (the
c kind, or the llvm kinds, which call the runtime library's copy) and the build selects it:

* PassContext config ``WINOGRAD_CONFIG`` (``"nn.conv_winograd"``): False or 0 (never), True
  (every eligible convolution, F(4,3)), 2 or 4 (every eligible one, that tile), or unset:
  ``winograd_pays``'s choice (F(4,3), F(2,3) for few tiles of a large weight, or none;
  measured per layer, see there);

A stride-2 one (even height and width) is a stride-1 2x2 convolution of its input's four
phases ``x[2i + dr, 2j + dc]`` (4C channels; ember.ir.ops.nn_conv_winograd_form.
stride2_weight), computed as F(4 x 4, 2 x 2): 25 points per 4 x 4 outputs over 4C
channels, 6.25 multiplies per output and input channel where the direct kernel takes 9,
the kernel reading the phases where they lie in x (no copy); ``stride2_pays`` says where it
is the default. The compute is one call of ``ember_f32_winograd``
(ember/codegen/c/f32_winograd.py: input transform, (m+r-1)^2 matrix products, output
transform, each split across the threads); the
group's epilogue, where it is a chain of bias add, residual add and ReLU, is applied by the
output transform to each vector before it is stored (ember.ops.nn_conv_winograd_epilogue;
PassContext config ``EPILOGUE_CONFIG`` False keeps it a loop-IR pass after the call), any
other (SiLU...) stays the group's loop IR after the call.

Numerics: F(4,3) is not bitwise equal to the direct convolution; its transforms multiply
values by up to 5 (B^T) and 8 (A^T) and sum 36 terms per output, so the rounding error
grows to about 10-30x the direct sum's (see tests/ops/test_nn_conv_winograd.py for the
measured errors and the tolerance).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.op import Attrs
from ember.ir.ops.common import data_layout, padding, spatial
from ember.ir.ops.nn_conv_winograd_form import (
    LANES,
    STRIDE_TAPS,
    channel_blocks,
    padded_channels,
    phase_padding,
    stride2_weight,
    transform_weight,
)
from ember.ir.types import TensorType, Type
from ember.ops.common import out_tensor_type, static_shape
from ember.target import Target
from ember.tir import (
    Allocate,
    Buffer,
    PrimExpr,
    Stmt,
    StorageKind,
    call_extern,
    decl_buffer,
    eq,
    seq,
    te,
)
from ember.tir import const as tir_const
from ember.tir.stmt import AssertStmt

#: the PassContext config key selecting Winograd convolutions (see the module docstring).
WINOGRAD_CONFIG = "nn.conv_winograd"

#: the PassContext config key of the fused epilogue: False keeps the group's bias, residual
#: add and ReLU a loop-IR pass after the kernel (the same bits; for A/B timing).
EPILOGUE_CONFIG = "nn.conv_winograd_epilogue"

#: (target, config value, epilogue fused) of the build being legalized (ember.driver.pipeline
#: sets it around the legalizer; unset: no Winograd, as for every legalization outside a build).
_SETTINGS: ContextVar[tuple[Target | None, Any, bool]] = ContextVar(
    "ember_winograd_settings", default=(None, False, True)
)


@contextmanager
def winograd_scope(target: Target, config: Mapping[str, Any]) -> Iterator[None]:
    """Legalize for ``target`` with the build's ``config`` (its WINOGRAD_CONFIG value)."""
    fuse = bool(config.get(EPILOGUE_CONFIG, True))
    token = _SETTINGS.set((target, config.get(WINOGRAD_CONFIG, "auto"), fuse))
    try:
        yield
    finally:
        _SETTINGS.reset(token)


def winograd_target(target: Target | None) -> bool:
    """Whether ``target`` runs ember_f32_winograd's AVX-512 code: an AVX-512 CPU record
    (``x86-avx512``); the c kind compiles the text, the llvm kinds call the runtime
    library's AVX-512 copy (ember.codegen.llvm.tiles, which has no AVX2 one)."""
    return target is not None and "x86-avx512" in target.keys


#: F(4,3) by default; F(2,3) (a weight 16/9 of the direct one's instead of 36/9) on the layers
#: of at most FEW_TILES output tiles of 4x4 whose F(4,3) weight exceeds WEIGHT_BYTES: their
#: matrix products have few rows per weight read, and the network's weights come from DRAM
#: at every inference. Measured (one thread, thread CPU time, interleaved in one process,
#: direct / F(2,3) / F(4,3) builds of conv+bias+ReLU, load 8-16), Winograd / direct:
#: * one layer (its weights hot in L3), F(2,3) and F(4,3): ResNet-50's 3x3 at 56x56 64ch
#:   0.56-0.76 / 0.47-0.55, 28x28 128ch 0.46-0.56 / 0.34-0.45, 14x14 256ch 0.56-0.59 /
#:   0.62-0.65, 7x7 512ch 0.89-0.95 / 0.98-1.05; resnet8's 32x32 16ch 0.86-0.89 / 0.74-0.77,
#:   16x16 32ch 0.65 / 0.46, 8x8 64ch 0.56 / 0.46; YOLO's 10x10 0.49-0.63 / 0.39-0.51,
#:   20x20 0.46-0.75 / 0.32-0.63, 40x40 0.69-0.74 / 0.50-0.67, 80x80 16ch 1.14-1.19 /
#:   0.68-0.93; CRNN's 4x25 128->256 0.54 / 0.32, 4x25 256->256 0.72 / 0.71, 8x25
#:   0.46-0.53 / 0.39-0.40, 16x50 0.56 / 0.44;
#: * a chain of 8 such layers with different weights (cold: 8 x 9.4 MB at 14x14 256ch):
#:   14x14 256ch 0.54 / 0.54, 28x28 128ch 0.48 / 0.36, 56x56 64ch 0.61 / 0.41, 7x7 512ch
#:   0.77 / 0.96, 10x10 128ch 0.71 / 0.70, 20x20 64ch 0.57 / 0.43.
FEW_TILES = 16
WEIGHT_BYTES = 8 << 20
#: no Winograd when its scratch (the transformed input and products, whole-image: no chunks
#: yet) would exceed this: the largest measured, ResNet-50's 56x56 64->64, needs 3.4 MiB
#: (YOLO's 40x40 64->80 2.0, 80x80 16->16 1.8); a 224x224 64-channel layer would need
#: 55 MiB (unmeasured).
SCRATCH_BYTES = 16 << 20


def winograd_pays(
    in_channels: int, out_channels: int, height: int, width: int, batch: int = 1
) -> int:
    """The tile m (4, 2, or 0: the direct kernel) of a layer of ``height`` x ``width``
    outputs when the build does not choose (see FEW_TILES and SCRATCH_BYTES; only batch 1
    was measured, larger batches keep the direct kernel)."""
    if batch != 1:
        return 0
    tiles = -(-height // 4) * -(-width // 4)
    weight = 4 * 36 * in_channels * padded_channels(out_channels)
    m = 2 if tiles <= FEW_TILES and weight > WEIGHT_BYTES else 4
    scratch = scratch_bytes(batch, in_channels, out_channels, height, width, m)
    return m if scratch <= SCRATCH_BYTES else 0


def _eligible(node: Call) -> int:
    """The stride (1 or 2) of a convolution ember_f32_winograd can compute, else 0."""
    x, w = node.args
    if not isinstance(w, Constant) or not isinstance(x.type, TensorType):
        return 0
    attrs = node.attrs
    if data_layout(attrs) != "NHWC" or int(attrs["groups"]) != 1:
        return 0
    wd = np.asarray(w.data)
    if wd.dtype != np.float32 or x.type.dtype != "float32" or wd.ndim != 4:
        return 0
    o, c, kh, kw = wd.shape
    if (kh, kw) != (3, 3) or not padding_pays(o) or spatial(attrs, "dilation", 2, 1) != (1, 1):
        return 0
    strides = spatial(attrs, "strides", 2, 1)
    if c % LANES or strides not in ((1, 1), (2, 2)):
        return 0
    if strides == (1, 1):
        return 1
    # the phases' 2x2 convolution (stride2_weight): even sizes, no padding past the end
    assert isinstance(node.type, TensorType)
    _, h, wi, _ = (int(d) for d in x.type.shape)
    _, oh, ow, _ = (int(d) for d in node.type.shape)
    (top, bottom), (left, right) = padding(attrs, 2)
    if h % 2 or wi % 2 or max(top, left) > 2:
        return 0
    return 2 if min(phase_padding((top, left, bottom, right), (h, wi), (oh, ow))) >= 0 else 0


def padding_pays(out_channels: int) -> bool:
    """Whether a layer of ``out_channels`` (not a multiple of 16: the weight is padded with
    zero filters to the next one, the last block stored masked) wastes at most a quarter of
    its products. Measured on DBNet's 3x3 96->24 FPN convs, F(4,3) padded to 32 against the
    direct 24-channel kernels (one thread, thread CPU time, interleaved in one process, load
    6): one layer between 1x1 convs 0.69 (10x10), 0.68 (20x20), 0.70 (40x40); in the model
    80x80 0.74-0.93, 40x40 0.98, dbnet 0.905-0.943."""
    return 4 * (padded_channels(out_channels) - out_channels) <= padded_channels(out_channels)


def winograd_tile(node: Call) -> int:
    """The tile m of F(m x m, 3 x 3), or of F(m x m, 2 x 2) for a stride-2 ``node``, in this
    build (0: none)."""
    target, choice, _ = _SETTINGS.get()
    stride = _eligible(node) if winograd_target(target) else 0
    if choice is False or choice == 0 or not stride:
        return 0
    if choice is True:
        return 4
    if choice in (2, 4):
        return int(choice) if stride == 1 or choice == 4 else 0
    assert isinstance(node.type, TensorType)
    n, oh, ow, o = (int(d) for d in node.type.shape)
    c = int(np.asarray(node.args[1].data).shape[1])  # type: ignore[attr-defined]
    if stride == 2:
        return stride2_pays(c, o, oh, ow, n)
    return winograd_pays(c, o, oh, ow, n)


def stride2_pays(
    in_channels: int, out_channels: int, height: int, width: int, batch: int = 1
) -> int:
    """The tile (4, or 0: the direct kernel) of a stride-2 3x3 layer of ``height`` x
    ``width`` outputs when the build does not choose: F(4,2) of its phases where the
    transformed weight (25 x 4C x O floats, 11x the direct one's) stays within WEIGHT_BYTES.

    Measured (one layer, one thread, thread CPU time, interleaved in one process, load
    0.5-0.7, Zen 4), F(4,2) / direct, by input and output: resnet8's 32x32x16->32 0.79 and
    16x16x32->64 0.74; ResNet-50's 56x56x128->128 (6.5 MB) 0.74 and 28x28x256->256 (26 MB)
    1.06; YOLO-like 80x80x32->64 0.74, 40x40x64->128 0.71, 20x20x128->256 (13 MB) 1.11."""
    if batch != 1:
        return 0
    weight = 4 * 25 * 4 * in_channels * padded_channels(out_channels)
    scratch = scratch_bytes(batch, 4 * in_channels, out_channels, height, width, 4, 2)
    return 4 if weight <= WEIGHT_BYTES and scratch <= SCRATCH_BYTES else 0


def winograd_form(node: Call) -> Expr | None:
    """``nn.conv_winograd`` for nn.conv ``node`` when this build selects it, else None."""
    m = winograd_tile(node)
    if not m:
        return None
    x, w = node.args
    wd = np.asarray(w.data)  # type: ignore[attr-defined]
    (top, bottom), (left, right) = padding(node.attrs, 2)
    stride = spatial(node.attrs, "strides", 2, 1)[0]
    if stride == 2:  # a 2x2 convolution of the input's phases, which the kernel reads
        wd = stride2_weight(wd, top, left)
    u = transform_weight(wd, m)
    epilogue = int(_SETTINGS.get()[2])
    o = int(wd.shape[0])
    channels = 0 if o % LANES == 0 else o
    attrs = {"tile": m, "strides": stride, "epilogue": epilogue, "channels": channels}
    pads = (top, left, bottom, right)
    return call("nn.conv_winograd", x, const(u), name=node.name, padding=pads, **attrs)


#: the most tiles (rows) of one register tile of the matrix products: 14 x 2 zmm
#: accumulators (32 output channels) of AVX-512's 32 registers.
MAX_ROWS = 14

#: the same with one block of 16 output channels (16 accumulators): resnet8's 32x32x16
#: layers (64 tiles) take panels of 16 rather than 8, their products 0.89x the time (one
#: thread; 22 or 28 rows did no better).
MAX_ROWS_ONE_BLOCK = 16


#: the same with four blocks (64 output channels; 4 weight vectors and 7 x 4 accumulators).
#: Four rows did best where they pad no more: ResNet-50's 56x56x64 layer (196 tiles) took
#: 0.95x the time of 7 rows, its 28x28x128 layer (49 tiles) 1.05x (one thread, a C harness).
MAX_ROWS_FOUR_BLOCKS = 7


#: floats between one panel's V (or M) and the next in ember_f32_winograd's scratch
#: (EMBER_WINO_GAP of ember/codegen/c/f32_winograd.py): the panels are the threads' shares.
PANEL_GAP = 256


def point_stride(floats: int) -> int:
    """Floats from one transform point's V (or M) to the next in ember_f32_winograd's scratch
    (EMBER_WINO_STRIDE of ember/codegen/c/f32_winograd.py): ``floats``, and a 64-byte cache
    line more where that is a multiple of 1 KiB."""
    return floats + 16 if floats % 256 == 0 else floats


def panel_rows(tiles: int, blocks: int = 2) -> int:
    """Tiles per panel (register tile rows) of the products with ``blocks`` blocks of 16
    output channels: the one of 8..MAX_ROWS (MAX_ROWS_ONE_BLOCK for one block) that pads
    ``tiles`` least (the most rows on ties), or all of them when fewer; with four blocks
    the one of 4..MAX_ROWS_FOUR_BLOCKS that pads least (the fewest rows on ties)."""
    if blocks == 4:
        if tiles <= 4:
            return tiles
        return min(range(4, MAX_ROWS_FOUR_BLOCKS + 1), key=lambda r: -(-tiles // r) * r)
    most = MAX_ROWS_ONE_BLOCK if blocks == 1 else MAX_ROWS
    if tiles <= most:
        return tiles
    return min(range(most, 7, -1), key=lambda r: -(-tiles // r) * r)


def scratch_bytes(n: int, c: int, o: int, oh: int, ow: int, m: int, r: int = 3) -> int:
    """Bytes of ember_f32_winograd's scratch, V and M in either layout: panel by panel
    (threads), each panel a^2 x (point_stride(rows x C) + point_stride(rows x Op)) floats
    and PANEL_GAP twice, or point by point (one thread), a^2 x (point_stride(padded tiles
    x C) + point_stride(padded tiles x Op)); a = m + r - 1."""
    tiles = n * -(-oh // m) * -(-ow // m)
    op = padded_channels(o)
    rows = panel_rows(tiles, channel_blocks(op))
    panels = -(-tiles // rows)
    per_point = point_stride(rows * c) + point_stride(rows * op)
    points = (m + r - 1) ** 2
    by_panel = panels * (points * per_point + 2 * PANEL_GAP)
    by_point = points * (point_stride(panels * rows * c) + point_stride(panels * rows * op))
    return 4 * max(by_panel, by_point) + 64


def conv_winograd(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """nn.conv_winograd's compute: one call of ``ember_f32_winograd``."""
    x, u = inputs
    ty = out_tensor_type(out_type)
    n, h, w, c = static_shape(x)
    _, oh, ow, o = (int(d) for d in ty.shape)
    m, stride = int(attrs["tile"]), int(attrs["strides"])
    pads = tuple(int(p) for p in attrs["padding"])
    if stride == 2:  # the kernel's image: the phases, (h / 2, w / 2, 4c) (r = 2: it reads x)
        pads = phase_padding(pads, (h, w), (oh, ow))
        h, w, c = h // 2, w // 2, 4 * c
    r = STRIDE_TAPS[stride]
    nb = int(static_shape(u)[3]) // LANES
    assert nb == channel_blocks(padded_channels(o))
    nbytes = scratch_bytes(n, c, o, oh, ow, m, r)
    rows = panel_rows(n * -(-oh // m) * -(-ow // m), nb)
    ints = [n, h, w, c, o, oh, ow, pads[0], pads[1], m, r, nb, rows]

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        scratch = decl_buffer((nbytes,), "uint8", "winograd_scratch")
        args: list[PrimExpr] = [ins[0].data, ins[1].data, outs[0].data, scratch.data]
        args += [tir_const(v, "int32") for v in ints]
        # no fused epilogue (bias, residual: y, unread); nn_conv_winograd_epilogue fills them
        args += [outs[0].data, outs[0].data, tir_const(0, "int32")]
        check = AssertStmt(eq(call_extern("int32", "ember_f32_winograd", *args), 0), "", seq())
        return Allocate(scratch, check, StorageKind.HEAP)

    out = te.extern(ty.shape, inputs, body, "conv_winograd", dtype=ty.dtype)
    assert isinstance(out, te.Tensor)
    return out
