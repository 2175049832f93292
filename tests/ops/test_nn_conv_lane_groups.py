"""Grouped convolutions of narrow groups, several groups a block of 16 output channels
(ember.ops.nn_conv_lane_groups, the kernel ember_f32_conv_tile_lg): which convolutions and
targets take them, the kernel call in the lowered loop IR, the interpreter's reference
against the loop nest, and compiled results against the plain grouped convolution."""

from __future__ import annotations

import numpy as np
import pytest
from packed_conv_lowering import nhwc_bias, nhwc_conv_module, v

from ember import tir
from ember.codegen.c.f32_lane_groups import LANE_GROUP_KERNEL_NAME
from ember.driver import build
from ember.ir import Attrs, Function, call, evaluate
from ember.ir.ops.nn_conv_weights import conv_reference, lane_group_block
from ember.lowering.lower_group import lower_group
from ember.ops import nn_conv_lane_groups
from ember.ops.nn_conv_lane_groups import lane_groups_target
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS, LANE_GROUP_KERNEL
from ember.support.cpuinfo import host_cpu_flags
from ember.target import Target
from ember.testing.runners import run_artifacts

AVX512 = "c -mcpu=znver4"
HOST_AVX512 = "avx512f" in host_cpu_flags()


def test_kernel_name_is_the_c_text_s() -> None:
    assert LANE_GROUP_KERNEL == LANE_GROUP_KERNEL_NAME


def test_lane_group_block() -> None:
    assert lane_group_block((128, 4, 3, 3), 32) == 16  # ResNeXt-50's first stage
    assert lane_group_block((256, 8, 3, 3), 32) == 16  # its second
    assert lane_group_block((32, 2, 1, 1), 16) == 16  # a 1x1 of groups of 2
    assert lane_group_block((512, 16, 3, 3), 32) == 0  # groups of 16 pack per group
    assert lane_group_block((32, 1, 3, 3), 32) == 0  # depthwise
    assert lane_group_block((40, 4, 3, 3), 10) == 16  # the last block partial (2 of 4 groups)
    assert lane_group_block((24, 8, 3, 3), 3) == 16  # RegNetX-200MF's first stage
    assert lane_group_block((64, 8, 3, 3), 16) == 0  # 8 inputs, 4 outputs a group
    assert lane_group_block((96, 6, 3, 3), 16) == 0  # groups of 6 straddle blocks


def test_lane_groups_target() -> None:
    assert lane_groups_target(Target.create(AVX512))
    assert not lane_groups_target(Target.create("c -mcpu=haswell"))
    assert not lane_groups_target(Target.create("llvm -mcpu=znver4"))
    assert not lane_groups_target(None)


def _lower(xshape: tuple[int, ...], wshape: tuple[int, ...], groups: int, **attrs) -> tuple:
    x, wp = v("x", xshape), v("wp", wshape)
    b = v("b", (1, 1, attrs.get("channels", wshape[0] * wshape[-1])))
    conv = call("nn.conv_packed", x, wp, data_layout="NHWC", groups=groups, **attrs)
    func = Function((x, wp, b), call("relu", call("add", conv, b)), Attrs({"Primitive": 1}))
    prim = lower_group(func, "kernel", AVX512)
    return str(prim), prim, func


@pytest.mark.parametrize(
    ("xshape", "wshape", "groups", "attrs"),
    [
        ((1, 6, 7, 32), (2, 4, 3, 3, 16), 8, {"padding": [1, 1, 1, 1]}),  # groups of 4
        ((1, 9, 9, 32), (2, 8, 3, 3, 16), 4, {"strides": [2, 2]}),  # of 8, strided
        ((1, 5, 5, 16), (1, 2, 3, 3, 16), 8, {}),  # of 2, unpadded
        ((1, 5, 6, 32), (2, 4, 1, 1, 16), 8, {}),  # a 1x1
        ((1, 6, 5, 24), (2, 8, 3, 3, 16), 3, {"padding": [1, 1, 1, 1], "channels": 24}),
    ],
)
def test_tiles_call_the_kernel_and_match_the_reference(xshape, wshape, groups, attrs) -> None:
    text, prim, func = _lower(xshape, wshape, groups, **attrs)
    assert f'"{LANE_GROUP_KERNEL}"' in text
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in func.params]
    refs = evaluate(func, xs)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-4, atol=1e-4)


def _conv(
    x: np.ndarray, w: np.ndarray, groups: int, stride: int, pad: int, dilation: int = 1
) -> np.ndarray:
    xt = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    pads, dil = ((pad, pad), (pad, pad)), (dilation, dilation)
    out = conv_reference(xt, w, (stride, stride), pads, dil, groups).transpose(0, 2, 3, 1)
    return np.maximum(out + nhwc_bias(w.shape[0]), 0)


