"""Micro-kernel tiles of two blocks of 16 output channels (ember.ops.nn_conv_pair,
``ember_f32_conv_tile2``): the predicate, the call in the lowered loop IR, the interpreter's
reference against the one-block kernel's, and compiled results bitwise equal to the
one-block kernel's tiles (same fused multiply-adds per output, same order)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library, call_tile
from packed_conv_lowering import nhwc_bias, nhwc_conv_module, v

from ember.codegen.c.f32_kernels import F32_KERNELS_C
from ember.driver import build
from ember.ir import Attrs, Function, call
from ember.ir.ops.nn_conv_weights import conv_reference
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_pair
from ember.ops.nn_conv_pair import pair_blocks
from ember.ops.nn_conv_rewrite import conv_tile_reference, pair_tile_reference
from ember.support.cpuinfo import host_cpu_flags
from ember.target import Target
from ember.testing.runners import run_artifacts

AVX512 = "c -mcpu=znver4"


def test_pair_blocks_predicate() -> None:
    avx512, avx2 = Target.create(AVX512), Target.create("c -mcpu=haswell")
    assert pair_blocks(avx512, 16, 9) == 2
    assert pair_blocks(avx512, 15, 9) == 1  # an odd count of blocks
    assert pair_blocks(avx512, 16, 1) == 1  # 1x1: the flat multi-block loop-IR tiles
    assert pair_blocks(avx2, 16, 9) == 1
    assert pair_blocks(Target.create("llvm -mcpu=znver4"), 16, 9) == 1
    assert pair_blocks(avx512, 16, 9, group_blocks=2) == 2  # a pair inside each group
    assert pair_blocks(avx512, 16, 9, group_blocks=1) == 1  # a pair's blocks in two groups


def _lower(xshape: tuple[int, ...], wshape: tuple[int, ...]) -> str:
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, wshape[0] * wshape[-1]))
    conv = call("nn.conv_packed", x, wp, data_layout="NHWC", padding=[1, 1, 1, 1])
    func = Function((x, wp, b), call("relu", call("add", conv, b)), Attrs({"Primitive": 1}))
    return str(lower_group(func, "kernel", AVX512))


def test_nhwc_3x3_calls_the_pair_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nn_conv_pair, "PAD_FREE", False)  # a padded copy (test_nn_conv_pair_pad)
    text = _lower((1, 14, 14, 64), (4, 64, 3, 3, 16))
    # the whole 14x14 image per call, two blocks: the second's weights 64 x 9 x 16 further
    assert '"ember_f32_conv_tile2"' in text and ", 9216)" in text
    assert '"ember_f32_conv_tile"' not in text
    monkeypatch.setattr(nn_conv_pair, "PAIR_TILES", False)
    text = _lower((1, 14, 14, 64), (4, 64, 3, 3, 16))
    assert '"ember_f32_conv_tile2"' not in text and '"ember_f32_conv_tile"' in text


def _lower_grouped(xshape: tuple[int, ...], wshape: tuple[int, ...], groups: int) -> str:
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, wshape[0] * wshape[-1]))
    attrs = {"data_layout": "NHWC", "padding": [1, 1, 1, 1], "groups": groups}
    conv = call("nn.conv_packed", x, wp, **attrs)
    func = Function((x, wp, b), call("relu", call("add", conv, b)), Attrs({"Primitive": 1}))
    return str(lower_group(func, "kernel", AVX512))


def test_grouped_tiles_call_a_kernel() -> None:
    """RegNet's 3x3 of groups of 16 channels: a pair tile would span two groups, whose
    inputs differ, so the tiles take the one-block kernel (a pair left the loop nest
    uncalled: 19% of the FMA limit); groups of 32 channels keep pairs inside a group."""
    text = _lower_grouped((1, 14, 14, 160), (10, 16, 3, 3, 16), 10)
    assert '"ember_f32_conv_tile"' in text and '"ember_f32_conv_tile2' not in text
    text = _lower_grouped((1, 7, 7, 256), (16, 32, 3, 3, 16), 8)
    assert '"ember_f32_conv_tile2' in text


@pytest.mark.parametrize(("cin", "groups"), [(160, 10), (256, 8), (96, 2)])
def test_grouped_tiles_match_the_reference(cin: int, groups: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 14, 14, cin)).astype(np.float32)
    w = rng.standard_normal((cin, cin // groups, 3, 3)).astype(np.float32)
    mod = nhwc_conv_module(x.shape, w, padding=[1, 1, 1, 1], groups=groups)
    got = run_artifacts(build(mod, "c"), {"x": x})[0]
    xt = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    ref = conv_reference(xt, w, (1, 1), ((1, 1), (1, 1)), (1, 1), groups).transpose(0, 2, 3, 1)
    ref = np.maximum(ref + nhwc_bias(cin), 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)


def test_row_tails_call_the_pair_kernel() -> None:
    # rows of 100 (too wide for bands): 14 tiles of 7 positions and a tail of 2, which the
    # kernel takes too (a count of min(7, 100 - column) positions)
    text = _lower((1, 100, 100, 16), (2, 16, 3, 3, 16))
    assert text.count('"ember_f32_conv_tile2_pad"') == 2 and "min(7, " in text
    assert 'ember_f32_conv_tile"' not in text


def test_pair_reference_is_two_one_block_tiles() -> None:
    rng = np.random.default_rng(3)
    x = [float(t) for t in rng.standard_normal(200)]
    w = [float(t) for t in rng.standard_normal(2 * 16 * 12)]
    loops = (1, 0, 0, 3, 40, 64, 4, 1, 16)  # 3 x 4 reduction steps
    wb = 16 * 12
    got = [0.0] * (5 * 32)
    pair_tile_reference(got, x, w, 2, 0, 5, 5, 3, 0, *loops, wb)
    for blk in range(2):
        want = [0.0] * (5 * 16)
        conv_tile_reference(want, x, w, 2, blk * wb, 5, 5, 3, 0, *loops)
        one = [got[32 * j + 16 * blk + k] for j in range(5) for k in range(16)]
        assert one == want


@pytest.mark.parametrize(
    ("size", "cin", "cout", "strides"),
    [
        (14, 64, 64, 1),  # a whole image per call
        (28, 32, 32, 1),  # bands of 7 rows
        (56, 16, 32, 1),  # bands of 2 rows
        (9, 32, 64, 1),  # 81 positions: register tiles of 7 and 6
        (15, 48, 32, 2),  # strided
        (100, 16, 32, 1),  # rows of 100: row pieces of 7 positions, a guarded tail of 2
    ],
)
def test_pair_tiles_bitwise_equal_one_block_tiles(
    monkeypatch: pytest.MonkeyPatch, size: int, cin: int, cout: int, strides: int
) -> None:
    """On the host (the AVX-512 kernel where it has AVX-512, else the one-block kernel
    both times): the same sums as the kernel of one block, bit for bit."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, size, size, cin)).astype(np.float32)
    w = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
    mod = nhwc_conv_module(x.shape, w, padding=[1, 1, 1, 1], strides=[strides, strides])
    got = run_artifacts(build(mod, "c"), {"x": x})[0]
    monkeypatch.setattr(nn_conv_pair, "PAIR_TILES", False)
    want = run_artifacts(build(mod, "c"), {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    ref = np.maximum(_conv_ref(x, w, strides) + nhwc_bias(cout), 0)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)


def _conv_ref(x: np.ndarray, w: np.ndarray, s: int) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    n = (x.shape[1] + 2 - 3) // s + 1
    out = np.zeros((1, n, n, w.shape[0]))
    for kh in range(3):
        for kw in range(3):
            patch = xp[:, kh : kh + s * (n - 1) + 1 : s, kw : kw + s * (n - 1) + 1 : s, :]
            out += patch @ w[:, :, kh, kw].T.astype(np.float64)
    return out


_WRAPPERS = """
int32_t one(float* acc, const float* x, const float* w, const int32_t* a) {
  return ember_f32_conv_tile(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                             a[9], a[10], a[11], a[12], a[13], a[14]);
}
int32_t pair(float* acc, const float* x, const float* w, const int32_t* a) {
  return ember_f32_conv_tile2(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                              a[9], a[10], a[11], a[12], a[13], a[14], a[15]);
}
"""


@pytest.mark.cc
@pytest.mark.parametrize("march", ["x86-64-v4", "x86-64"])
@pytest.mark.parametrize(
    "loops",
    [
        (3, 60, 2400, 3, 1, 800, 50, 3, 16),  # short inner loops: chunks of the outer one
        (1, 0, 0, 2, 7, 20000, 1250, 5, 16),  # a long innermost loop: chunks of it
    ],
)
@pytest.mark.parametrize("ncols", [1, 6, 7, 8, 20, 31])
def test_pair_kernel_bitwise_equal_two_one_block_calls(
    tmp_path: Path, march: str, loops: tuple[int, ...], ncols: int
) -> None:
    """ember_f32_conv_tile2 on AVX-512 (when the host runs it) and in plain C: each block's
    accumulators bit for bit those of ember_f32_conv_tile on that block, over one register
    tile and several, both ways of chunking the reduction."""
    if march == "x86-64-v4" and "avx512f" not in host_cpu_flags():
        pytest.skip("the host has no AVX-512")
    lib = build_c_library(tmp_path, F32_KERNELS_C + _WRAPPERS, march)
    rng = np.random.default_rng(ncols)
    x = rng.standard_normal(60000).astype(np.float32)
    wb = 3 * 2 * 1250 * 16 + 32  # the second block's weights after the first's
    w = rng.standard_normal(2 * wb).astype(np.float32)
    acc0 = rng.standard_normal((ncols, 2, 16)).astype(np.float32)
    head = [3, 8, ncols, 4, 2, 90]  # xoff, woff, positions in rows of 4 (2 apart, rows 90)
    got = acc0.copy()
    call_tile(lib.pair, got, x, w, [*head, *loops, wb])
    for blk in range(2):
        want = acc0[:, blk].copy()  # contiguous, never a view of acc0
        one = [head[0], head[1] + blk * wb, *head[2:], *loops]
        call_tile(lib.one, want, x, w, one)
        np.testing.assert_array_equal(got[:, blk], want)
    assert not np.array_equal(got, acc0)
