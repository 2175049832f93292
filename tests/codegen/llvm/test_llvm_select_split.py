"""Vectorized loops that pick their source by comparing their own index with constants
(channels-last concatenates) are split into one contiguous loop per source on llvm
(ember.codegen.llvm.select_split): structural properties and results, never timings."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.codegen.llvm.select_split import MAX_PIECES, split_select_loops
from ember.testing import compile_onnx, run_onnx_compiled
from ember.tir.buffer import decl_buffer
from ember.tir.expr import GE, LT, IntImm, Select, Var
from ember.tir.functor import post_order_visit
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc

pytest.importorskip("llvmlite")

from ember.codegen.llvm.inspect import ir_text  # noqa: E402 - needs llvmlite


def _concat(parts: int, width: int, kind: ForKind = ForKind.VECTORIZED) -> PrimFunc:
    """``out[i] = i < w ? p0[i] : i < 2w ? p1[i - w] : ...`` over ``parts * width``."""
    ins = [decl_buffer((width,), "float32", f"p{k}") for k in range(parts)]
    out = decl_buffer((parts * width,), "float32", "out")
    i = Var("i", "int32")
    value = ins[-1][i - (parts - 1) * width]
    for k in range(parts - 2, -1, -1):
        value = Select(LT(i, IntImm("int32", (k + 1) * width)), ins[k][i - k * width], value)
    body = BufferStore(out, value, (i,))
    loop = For(i, IntImm("int32", 0), IntImm("int32", parts * width), kind, body)
    return PrimFunc("f", (*ins, out), loop)


def _nodes(func: PrimFunc, cls: type) -> list:
    found: list = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def test_concat_loop_splits_into_one_loop_per_source():
    out = split_select_loops(_concat(4, 32))
    assert not _nodes(out, Select)
    loops = _nodes(out, For)
    assert [lp.extent.value for lp in loops] == [32, 32, 32, 32]
    assert all(lp.kind is ForKind.VECTORIZED for lp in loops)
    stores = _nodes(out, BufferStore)
    assert [s.value.buffer.name for s in stores] == ["p0", "p1", "p2", "p3"]


def test_reversed_comparison_and_single_iteration_piece():
    a, b = decl_buffer((16,), "float32", "a"), decl_buffer((16,), "float32", "b")
    i = Var("i", "int32")
    value = Select(GE(IntImm("int32", 14), i), a[i], b[i])  # i <= 14: changes at 15
    body = BufferStore(b, value, (i,))
    loop = For(i, IntImm("int32", 0), IntImm("int32", 16), ForKind.VECTORIZED, body)
    out = split_select_loops(PrimFunc("g", (a, b), loop))
    assert [lp.extent.value for lp in _nodes(out, For)] == [15]
    assert not _nodes(out, Select)


def test_serial_loops_other_conditions_and_many_pieces_stay():
    serial = _concat(4, 32, ForKind.SERIAL)
    assert split_select_loops(serial).body is serial.body
    many = _concat(MAX_PIECES + 1, 8)
    assert split_select_loops(many).body is many.body
    a, b = decl_buffer((8,), "float32", "a"), decl_buffer((8,), "float32", "b")
    i, n = Var("i", "int32"), Var("n", "int32")
    other = BufferStore(b, Select(LT(n, IntImm("int32", 3)), a[i], a[i] + 1.0), (i,))
    loop = For(i, IntImm("int32", 0), IntImm("int32", 8), ForKind.VECTORIZED, other)
    func = PrimFunc("h", (a, b, n), loop)
    assert split_select_loops(func).body is func.body


def _concat_model(parts: int, channels: int):
    names = [f"x{k}" for k in range(parts)]
    node = helper.make_node("Concat", names, ["y"], axis=3)
    graph = helper.make_graph(
        [node],
        "concat",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 6, 5, channels]) for n in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 5, parts * channels])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_channels_last_concatenate_has_no_gathers_and_matches_c():
    """yolo's 4 x 32 -> 128 concatenate: formerly masked gathers of every input (2.5x c's
    time); now plain vector copies, bitwise equal to c."""
    model = _concat_model(4, 32)
    shapes = {f"x{k}": (1, 6, 5, 32) for k in range(4)}
    arts = compile_onnx(model, shape=shapes, target="llvm -jobs=1")
    (art,) = [a for a in arts if a.codegen_id == "llvm"]
    ir = ir_text(art)
    assert "llvm.masked" not in ir
    rng = np.random.default_rng(0)
    feeds = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    got = run_onnx_compiled(model, feeds, target="llvm -jobs=1")[0]
    want = run_onnx_compiled(model, feeds, target="c")[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.concatenate([feeds[f"x{k}"] for k in range(4)], 3))
