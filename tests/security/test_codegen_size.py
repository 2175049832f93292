"""Long fused elementwise chains: C size linear in the op count, no RecursionError, right values.

Before Let binding, ReLU's ``x < 0 ? 0 : x`` copied its operand twice per op, so 16 fused
ReLUs gave 1.6 MB of C and 18 exhausted memory; a 200-node Add chain overflowed the Python
stack in lowering.
"""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import CompileError
from ember.testing import compile_onnx, run_artifacts, run_onnxruntime
from ember.tir import te
from ember.tir.te.inline import MAX_INLINE_DEPTH, too_big
from ember.tir.te.tensor import MAX_COMPUTE_DEPTH
from ember.tir.transform import vectorize_loops

onnx = pytest.importorskip("onnx")
helper = onnx.helper
TensorProto = onnx.TensorProto

MIXED = ("Relu", "LeakyRelu", "Add", "Mul", "Sigmoid")
SHAPE = (4, 64)


def chain_model(ops: tuple[str, ...], n: int) -> object:
    """x -> op0 -> op1 -> ... (n ops); Add/Mul alternate a constant and x as operand."""
    nodes = []
    inits = []
    prev = "x"
    for k in range(n):
        op = ops[k % len(ops)]
        out = f"t{k}"
        if op in ("Add", "Mul"):
            other = "x"
            if k % 2 == 0:
                other = f"c{k}"
                value = 0.5 if op == "Mul" else 0.1
                inits.append(helper.make_tensor(other, TensorProto.FLOAT, [1], [value]))
            nodes.append(helper.make_node(op, [prev, other], [out]))
        elif op == "LeakyRelu":
            nodes.append(helper.make_node(op, [prev], [out], alpha=0.1))
        else:
            nodes.append(helper.make_node(op, [prev], [out]))
        prev = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, list(SHAPE))],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def c_bytes(artifacts: object) -> int:
    """Total size of the generated C sources of an ArtifactSet."""
    return sum(len(a.content) for a in artifacts if a.file_name.endswith(".c"))  # type: ignore[attr-defined]


def relu(t: te.Tensor, name: str) -> te.Tensor:
    """ReLU written as a select that reads its operand twice."""
    return te.compute(t.shape, lambda i: tir.if_then_else(t[i] < 0.0, 0.0, t[i]), name)


def inline_all(out: te.Tensor) -> te.Schedule:
    """A schedule of ``out`` with every other compute inlined."""
    s = te.create_schedule(out)
    for op in s.ops:
        if op is not out.op and isinstance(op, te.ComputeOp):
            s[op].compute_inline()
    return s


def test_shared_producer_is_bound_once() -> None:
    x = te.placeholder((8,), "float32", "x")
    t = x
    for k in range(30):  # 2**30 copies without a Let
        t = relu(t, f"r{k}")
    s = inline_all(t)
    func = te.lower(s, [x, t], name="relus")
    assert len(str(func)) < 20_000
    data = np.linspace(-2, 2, 8).astype("float32")
    out = np.zeros(8, "float32")
    tir.interpret(func, [data, out])
    np.testing.assert_array_equal(out, np.maximum(data, 0))


def test_too_big_is_iterative_and_bounded() -> None:
    e: tir.PrimExpr = tir.Var("x", "float32")
    for _ in range(5000):  # deeper than Python's recursion limit
        e = e + 1.0
    assert too_big(e)
    small = tir.Var("y", "float32")
    for _ in range(MAX_INLINE_DEPTH // 2):
        small = small * 2.0
    assert not too_big(small)


@pytest.mark.cc
def test_mixed_chain_size_is_linear_and_matches_onnxruntime() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(SHAPE).astype("float32")
    sizes = {}
    for n in (25, 50, 100):
        model = chain_model(MIXED, n)
        arts = compile_onnx(model, shape={"x": SHAPE})
        sizes[n] = c_bytes(arts)
        ours = run_artifacts(arts, {"x": x})[0]
        ref = run_onnxruntime(model, {"x": x})[0]
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5, err_msg=f"{n} ops")
    # bytes per added op stay roughly constant (the fixed part is the packed wrapper)
    step1 = (sizes[50] - sizes[25]) / 25
    step2 = (sizes[100] - sizes[50]) / 50
    assert step1 < 200 and step2 < 200, sizes
    assert step2 < 2 * step1 + 20, sizes


@pytest.mark.cc
@pytest.mark.parametrize("n", [200, 1000])
def test_long_add_chain_compiles_and_matches(n: int) -> None:
    x = np.linspace(-1, 1, SHAPE[0] * SHAPE[1]).astype("float32").reshape(SHAPE)
    model = chain_model(("Add",), n)
    arts = compile_onnx(model, shape={"x": SHAPE})
    assert c_bytes(arts) < 40 * n + 20_000
    ours = run_artifacts(arts, {"x": x})[0]
    ref = run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-3)


def test_too_deep_compute_is_refused_with_its_name() -> None:
    x = te.placeholder((4,), "float32", "x")

    def body(i: tir.PrimExpr) -> tir.PrimExpr:
        e = x[i]
        for _ in range(MAX_COMPUTE_DEPTH + 1):
            e = e * 2.0
        return e

    with pytest.raises(CompileError, match="compute 'deep': its expression is deeper than"):
        te.compute((4,), body, "deep")


@pytest.mark.cc
def test_concat_of_many_inputs_is_shallow_and_matches() -> None:
    n = 300
    inputs = [helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, [1, 2]) for k in range(n)]
    node = helper.make_node("Concat", [f"x{k}" for k in range(n)], ["y"], axis=0)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 2])
    model = helper.make_model(
        helper.make_graph([node], "concat", inputs, [out]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    feeds = {f"x{k}": np.full((1, 2), k, "float32") for k in range(n)}
    arts = compile_onnx(model, shape={k: (1, 2) for k in feeds})
    np.testing.assert_array_equal(run_artifacts(arts, feeds)[0], run_onnxruntime(model, feeds)[0])


def test_let_bound_chain_still_vectorizes() -> None:
    x = te.placeholder((16,), "float32", "x")
    t = x
    for k in range(6):
        t = relu(t, f"r{k}")
    s = inline_all(t)
    s[t].vectorize(t.op.axis[0])
    func = vectorize_loops(te.lower(s, [x, t], name="relus_vec"))
    kinds: list[tir.ForKind] = []
    lets: list[tir.Let] = []
    tir.post_order_visit(
        func.body, lambda n: kinds.append(n.kind) if isinstance(n, tir.For) else None
    )
    tir.post_order_visit(func.body, lambda n: lets.append(n) if isinstance(n, tir.Let) else None)
    assert tir.ForKind.VECTORIZED not in kinds  # the loop became vector code
    assert lets and all(let.var.dtype == "float32x16" for let in lets)
    data = np.linspace(-2, 2, 16).astype("float32")
    out = np.zeros(16, "float32")
    tir.interpret(func, [data, out])
    np.testing.assert_array_equal(out, np.maximum(data, 0))
