"""Vectorized loops of odd constant extents become explicit vector chunks on llvm
(ember.codegen.llvm.vector_split), and gathering nests of many iterations stay rolled
(loop_hints.GATHER_UNROLL_TRIPS): structural properties of the loop IR and the optimised
LLVM IR, never timings."""

from __future__ import annotations

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.codegen.llvm import loop_hints
from ember.codegen.llvm.vector_split import _chunks, split_vector_loops
from ember.testing import compile_onnx, run_onnx_compiled
from ember.tir import dtype as dt
from ember.tir.buffer import decl_buffer
from ember.tir.expr import IntImm, Ramp, Var
from ember.tir.functor import post_order_visit
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc

pytest.importorskip("llvmlite")

from ember.codegen.llvm.inspect import ir_text  # noqa: E402 - needs llvmlite
from ember.transform import PassContext


def _loop(extent: int, stride: int, kind: ForKind = ForKind.VECTORIZED) -> PrimFunc:
    """``b[i] = a[i * stride] + 1`` over ``extent`` iterations of loop kind ``kind``."""
    a = decl_buffer((extent * stride,), "float32", "a")
    b = decl_buffer((extent,), "float32", "b")
    i = Var("i", "int32")
    body = BufferStore(b, a[i * stride] + 1.0, (i,))
    loop = For(i, IntImm("int32", 0), IntImm("int32", extent), kind, body)
    return PrimFunc("f", (a, b), loop)


def _store_lanes(func: PrimFunc) -> list[int]:
    found: list[int] = []

    def fn(n: object) -> None:
        if isinstance(n, BufferStore):
            found.append(dt.lanes_of(n.value.dtype))

    post_order_visit(func.body, fn)
    return found


def test_chunks_cover_the_extent():
    assert _chunks(28) == [(0, 8), (8, 8), (16, 8), (24, 4)]
    assert _chunks(58) == [(k, 8) for k in range(0, 56, 8)] + [(56, 2)]
    assert _chunks(15) == [(0, 8), (8, 4), (12, 2), (14, 1)]


def test_odd_contiguous_loop_becomes_vector_chunks():
    out = split_vector_loops(_loop(28, 1))
    assert _store_lanes(out) == [8, 8, 8, 4]
    loops: list[For] = []
    post_order_visit(out.body, lambda n: loops.append(n) if isinstance(n, For) else None)
    assert not loops


@pytest.mark.parametrize(("extent", "stride"), [(29, 2), (16, 1), (7, 1), (200, 1)])
def test_strided_short_long_and_power_of_two_loops_stay(extent, stride):
    func = _loop(extent, stride)
    assert split_vector_loops(func).body is func.body


def test_serial_loops_stay():
    func = _loop(28, 1, ForKind.SERIAL)
    assert split_vector_loops(func).body is func.body


def _gather_nest(trips: int, lanes: int = 16) -> For:
    """A serial nest of ``trips`` iterations storing a ``lanes``-lane gather (stride 7)."""
    a = decl_buffer((trips * lanes * 7,), "float32", "a")
    b = decl_buffer((trips * lanes,), "float32", "b")
    i = Var("i", "int32")
    index = Ramp(i * lanes * 7, IntImm("int32", 7), lanes)
    body = BufferStore(b, a[index], (Ramp(i * lanes, IntImm("int32", 1), lanes),))
    return For(i, IntImm("int32", 0), IntImm("int32", trips), ForKind.SERIAL, body)


def test_gathering_nests_unroll_only_when_short():
    limit = loop_hints.GATHER_UNROLL_TRIPS
    assert loop_hints.unrolled_gather_lanes(_gather_nest(6)) == 96
    assert loop_hints.unroll_fully(_gather_nest(limit))
    assert not loop_hints.unroll_fully(_gather_nest(limit + 5))
    # contiguous nests of as many iterations still unroll (3x3 windows, row tiles)
    assert loop_hints.unroll_fully(_loop(14, 1, ForKind.SERIAL).body)  # type: ignore[arg-type]


def _depthwise(channels: int, size: int, stride: int):
    w = np.random.default_rng(0).standard_normal((channels, 1, 3, 3)).astype(np.float32)
    out = (size + 2 - 3) // stride + 1
    conv = helper.make_node(
        "Conv", ["x", "w"], ["y0"], group=channels, strides=[stride] * 2, pads=[1] * 4
    )
    relu = helper.make_node("Relu", ["y0"], ["y"])
    graph = helper.make_graph(
        [conv, relu],
        "dw",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, out, out])],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _function(ir: str, suffix: str) -> str:
    match = re.search(rf"define [^\n]*@\w+{suffix}\(.*?\n}}\n", ir, re.S)
    assert match, f"no function *{suffix} in the IR"
    return match.group(0)


def test_strided_depthwise_row_accumulators_are_not_in_memory():
    """mobilenet_v2's strided depthwise rows of 28 columns: after optimisation the only
    stack buffers of the row kernel are its two input copies (padded, split by parity);
    the accumulator row (formerly [28 x float], loaded and stored on every tap) is gone,
    and no loop-vectorizer masking is left."""
    model = _depthwise(16, 56, 2)
    nchw = {"pass_context": PassContext(config={"convert_layout": "NCHW"})}  # the row kernel
    arts = compile_onnx(model, shape={"x": (1, 16, 56, 56)}, target="llvm -jobs=1", **nchw)
    (art,) = [a for a in arts if a.codegen_id == "llvm"]
    body = _function(ir_text(art), "_par0")
    allocas = re.findall(r"alloca \[(\d+) x float\]", body)
    assert sorted(int(n) for n in allocas) == [58, 174]  # the copies only
    assert "llvm.masked" not in body
    x = np.random.default_rng(1).standard_normal((1, 16, 56, 56)).astype(np.float32)
    got = run_onnx_compiled(model, {"x": x}, target="llvm -jobs=1", **nchw)[0]
    want = run_onnx_compiled(model, {"x": x}, target="c", **nchw)[0]
    np.testing.assert_array_equal(got, want)
