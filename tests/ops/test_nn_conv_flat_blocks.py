"""Flattened NHWC 1x1 convolutions on loop-IR tiles of several blocks of output channels on
AVX-512 C targets (ember.ops.nn_conv_nhwc.flat_tile_blocks): the rule, the lowered tile,
and compiled results bitwise equal to the one-block tiles."""

from __future__ import annotations

import numpy as np
import pytest
from packed_conv_lowering import v

from ember.driver import build
from ember.ir import Attrs, Function, IRModule, TensorType, Var, call, const
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_nhwc
from ember.ops.nn_conv_nhwc import FLAT_TILE_LANES, flat_tile_blocks
from ember.support.cpuinfo import host_cpu_flags
from ember.target import Target
from ember.testing.runners import run_artifacts

AVX512 = "c -mcpu=x86-64-v4"

needs_avx512 = pytest.mark.skipif(
    "avx512f" not in host_cpu_flags(), reason="the host has no AVX-512: cannot run its code"
)


def test_flat_tile_blocks_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    avx512 = Target.create(AVX512)
    # the largest of 4, 3, 2 dividing the blocks (ResNet-50: 4; MobileNetV2's 144: 3)
    assert [flat_tile_blocks(avx512, b) for b in (64, 16, 9, 6, 10, 7, 1)] == [4, 4, 3, 3, 2, 1, 1]
    # AVX2 and the llvm kinds keep one block per tile
    assert flat_tile_blocks(Target.create("c -mcpu=haswell"), 16) == 1
    assert flat_tile_blocks(Target.create("llvm -mcpu=x86-64-v4"), 16) == 1
    assert flat_tile_blocks(None, 16) == 1
    monkeypatch.setattr(nn_conv_nhwc, "FLAT_MULTI_BLOCK", False)
    assert flat_tile_blocks(avx512, 16) == 1


def _lower(xshape: tuple[int, ...], wshape: tuple[int, ...], target: str) -> str:
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, wshape[0] * wshape[-1]))
    conv = call("nn.conv_packed", x, wp, data_layout="NHWC")
    func = Function((x, wp, b), call("relu", call("add", conv, b)), Attrs({"Primitive": 1}))
    return str(lower_group(func, "kernel", target))


def test_flat_pointwise_tile_covers_four_blocks_on_avx512() -> None:
    # ResNet-50's 1x1 256->1024 at 14x14: 7 positions x 64 channels per tile (28 zmm)
    text = _lower((1, 14, 14, 256), (64, 256, 1, 1, 16), AVX512)
    assert FLAT_TILE_LANES == 7 * 64
    assert 'Buffer((1, 7, 64), "float32", scope="local")' in text
    assert "ember_f32_conv_tile" not in text
    # AVX2 keeps its tiles of one block
    text = _lower((1, 14, 14, 256), (64, 256, 1, 1, 16), "c -mcpu=haswell")
    assert ', 64), "float32", scope="local")' not in text


def _module(xshape: tuple[int, ...], w: np.ndarray, bias: np.ndarray) -> IRModule:
    x = Var("x", TensorType(xshape, "float32"))
    y = call("nn.conv", x, const(w), data_layout="NHWC")  # type: ignore[arg-type]
    return IRModule({"main": Function((x,), call("relu", call("add", y, const(bias))))})


@pytest.mark.cc
@needs_avx512
@pytest.mark.parametrize(
    ("xshape", "cout"),
    [
        ((1, 14, 14, 64), 256),  # 4 blocks per tile
        ((1, 20, 20, 32), 144),  # 3 blocks (9 of them), 400 positions
        ((1, 9, 11, 48), 160),  # 2 blocks, a tail tile
    ],
)
def test_flat_multi_block_tiles_are_bitwise_the_one_block_tiles(
    monkeypatch: pytest.MonkeyPatch, xshape: tuple[int, ...], cout: int
) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((cout, xshape[-1], 1, 1)).astype(np.float32)
    bias = rng.standard_normal((1, 1, cout)).astype(np.float32)
    outs = []
    for on in (True, False):
        monkeypatch.setattr(nn_conv_nhwc, "FLAT_MULTI_BLOCK", on)
        outs.append(run_artifacts(build(_module(xshape, w, bias), AVX512), {"x": x})[0])
    want = np.maximum(np.einsum("nhwc,oc->nhwo", x, w[:, :, 0, 0]) + bias, 0.0)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])
