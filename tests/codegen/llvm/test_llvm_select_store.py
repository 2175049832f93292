"""A store of min/max/select against the element's own old value (a max pool's update)
stays a plain vector store on llvm (ember.codegen.llvm.select_store): LLVM 22 otherwise
turns it into a masked store (vmaskmovps, 11x c's time on yolo's max pool)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import ember
from ember.codegen.llvm.select_store import selects_own_value
from ember.target import Target
from ember.testing import run_onnx_compiled
from ember.tir.buffer import decl_buffer
from ember.tir.expr import LT, FloatImm, IntImm, Max, Min, Select, Var
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc, seq

pytest.importorskip("llvmlite")

from ember.codegen.llvm import build_llvm  # noqa: E402 - needs llvmlite
from ember.codegen.llvm.inspect import asm_text, ir_text  # noqa: E402


def test_selects_own_value():
    acc, x = decl_buffer((8,), "float32", "acc"), decl_buffer((8,), "float32", "x")
    i = Var("i", "int32")
    assert selects_own_value(BufferStore(acc, Max(acc[i], x[i]), (i,)))
    assert selects_own_value(BufferStore(acc, Min(x[i], acc[i]), (i,)))
    cond = LT(i, IntImm("int32", 3))
    assert selects_own_value(BufferStore(acc, Select(cond, x[i], acc[i]), (i,)))
    assert not selects_own_value(BufferStore(acc, Max(x[i], x[i] + 1.0), (i,)))
    assert not selects_own_value(BufferStore(acc, acc[i] + x[i], (i,)))


def _pool_rows(taps: int = 5, channels: int = 128) -> PrimFunc:
    """A channels-last max over ``taps`` rows: ``y[c] = max(y[c], x[t, c])`` per tap, the
    channel loop vectorized (yolo's SPPF pool kernel, one output position)."""
    x = decl_buffer((taps, channels), "float32", "x")
    y = decl_buffer((channels,), "float32", "y")
    c, c2, t = Var("c", "int32"), Var("c2", "int32"), Var("t", "int32")
    zero, vec = IntImm("int32", 0), ForKind.VECTORIZED
    lowest = BufferStore(y, FloatImm("float32", float("-inf")), (c,))
    init = For(c, zero, IntImm("int32", channels), vec, lowest)
    update = BufferStore(y, Max(y[c2], x[t, c2]), (c2,))
    inner = For(c2, zero, IntImm("int32", channels), vec, update)
    taps_loop = For(t, zero, IntImm("int32", taps), ForKind.SERIAL, inner)
    return PrimFunc("pool_rows", (x, y), seq([init, taps_loop]))


def test_max_update_is_frozen_and_never_a_masked_store():
    target = Target.create("llvm -mtriple=x86_64-linux-gnu -mcpu=znver3 -jobs=1")
    (art,) = build_llvm([_pool_rows()], target)
    asm = asm_text(art)
    assert "vmaxps" in asm
    assert "maskmov" not in asm
    assert "freeze" in ir_text(art)


def test_max_update_matches_numpy_with_nans(build):
    x = np.random.default_rng(0).standard_normal((5, 128)).astype(np.float32)
    x[2, 7] = np.nan
    x[0, 9] = np.nan
    mod = build([_pool_rows()])
    y = np.zeros(128, np.float32)
    yt = ember.nd.array(y)
    mod["ember_pool_rows"](ember.nd.array(x), yt)
    want = np.full(128, -np.inf, np.float32)
    for row in x:  # C's a > b ? a : b, the order of the kernel
        want = np.where(want > row, want, row)
    np.testing.assert_array_equal(yt.numpy(), want)


def _pool_model():
    pool = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[5, 5], pads=[2] * 4)
    graph = helper.make_graph(
        [pool],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 10, 10])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_max_pool_matches_c_with_nans():
    x = np.random.default_rng(0).standard_normal((1, 32, 10, 10)).astype(np.float32)
    x[0, 3, 4, 5] = np.nan
    x[0, 7, 0, 0] = -np.inf
    got = run_onnx_compiled(_pool_model(), {"x": x}, target="llvm -jobs=1")[0]
    want = run_onnx_compiled(_pool_model(), {"x": x}, target="c")[0]
    np.testing.assert_array_equal(got, want)
