"""Channels-last (NHWC) 1x1 convolutions on the float32 micro-kernel whatever their
reduction (ember.ops.nn_conv_pack.NHWC_POINTWISE_KERNEL): the layout choice, the kernel's
tiles in the lowered loop IR (bands of whole rows, not 4-6 columns per call), and compiled
results equal to the NCHW build's."""

from __future__ import annotations

import numpy as np
import pytest
from packed_conv_lowering import v

from ember.driver import build
from ember.ir import Attrs, Function, IRModule, TensorType, Var, call, const
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_nhwc, nn_conv_pack
from ember.ops.nn_conv_pack import kernel_layout, nhwc_tiles
from ember.ops.registry import COMPUTE_TARGET
from ember.target import Target
from ember.testing.runners import run_artifacts

AVX2 = "c -mcpu=haswell"
TO_LAST = (0, 2, 3, 1)
TO_FIRST = (0, 3, 1, 2)


def _layout(wshape: tuple[int, ...], out_nchw: tuple[int, ...], channels_last: bool) -> bool:
    token = COMPUTE_TARGET.set(Target.create(AVX2))
    try:
        return kernel_layout("float32", wshape, out_nchw, channels_last=channels_last)
    finally:
        COMPUTE_TARGET.reset(token)


def test_short_nhwc_pointwise_reductions_take_the_kernel_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # ResNet-50's 1x1 64->256 at 56x56: 64 channels, below tile_kernel_pays' threshold
    assert _layout((16, 64, 1, 1, 16), (1, 256, 56, 56), channels_last=True)
    assert not _layout((16, 64, 1, 1, 16), (1, 256, 56, 56), channels_last=False)
    # small images (taken whole by the kernel), 3x3 taps and narrow blocks: as before
    assert not _layout((36, 96, 1, 1, 16), (1, 576, 14, 14), channels_last=True)
    assert not _layout((6, 16, 1, 1, 16), (1, 96, 112, 112), channels_last=True)  # 16 channels
    assert not _layout((1, 8, 3, 3, 16), (1, 16, 14, 14), channels_last=True)  # 72 steps
    assert not _layout((3, 16, 1, 1, 8), (1, 24, 14, 14), channels_last=True)
    monkeypatch.setattr(nn_conv_pack, "NHWC_POINTWISE_KERNEL", False)
    assert not _layout((16, 64, 1, 1, 16), (1, 256, 56, 56), channels_last=True)


def _tiles(wshape: tuple[int, ...], out_nhwc: tuple[int, ...], strides: int = 1) -> object:
    conv = ((strides, strides), (1, 1), (0, 0), (0, 0))
    token = COMPUTE_TARGET.set(Target.create(AVX2))
    try:
        return nhwc_tiles("float32", wshape, out_nhwc, conv, 1)
    finally:
        COMPUTE_TARGET.reset(token)


def test_nhwc_pointwise_tiles_are_decided_in_one_place() -> None:
    # (kernel layout, flattened positions) for ResNet-50's 1x1s at 56x56: 64->256 flat on
    # the kernel's layout; 256->64 keeps the kernel's row bands (ROW_BAND_CHANNELS)
    assert _tiles((16, 64, 1, 1, 16), (1, 56, 56, 256)) == (True, True)
    assert _tiles((4, 256, 1, 1, 16), (1, 56, 56, 64)) == (True, False)
    # MobileNetV2's 96->576 at 14x14: flat, the kernel takes the whole image
    assert _tiles((36, 96, 1, 1, 16), (1, 14, 14, 576)) == (False, True)
    # a strided 1x1 is not flattened
    assert _tiles((16, 64, 1, 1, 16), (1, 28, 28, 256), strides=2)[1] is False


def _lower_nhwc(xshape: tuple[int, ...], wshape: tuple[int, ...]) -> str:
    """relu(conv + b) of NHWC ``xshape`` and packed weight ``wshape``, lowered for AVX2."""
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, wshape[0] * wshape[-1]))
    conv = call("nn.conv_packed", x, wp, data_layout="NHWC")
    func = Function((x, wp, b), call("relu", call("add", conv, b)), Attrs({"Primitive": 1}))
    return str(lower_group(func, "kernel", AVX2))


def test_short_nhwc_pointwise_kernel_calls_take_long_tiles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = _lower_nhwc((1, 56, 56, 64), (16, 64, 1, 1, 16))
    # positions flattened (nn_conv_nhwc.FLAT_ANY_SIZE): one call per 196 of the 3136
    # positions, 64 reduction steps
    assert '"ember_f32_conv_tile"' in text and ", 196, 196, 64, 0," in text
    # by rows: one call per band of 2 rows x 56 columns (112 positions)
    monkeypatch.setattr(nn_conv_nhwc, "FLAT_ANY_SIZE", False)
    text = _lower_nhwc((1, 56, 56, 64), (16, 64, 1, 1, 16))
    assert '"ember_f32_conv_tile"' in text and ", 112, 56, 64, 3584," in text


def _module(xshape: tuple[int, ...], w: np.ndarray, layout: str, **attrs: object) -> IRModule:
    shape = xshape if layout == "NCHW" else tuple(xshape[a] for a in TO_LAST)
    x = Var("x", TensorType(shape, "float32"))
    bias = np.random.default_rng(9).standard_normal(w.shape[0]).astype(np.float32)
    bias = bias.reshape(-1, 1, 1) if layout == "NCHW" else bias.reshape(1, 1, -1)
    y = call("nn.conv", x, const(w), data_layout=layout, **attrs)  # type: ignore[arg-type]
    return IRModule({"main": Function((x,), call("relu", call("add", y, const(bias))))})


@pytest.mark.parametrize(
    ("xshape", "cout", "attrs"),
    [
        ((1, 64, 20, 20), 48, {}),  # bands of whole rows (400 positions)
        ((1, 16, 9, 9), 32, {}),  # a whole image, flattened positions
        ((1, 64, 30, 14), 32, {}),  # rows of 14: bands of 14 rows
        ((1, 96, 31, 31), 64, {"strides": [2, 2]}),  # strided
        ((1, 72, 17, 13), 16, {}),  # odd sizes: row pieces
    ],
)
def test_short_nhwc_pointwise_matches_nchw(xshape, cout, attrs) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((cout, xshape[1], 1, 1)).astype(np.float32)
    want = run_artifacts(build(_module(xshape, w, "NCHW", **attrs), "c"), {"x": x})[0]
    nhwc = build(_module(xshape, w, "NHWC", **attrs), "c")
    got = run_artifacts(nhwc, {"x": np.ascontiguousarray(x.transpose(TO_LAST))})[0]
    np.testing.assert_allclose(got.transpose(TO_FIRST), want, rtol=1e-5, atol=1e-4)
