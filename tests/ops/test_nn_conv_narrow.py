"""The AVX2 float32 convolution micro-kernels for blocks of 8 and 24 output channels
(ember/codegen/c/f32_narrow.py): where the rewrite calls them, that the calls compute what
the loop nests did (interpreted against the graph's evaluation, compiled against
onnxruntime) and that their C source runs with and without AVX2."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library
from packed_conv_lowering import lower_conv_bias_relu

from ember import tir
from ember.codegen.c.f32_narrow import F32_NARROW_C, NARROW_KERNEL_NAMES
from ember.ir import Function, evaluate
from ember.ops.common import static_shape
from ember.ops.nn_conv_narrow import (
    NARROW_KERNELS,
    narrow_kernel_cols,
    narrow_kernel_tile,
    plane_conflicts,
    tile_reference,
)
from ember.ops.nn_conv_narrow_layout import widen_blocks
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.testing.onnx_models import build_model, node
from ember.tir import te

AVX2 = "c -mcpu=haswell"


def _lower(xshape, wshape, target: str, **attrs) -> tuple[str, tir.PrimFunc, list, Function]:
    return lower_conv_bias_relu(xshape, wshape, target, pass_channels=True, **attrs)


def test_names_and_tile_widths():
    assert set(NARROW_KERNELS.values()) == NARROW_KERNEL_NAMES
    assert [narrow_kernel_cols(w, 24) for w in (2, 3, 7, 40, 80)] == [2, 3, 4, 4, 4]
    assert [narrow_kernel_cols(w, 8) for w in (5, 16, 80, 160)] == [5, 8, 8, 8]
    assert narrow_kernel_tile([80, 80], 24) == (1, 4) and narrow_kernel_tile([100], 8) == (1, 8)


def test_widen_blocks_only_regroups_three_blocks_of_eight():
    for shape, groups, wide in [
        ((3, 4, 3, 3, 8), 1, True),
        ((6, 4, 1, 1, 8), 1, True),
        ((5, 4, 3, 3, 8), 1, False),  # 40 channels: blocks of 8
        ((3, 4, 3, 3, 8), 3, False),  # grouped
        ((3, 4, 3, 3, 16), 1, False),
    ]:
        wp = te.placeholder(shape, "float32", "wp")
        out = widen_blocks(wp, groups)
        assert (out is not wp) is wide
        if wide:
            assert static_shape(out) == (shape[0] // 3, *shape[1:-1], 24)


@pytest.mark.usefixtures("every_layer_takes_the_kernel")
@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs", "kernel"),
    [
        ((1, 3, 7, 11), (3, 3, 3, 3, 8), {"padding": (1, 1, 1, 1)}, "ember_f32_conv_tile24"),
        ((1, 2, 9, 9), (3, 2, 3, 3, 8), {"strides": (2, 2), "channels": 20}, "tile24"),
        ((1, 3, 6, 13), (1, 3, 3, 3, 8), {"padding": (1, 1, 1, 1)}, 'tile8"'),
        ((1, 2, 8, 8), (5, 2, 3, 3, 8), {"dilation": (2, 2)}, 'tile8"'),
        ((1, 5, 5, 3), (3, 5, 1, 1, 8), {}, "ember_f32_conv_tile24"),  # 1x1, flattened
        ((1, 5, 5, 3), (1, 5, 1, 1, 8), {"channels": 6}, 'tile8"'),
    ],
)
def test_kernel_calls_match_reference(xshape, wshape, attrs, kernel):
    text, prim, params, func = _lower(xshape, wshape, AVX2, **attrs)
    assert kernel in text
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in params]
    refs = evaluate(Function(func.params, func.body), xs)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(outs[0], refs[0], rtol=1e-4, atol=1e-4)


def test_plane_conflicts():
    assert plane_conflicts(96, 80 * 80) and not plane_conflicts(32, 80 * 80)
    assert not plane_conflicts(96, 40 * 40) and not plane_conflicts(64, 56 * 56)
    assert plane_conflicts(12, 32 * 32) and not plane_conflicts(8, 32 * 32)
    assert plane_conflicts(17, 64 * 8) and not plane_conflicts(16, 64 * 8)


@pytest.mark.usefixtures("every_layer_takes_the_kernel")
@pytest.mark.parametrize(
    ("cin", "inner"), [(24, "vectorized(8)"), (20, "vectorized(10)"), (16, "vectorized(16)")]
)
def test_channels_last_copy_order(cin, inner):
    """The padded channels-last copy runs channels (in groups of 8 when they divide) outside
    the columns when its planes conflict in L1 (schedule_channels_last_copy: 64x8 planes,
    more than 16 channels), else channels innermost (the default schedule)."""
    text, *_ = _lower((1, cin, 64, 8), (2, cin, 3, 3, 16), AVX2, padding=(1,) * 4)
    copy = text[text.index("for ") : text.index("conv = allocate")]
    assert inner in copy and "pad[" in copy


@pytest.mark.usefixtures("every_layer_takes_the_kernel")
def test_no_narrow_kernel_off_avx2():
    text, *_ = _lower((1, 3, 7, 11), (3, 3, 3, 3, 8), "llvm -mattr=-fma", padding=(1, 1, 1, 1))
    assert not any(name in text for name in NARROW_KERNEL_NAMES)
    assert "weight_wide" not in text


def _model(cin: int, cout: int, size: int, kernel: int, stride: int, silu: bool):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((cout, cin, kernel, kernel)) / np.sqrt(cin * kernel * kernel)
    pads, strides = [kernel // 2] * 4, [stride] * 2
    nodes = [node("Conv", ["x", "w", "b"], "c", pads=pads, strides=strides)]
    if silu:
        nodes += [node("Sigmoid", ["c"], "s"), node("Mul", ["c", "s"], "y")]
    else:
        nodes.append(node("HardSwish", ["c"], "y"))
    params = {"w": w.astype(np.float32), "b": rng.standard_normal(cout).astype(np.float32)}
    return build_model(nodes, {"x": ("float32", (1, cin, size, size))}, ["y"], params)


@pytest.mark.cc
@pytest.mark.parametrize(
    ("cin", "cout", "size", "kernel", "stride", "silu"),
    [
        (96, 24, 20, 3, 1, False),  # dbnet's 3x3 ->24 (smaller map): blocks of 24
        (40, 24, 11, 3, 2, True),  # strided, tail tiles
        (64, 8, 13, 3, 1, True),  # 8 channels: blocks of 8
        (72, 40, 9, 3, 1, False),  # 40 channels: five blocks of 8
        (300, 24, 6, 1, 1, True),  # 1x1 flattened, input channels in two chunks
        (16, 24, 32, 3, 1, False),  # planes conflicting in L1: the copy reads rows
        (12, 24, 32, 3, 1, True),  # the same, channels not a multiple of 8
    ],
)
def test_compiled_kernels_match_onnxruntime(cin, cout, size, kernel, stride, silu):
    from ember.testing import assert_matches_onnxruntime

    model = _model(cin, cout, size, kernel, stride, silu)
    rng = np.random.default_rng(5)
    inputs = {"x": rng.standard_normal((1, cin, size, size)).astype(np.float32)}
    assert_matches_onnxruntime(model, inputs, rtol=1e-4, atol=1e-4, target="c")


_WRAPPER = """
int32_t tile(int32_t lanes, float* acc, const float* x, const float* w, const int32_t* a) {
  if (lanes == 24)
    return ember_f32_conv_tile24(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                                 a[8], a[9], a[10], a[11], a[12], a[13], a[14]);
  return ember_f32_conv_tile8(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8],
                              a[9], a[10], a[11], a[12], a[13], a[14]);
}
"""


@pytest.mark.cc
@pytest.mark.parametrize("march", ["x86-64", "haswell"])
@pytest.mark.parametrize(("lanes", "ncols"), [(8, 3), (8, 19), (24, 4), (24, 11)])
def test_c_source_with_and_without_avx2(tmp_path: Path, march: str, lanes: int, ncols: int):
    fn = build_c_library(tmp_path, F32_NARROW_C + _WRAPPER, march).tile
    rng = np.random.default_rng(1)
    x = rng.standard_normal(6000).astype(np.float32)
    w = rng.standard_normal(3 * 2 * 300 * lanes + 8).astype(np.float32)
    # positions in rows of 4 (several register tiles when wide), 3 x 2 x 300 steps
    args = [5, 8, ncols, 4, 2, 50, 3, 400, 2 * 300 * lanes, 2, 1, 300 * lanes, 300, 3, lanes]
    acc = rng.standard_normal(ncols * lanes).astype(np.float32)
    want = [float(a) for a in acc]
    tile_reference(lanes, want, [float(t) for t in x], [float(t) for t in w], *args)
    ptr = ctypes.POINTER(ctypes.c_float)
    a32 = np.array(args, np.int32)
    rc = fn(
        ctypes.c_int32(lanes),
        acc.ctypes.data_as(ptr),
        x.ctypes.data_as(ptr),
        w.ctypes.data_as(ptr),
        a32.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
    )
    assert rc == 0
    np.testing.assert_allclose(acc, np.array(want, np.float32), rtol=1e-4, atol=1e-3)
