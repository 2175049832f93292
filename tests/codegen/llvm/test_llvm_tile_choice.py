"""Which float32 convolutions keep the llvm kinds' own loop-IR tiles
(ember.ops.nn_conv_f32.loop_tiles_win): only small layers whose output positions are a
multiple of LOOP_TILE_POSITIONS; others call the C micro-kernels, as c does."""

from __future__ import annotations

import pytest

from ember.ops.nn_conv_f32 import BLOCK, LOOP_TILE_POSITIONS, SMALL_LAYER_OUTPUTS, loop_tiles_win
from ember.target import Target

pytest.importorskip("llvmlite")

import ember.codegen.llvm  # noqa: E402,F401 - registers the llvm kinds


@pytest.mark.parametrize("kind", ["llvm", "llvmjit"])
def test_small_square_layers_keep_loop_tiles(kind):
    target = Target.create(kind)
    for side, channels in ((8, 64), (16, 32), (32, 16)):  # resnet8's layers
        assert loop_tiles_win(target, BLOCK, side * side, side * side * channels)
    assert loop_tiles_win(target)  # size unknown


@pytest.mark.parametrize(("positions", "channels"), [(100, 128), (100, 64), (125, 64)])
def test_rows_with_a_tail_tile_take_the_kernel(positions, channels):
    """yolo's 10x10 layers (1.2-1.4x c's time on loop-IR tiles) and ds_cnn_kws's 25x5."""
    assert positions % LOOP_TILE_POSITIONS
    assert not loop_tiles_win(Target.create("llvm"), BLOCK, positions, positions * channels)


def test_large_layers_and_c_take_the_kernel():
    assert not loop_tiles_win(Target.create("llvm"), BLOCK, 256, SMALL_LAYER_OUTPUTS + 256)
    assert not loop_tiles_win(Target.create("c"), BLOCK, 64, 4096)
