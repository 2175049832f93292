"""nn.matmul of a batched lhs and a matrix: legalized to one 2-D product (matmul_rows)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.ir.expr import Call, const
from ember.ops.nn_conv import matmul_rows


def _typed(expr: Call) -> Call:
    assert isinstance(expr.type, TensorType)  # call() infers the type
    return expr


def test_batched_lhs_becomes_one_matrix_product() -> None:
    a = Var("a", TensorType((24, 1, 512), "float32"))
    b = Var("b", TensorType((512, 64), "float32"))
    node = _typed(call("nn.matmul", a, b))
    out = matmul_rows(node)
    assert isinstance(out, Call) and out.op.name == "reshape"
    inner = out.args[0]
    assert isinstance(inner, Call) and inner.op.name == "nn.matmul"
    assert tuple(inner.args[0].attrs["newshape"]) == (24, 512)  # type: ignore[attr-defined]
    assert tuple(out.attrs["newshape"]) == (24, 1, 64)


@pytest.mark.parametrize(("ashape", "bshape"), [((8, 16), (16, 4)), ((2, 3, 4), (2, 4, 5))])
def test_matrices_and_batched_rhs_stay(ashape, bshape) -> None:  # type: ignore[no-untyped-def]
    a, b = Var("a", TensorType(ashape, "float32")), Var("b", TensorType(bshape, "float32"))
    node = _typed(call("nn.matmul", a, b))
    assert matmul_rows(node) is node


def test_a_constant_rhs_of_odd_width_is_padded_then_sliced() -> None:
    a = Var("a", TensorType((24, 256), "float32"))
    w = const(np.ones((256, 97), np.float32))
    out = matmul_rows(call("nn.matmul", a, w))
    assert isinstance(out, Call) and out.op.name == "strided_slice"
    inner = out.args[0]
    assert isinstance(inner, Call) and inner.args[1].type.shape == (256, 112)  # type: ignore[attr-defined]
    assert out.type.shape == (24, 97)  # type: ignore[attr-defined]


def _check_matmul_against_onnxruntime(xshape: tuple[int, ...], cols: int, seed: int) -> None:
    from onnx import TensorProto, helper, numpy_helper

    from ember.testing import assert_matches_onnxruntime

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((xshape[-1], cols)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xshape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [*xshape[:-1], cols])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = rng.standard_normal(xshape).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.cc
@pytest.mark.parametrize(("xshape", "cols"), [((12, 1, 64), 40), ((3, 5, 32), 37), ((6, 40), 97)])
def test_compiled_matmuls_match_onnxruntime(xshape, cols) -> None:  # type: ignore[no-untyped-def]
    """A batched lhs (flattened), odd widths (padded, sliced), and both."""
    _check_matmul_against_onnxruntime(xshape, cols, seed=cols)
