"""Regression: index remainders by powers of two (ONNX Tile and its family) on llvm.

LLVM 22's loop vectorizer miscompiles ``p0[4*k + i % 4]`` (tests/codegen/llvm/
test_llvm_known_bug.py); LLVM's unroller used to hide it. Every case here must give the
C back end's bytes with the unroller off and the workaround in place
(``loop_hints.unsafe_to_vectorize``).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.testing import run_onnx_compiled

pytest.importorskip("llvmlite")

F = TensorProto.FLOAT


def _model(nodes: list, ins: list, outs: list, inits: list | None = None, opset: int = 19):
    graph = helper.make_graph(nodes, "g", ins, outs, inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name: str, shape: list[int]):
    return helper.make_tensor_value_info(name, F, shape)


def _i64(name: str, values: list[int]):
    return helper.make_tensor(name, TensorProto.INT64, [len(values)], values)


def _tile(shape: list[int], reps: list[int]):
    out = [s * r for s, r in zip(shape, reps, strict=True)]
    node = helper.make_node("Tile", ["x", "reps"], ["y"])
    return _model([node], [_vi("x", shape)], [_vi("y", out)], [_i64("reps", reps)]), shape


def _resize(shape: list[int], scale: float, mode: str = "nearest"):
    out = [shape[0], shape[1], int(shape[2] * scale), int(shape[3] * scale)]
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)
    scales = helper.make_tensor("scales", F, [4], [1.0, 1.0, scale, scale])
    return _model([node], [_vi("x", shape)], [_vi("y", out)], [scales]), shape


def _expand(shape: list[int], to: list[int]):
    node = helper.make_node("Expand", ["x", "shape"], ["y"])
    return _model([node], [_vi("x", shape)], [_vi("y", to)], [_i64("shape", to)]), shape


def _pad_wrap(shape: list[int], pads: list[int]):
    out = [s + pads[k] + pads[k + len(shape)] for k, s in enumerate(shape)]
    node = helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")
    return _model([node], [_vi("x", shape)], [_vi("y", out)], [_i64("pads", pads)]), shape


def _depth_to_space(shape: list[int], block: int):
    n, c, h, w = shape
    out = [n, c // (block * block), h * block, w * block]
    node = helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=block, mode="CRD")
    return _model([node], [_vi("x", shape)], [_vi("y", out)]), shape


def _space_to_depth(shape: list[int], block: int):
    n, c, h, w = shape
    out = [n, c * block * block, h // block, w // block]
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=block)
    return _model([node], [_vi("x", shape)], [_vi("y", out)]), shape


CASES = {
    "tile_1x2x3x4_by_1x2x3x4": _tile([1, 2, 3, 4], [1, 2, 3, 4]),
    "tile_2x4_by_3x8": _tile([2, 4], [3, 8]),
    "tile_8_by_8": _tile([8], [8]),
    "tile_3x2_by_2x16": _tile([3, 2], [2, 16]),
    "expand_4x1_to_4x32": _expand([4, 1], [4, 32]),
    "expand_1x8_to_6x8": _expand([1, 8], [6, 8]),
    "resize_nearest_x2": _resize([1, 2, 4, 8], 2.0),
    "resize_nearest_x4": _resize([1, 1, 3, 4], 4.0),
    "pad_wrap": _pad_wrap([3, 8], [0, 4, 0, 12]),
    "depth_to_space_2": _depth_to_space([1, 8, 3, 4], 2),
    "space_to_depth_2": _space_to_depth([1, 2, 4, 16], 2),
}


@pytest.mark.parametrize("target", ["llvm", "llvmjit"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_remainder_indexing_matches_c(case: str, target: str) -> None:
    """The family of kernels indexing with ``i % 2^k`` gives the C back end's bytes."""
    model, shape = CASES[case]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = run_onnx_compiled(model, {"x": x}, target="c")[0]
    got = run_onnx_compiled(model, {"x": x}, target=target)[0]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("target", ["llvm", "llvmjit"])
def test_tile_of_a_4d_tensor_matches_numpy(target: str) -> None:
    """pytorch-operator test_operator_repeat's shape: (1, 2, 3, 4) tiled (1, 2, 3, 4)."""
    model, shape = CASES["tile_1x2x3x4_by_1x2x3x4"]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = run_onnx_compiled(model, {"x": x}, target=target)[0]
    np.testing.assert_array_equal(got, np.tile(x, (1, 2, 3, 4)))
