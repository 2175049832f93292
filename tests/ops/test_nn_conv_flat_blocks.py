"""Flattened NHWC 1x1 convolutions on loop-IR tiles of several blocks of output channels on
AVX-512 C targets (ember.ops.nn_conv_flat.flat_tile_blocks; strided ones too, flat_strided):
the rules, the lowered tiles, and compiled results bitwise equal to the one-block tiles and
to the micro-kernel's."""

from __future__ import annotations

import numpy as np
import pytest
from packed_conv_lowering import v

from ember.driver import build
from ember.ir import Attrs, Function, IRModule, TensorType, Var, call, const
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_flat, nn_conv_nhwc
from ember.ops.nn_conv_flat import (
    FLAT_TILE_LANES,
    flat_extra_block,
    flat_strided,
    flat_tile_blocks,
)
from ember.support.cpuinfo import host_cpu_flags
from ember.target import Target
from ember.testing.runners import run_artifacts

AVX512 = "c -mcpu=x86-64-v4"

needs_avx512 = pytest.mark.skipif(
    "avx512f" not in host_cpu_flags(), reason="the host has no AVX-512: cannot run its code"
)


def test_flat_tile_blocks_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    avx512 = Target.create(AVX512)
    # the first of 4, 3, 2, 5, 7 dividing the blocks (ResNet-50: 4; MobileNetV2's 144: 3;
    # ShuffleNet's split groups of 68 channels: 5)
    blocks = (64, 16, 9, 6, 10, 5, 7, 35, 11, 1)
    assert [flat_tile_blocks(avx512, b) for b in blocks] == [4, 4, 3, 3, 2, 5, 7, 5, 1, 1]
    # the llvm kinds on AVX-512 too (32 registers: TILES["llvm x86-avx512"]); AVX2 keeps one
    assert flat_tile_blocks(Target.create("llvm -mcpu=x86-64-v4"), 16) == 4
    assert flat_tile_blocks(Target.create("c -mcpu=haswell"), 16) == 1
    assert flat_tile_blocks(Target.create("llvm -mcpu=haswell"), 16) == 1
    assert flat_tile_blocks(None, 16) == 1
    monkeypatch.setattr(nn_conv_flat, "FLAT_MULTI_BLOCK", False)
    assert flat_tile_blocks(avx512, 16) == 1


def test_flat_extra_block_rule() -> None:
    """A prime block count of at least FLAT_EXTRA_MIN gets a zero block more where the
    count plus one has a tile (RegNetX-200MF's 368 channels: 23 blocks -> 24, tiles of 4)."""
    avx512 = Target.create(AVX512)
    assert [flat_extra_block(avx512, b) for b in (23, 13, 11, 24, 7, 9)] == [
        True, True, True, False, False, False
    ]  # fmt: skip
    assert not flat_extra_block(Target.create("c -mcpu=haswell"), 23)
    assert nn_conv_flat.FLAT_EXTRA_MIN == 8


def test_flat_strided_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    avx512 = Target.create(AVX512)
    one = ((2, 2), (0, 0, 0, 0), 1)  # strides, pads, groups
    # ResNet-50's downsample 1x1 256->512 stride 2
    assert flat_strided(avx512, "float32", (32, 256, 1, 1, 16), *one)
    assert not flat_strided(avx512, "float32", (32, 256, 3, 3, 16), *one)  # 3x3
    assert not flat_strided(avx512, "float32", (32, 256, 1, 1, 16), (2, 2), (1, 1, 1, 1), 1)
    assert not flat_strided(avx512, "float32", (32, 256, 1, 1, 16), (2, 2), (0,) * 4, 2)
    assert not flat_strided(avx512, "float32", (32, 256, 1, 1, 8), *one)  # narrow blocks
    assert not flat_strided(avx512, "float32", (1, 256, 1, 1, 16), *one)  # one block
    assert not flat_strided(avx512, "int8", (32, 256, 1, 1, 16), *one)
    assert not flat_strided(Target.create("c -mcpu=haswell"), "float32", (32, 256, 1, 1, 16), *one)
    monkeypatch.setattr(nn_conv_flat, "FLAT_STRIDED", False)
    assert not flat_strided(avx512, "float32", (32, 256, 1, 1, 16), *one)


def _lower(xshape: tuple[int, ...], wshape: tuple[int, ...], target: str, strides: int = 1) -> str:
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, wshape[0] * wshape[-1]))
    conv = call("nn.conv_packed", x, wp, data_layout="NHWC", strides=(strides, strides))
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


