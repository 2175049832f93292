"""The LLVM back end contracts only reduction updates, as the C back end does.

``buf[i] = buf[i] + a * b`` becomes one FMA (``contract`` on its fmul and fadd); no other
float operation carries a fast-math flag. With ``contract`` on every fadd/fmul, LLVM fused
the inverse DFT's butterflies and its results differed from the C back end's by 2.4e-6.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.codegen.llvm.contract import reduction_update
from ember.testing import run_onnx_compiled
from ember.tir import Var, decl_buffer
from ember.tir.expr import IntImm
from ember.tir.stmt import BufferStore

pytest.importorskip("llvmlite")

I = Var("i", "int32")
C = decl_buffer([8], name="C")
A = decl_buffer([8], name="A")
B = decl_buffer([8], name="B")


def _store(buf, index, value) -> BufferStore:
    return BufferStore(buf, value, (index,))


def test_a_reduction_update_is_recognised_in_either_order() -> None:
    """``C[i] = C[i] + A[i] * B[i]`` and ``C[i] = A[i] * B[i] + C[i]``."""
    prod = A[I] * B[I]
    assert reduction_update(_store(C, I, C[I] + prod)) is not None
    assert reduction_update(_store(C, I, prod + C[I])) is not None


def test_other_sums_of_products_are_not_contracted() -> None:
    """Another target, another element, or no product: no contraction."""
    prod = A[I] * B[I]
    assert reduction_update(_store(A, I, C[I] + prod)) is None
    assert reduction_update(_store(C, I, C[I + IntImm("int32", 1)] + prod)) is None
    assert reduction_update(_store(C, I, C[I] + A[I])) is None


def _inverse_dft(n: int):
    node = helper.make_node("DFT", ["x", "", "axis"], ["y"], inverse=1)
    axis = helper.make_tensor("axis", TensorProto.INT64, [], [1])
    graph = helper.make_graph(
        [node],
        "idft",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n, 10, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n, 10, 2])],
        [axis],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("target", ["llvm", "llvmjit"])
@pytest.mark.parametrize("n", [10, 16])
def test_inverse_dft_gives_the_c_back_ends_bits(n: int, target: str) -> None:
    """onnx's test_dft_inverse shape family: bitwise equal to ``c``."""
    x = np.random.default_rng(1).standard_normal((1, n, 10, 2)).astype(np.float32)
    want = run_onnx_compiled(_inverse_dft(n), {"x": x}, target="c")[0]
    got = run_onnx_compiled(_inverse_dft(n), {"x": x}, target=target)[0]
    np.testing.assert_array_equal(got, want)