@pytest.mark.skipif(not HOST_AVX512, reason="the lane-group kernel needs an AVX-512 host")
@pytest.mark.parametrize(
    ("size", "channels", "groups", "kernel", "stride", "dilation", "batch"),
    [
        (14, 128, 32, 3, 1, 1, 1),  # ResNeXt's groups of 4, the whole image per call
        (28, 256, 32, 3, 1, 1, 1),  # groups of 8, bands of rows
        (15, 64, 8, 3, 2, 1, 1),  # strided
        (100, 32, 16, 3, 1, 1, 1),  # groups of 2; rows of 100: register tiles with a tail
        (9, 64, 16, 1, 1, 1, 1),  # a grouped 1x1
        (12, 32, 8, 3, 1, 2, 1),  # dilated
        (28, 24, 3, 3, 1, 1, 1),  # RegNetX-200MF: 3 groups of 8, the last block half empty
        (14, 56, 7, 3, 2, 1, 1),  # 7 groups of 8, strided
        (9, 40, 10, 1, 1, 1, 1),  # 10 groups of 4 in a 1x1 (no padding: a copy all the same)
        (7, 64, 16, 3, 1, 1, 2),  # two images
    ],
)
def test_compiled_results_match_the_grouped_convolution(
    size: int,
    channels: int,
    groups: int,
    kernel: int,
    stride: int,
    dilation: int,
    batch: int,
) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((batch, size, size, channels)).astype(np.float32)
    w = rng.standard_normal((channels, channels // groups, kernel, kernel)).astype(np.float32)
    pad = kernel // 2 * dilation
    attrs = {"padding": [pad] * 4, "strides": [stride, stride], "groups": groups}
    attrs["dilation"] = [dilation, dilation]
    mod = nhwc_conv_module(x.shape, w, **attrs)
    artifacts = build(mod, "c")
    source = b"".join(a.content for a in artifacts.artifacts if a.file_name.endswith(".c"))
    assert f"{LANE_GROUP_KERNEL}(".encode() in source
    got = run_artifacts(artifacts, {"x": x})[0]
    want = _conv(x, w, groups, stride, pad, dilation)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_other_targets_keep_the_other_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 8, 8, 64)).astype(np.float32)
    w = rng.standard_normal((64, 4, 3, 3)).astype(np.float32)
    mod = nhwc_conv_module(x.shape, w, padding=[1, 1, 1, 1], groups=16)
    monkeypatch.setattr(nn_conv_lane_groups, "LANE_GROUPS", False)
    artifacts = build(mod, "c")
    source = b"".join(a.content for a in artifacts.artifacts if a.file_name.endswith(".c"))
    assert f"{LANE_GROUP_KERNEL}(".encode() not in source
    got = run_artifacts(artifacts, {"x": x})[0]
    np.testing.assert_allclose(got, _conv(x, w, 16, 1, 1), rtol=1e-4, atol=1e-4)


_WRAPPER = """
int32_t lg(float* acc, const float* x, const float* w, const int32_t* a) {
  return ember_f32_conv_tile_lg(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                                a[9], a[10], a[11], a[12], a[13]);
}
"""


@pytest.mark.cc
@pytest.mark.parametrize("group", [2, 4, 8])
@pytest.mark.parametrize("ncols", [1, 5, 12, 13, 30])
def test_kernel_avx512_and_plain_c_agree_bit_for_bit(tmp_path, group: int, ncols: int) -> None:
    """ember_f32_conv_tile_lg compiled for AVX-512 (when the host runs it) and as plain C:
    the same bits, and the interpreter reference's values; tiles of one row and of rows of
    5 positions (3x3 taps, 16 input channels a position, rows 7 positions apart)."""
    from c_source_lib import build_c_library, call_tile

    from ember.codegen.c.f32_lane_groups import LANE_GROUP_KERNEL_C
    from ember.ops.nn_conv_rewrite import lane_group_tile_reference

    rng = np.random.default_rng(ncols * group)
    x = rng.standard_normal(4096).astype(np.float32)
    w = rng.standard_normal(9 * 16 * group).astype(np.float32)
    #       xoff ncols tcols cx  cr   e0 xs0  ws0        e1 xs1 ws1      ws2      g
    args = [16, ncols, 5, 16, 112, 3, 112, 3 * 16 * group, 3, 16, 16 * group, 16, group]
    args = [args[0], 0, *args[1:]]  # woff 0
    results = []
    marches = ["x86-64"] + (["x86-64-v4"] if HOST_AVX512 else [])
    for march in marches:
        (tmp_path / march).mkdir()
        lib = build_c_library(tmp_path / march, LANE_GROUP_KERNEL_C + _WRAPPER, march)
        acc = np.ones(16 * ncols, np.float32)
        call_tile(lib.lg, acc, x, w, args)
        results.append(acc)
    ref = [1.0] * (16 * ncols)
    lane_group_tile_reference(ref, list(map(float, x)), list(map(float, w)), *args)
    for got in results:
        np.testing.assert_allclose(got, np.array(ref), rtol=1e-5, atol=1e-5)
    if len(results) == 2:
        np.testing.assert_array_equal(results[0], results[1])