def test_llvm_takes_multi_block_tiles_only_without_a_tail() -> None:
    # 14x14 = 28 tiles of 7: four blocks per tile on llvm as on c
    text = _lower((1, 14, 14, 256), (64, 256, 1, 1, 16), "llvm -mcpu=x86-64-v4")
    assert 'Buffer((1, 7, 64), "float32", scope="local")' in text
    # 233 positions (prime): 33 x 7 + 2, a guarded tail tile, which LLVM kept in memory with
    # four blocks (ds_cnn's 125 = 17 x 7 + 6 took 1.7x the time): one block there; c keeps four
    text = _lower((1, 233, 1, 64), (4, 64, 1, 1, 16), "llvm -mcpu=x86-64-v4")
    assert ', 64), "float32", scope="local")' not in text
    text = _lower((1, 233, 1, 64), (4, 64, 1, 1, 16), AVX512)
    assert 'Buffer((1, 7, 64), "float32", scope="local")' in text


def test_few_tiles_take_a_divisor_without_a_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    # ds_cnn's 1x1 64->64 at 25x5: 125 positions in 25 tiles of 5 (FLAT_HALF_DIVISORS), not
    # 17 x 7 and a tail of 6; four blocks then on llvm too
    for target in (AVX512, "llvm -mcpu=x86-64-v4"):
        text = _lower((1, 25, 5, 64), (4, 64, 1, 1, 16), target)
        assert 'Buffer((1, 5, 64), "float32", scope="local")' in text, target
    # resnet8's stride-2 1x1 16->32 to 16x16: 256 positions in tiles of 8, not 18 x 14 and 4
    text = _lower((1, 32, 32, 16), (2, 16, 1, 1, 16), AVX512, strides=2)
    assert 'Buffer((1, 8, 32), "float32", scope="local")' in text
    monkeypatch.setattr(nn_conv_nhwc, "FLAT_HALF_DIVISORS", False)
    text = _lower((1, 32, 32, 16), (2, 16, 1, 1, 16), AVX512, strides=2)
    assert 'Buffer((1, 14, 32), "float32", scope="local")' in text


def test_strided_pointwise_takes_flat_loop_ir_tiles_on_avx512() -> None:
    # 256->512 stride 2 at 56x56: positions flattened, every second row and column read
    text = _lower((1, 56, 56, 256), (32, 256, 1, 1, 16), AVX512, strides=2)
    assert 'Buffer((1, 7, 64), "float32", scope="local")' in text
    assert "ember_f32_conv_tile" not in text and "// 28 * 2, " in text
    # AVX2 keeps the micro-kernel
    text = _lower((1, 56, 56, 256), (32, 256, 1, 1, 16), "c -mcpu=haswell", strides=2)
    assert "ember_f32_conv_tile" in text


def _module(xshape: tuple[int, ...], w: np.ndarray, bias: np.ndarray, strides: int = 1) -> IRModule:
    x = Var("x", TensorType(xshape, "float32"))
    y = call("nn.conv", x, const(w), data_layout="NHWC", strides=(strides, strides))  # type: ignore[arg-type]
    return IRModule({"main": Function((x,), call("relu", call("add", y, const(bias))))})


@pytest.mark.cc
@needs_avx512
@pytest.mark.parametrize(
    ("xshape", "cout"),
    [
        ((1, 14, 14, 64), 256),  # 4 blocks per tile
        ((1, 20, 20, 32), 144),  # 3 blocks (9 of them), 400 positions
        ((1, 9, 11, 48), 160),  # 2 blocks, a tail tile
        ((1, 7, 7, 64), 368),  # 23 blocks: a zero block more, tiles of 4, the last guarded
        ((1, 9, 9, 48), 208),  # 13 blocks: 14, tiles of 2
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
        monkeypatch.setattr(nn_conv_flat, "FLAT_MULTI_BLOCK", on)
        outs.append(run_artifacts(build(_module(xshape, w, bias), AVX512), {"x": x})[0])
    want = np.maximum(np.einsum("nhwc,oc->nhwo", x, w[:, :, 0, 0]) + bias, 0.0)
    np.testing.assert_allclose(outs[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.cc
@needs_avx512
@pytest.mark.parametrize(
    ("xshape", "cout"),
    [
        ((1, 14, 14, 256), 64),  # else on the micro-kernel (a reduction of 256)
        ((1, 28, 28, 64), 128),  # else on row tiles of loop IR
        ((1, 15, 13, 48), 96),  # odd sizes: a tail tile
    ],
)
def test_flat_strided_tiles_are_bitwise_the_kernel_or_row_tiles(
    monkeypatch: pytest.MonkeyPatch, xshape: tuple[int, ...], cout: int
) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((cout, xshape[-1], 1, 1)).astype(np.float32)
    bias = rng.standard_normal((1, 1, cout)).astype(np.float32)
    outs = []
    for on in (True, False):
        monkeypatch.setattr(nn_conv_flat, "FLAT_STRIDED", on)
        outs.append(run_artifacts(build(_module(xshape, w, bias, 2), AVX512), {"x": x})[0])
    want = np.einsum("nhwc,oc->nhwo", x[:, ::2, ::2], w[:, :, 0, 0]) + bias
    np.testing.assert_allclose(outs[0], np.maximum(want, 0.0), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])
