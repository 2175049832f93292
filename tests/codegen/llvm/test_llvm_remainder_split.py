"""Vectorized loops dividing their own variable by a power of two are split by it on llvm
(ember.codegen.llvm.remainder_split), so that LLVM vectorizes them: structure, and results
bitwise equal to c's (never timings)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ember.codegen.llvm.loop_hints import unsafe_to_vectorize
from ember.codegen.llvm.remainder_split import split_remainder_loops
from ember.testing.runners import compile_onnx, run_artifacts
from ember.tir.buffer import decl_buffer
from ember.tir.expr import FloorDiv, FloorMod, IntImm, Var
from ember.tir.functor import post_order_visit
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc, SeqStmt

pytest.importorskip("llvmlite")


def _func(extent: int, div: int, mod: int) -> PrimFunc:
    """``for i in vectorized(extent): b[i] = a[i // div * 8 + i % mod]``."""
    a = decl_buffer((512,), "float32", "a")
    b = decl_buffer((extent,), "float32", "b")
    i = Var("i", "int32")
    index = FloorDiv(i, IntImm("int32", div)) * IntImm("int32", 8) + FloorMod(
        i, IntImm("int32", mod)
    )
    store = BufferStore(b, a[index], (i,))
    loop = For(i, IntImm("int32", 0), IntImm("int32", extent), ForKind.VECTORIZED, store)
    return PrimFunc("f", (a, b), loop)


def test_loop_is_split_into_copies_without_remainders() -> None:
    loop = split_remainder_loops(_func(16, 2, 2)).body
    assert isinstance(loop, For) and loop.kind is ForKind.VECTORIZED
    assert loop.extent == IntImm("int32", 8)
    assert isinstance(loop.body, SeqStmt) and len(loop.body.seq) == 2
    found: list[object] = []
    post_order_visit(loop, lambda n: found.append(n) if isinstance(n, FloorMod) else None)
    assert not found and not unsafe_to_vectorize(loop)


@pytest.mark.parametrize(("extent", "div", "mod"), [(15, 2, 2), (16, 2, 4), (32, 16, 16)])
def test_other_loops_stay(extent: int, div: int, mod: int) -> None:
    """An extent the factor does not divide, two factors, a factor above MAX_FACTOR."""
    func = _func(extent, div, mod)
    assert split_remainder_loops(func).body is func.body


def _depth_to_space_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 24, 24))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 2, 48, 48))
    b = helper.make_tensor("b", TensorProto.FLOAT, (1,), [0.25])
    nodes = [
        helper.make_node("DepthToSpace", ["x"], ["d"], blocksize=2, mode="CRD"),
        helper.make_node("Add", ["d", "b"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "d2s", [x], [y], [b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.cc
def test_depth_to_space_on_llvm_equals_c_bitwise() -> None:
    model = _depth_to_space_model()
    x = np.random.default_rng(3).standard_normal((1, 8, 24, 24)).astype("float32")
    want = run_artifacts(compile_onnx(model, target="c"), {"x": x})
    for kind in ("llvm", "llvmjit"):
        got = run_artifacts(compile_onnx(model, target=kind), {"x": x})
        assert got[0].tobytes() == want[0].tobytes()
