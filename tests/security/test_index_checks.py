"""Data-dependent indices are checked at run time: an out-of-range index fails the kernel
with an ExecutorError naming it, never reads other memory, never truncates to 32 bits.

Before, Gather with index -100 returned heap bytes, 10**12 segfaulted and 2**32 + 1
silently read row 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from codegen_build import compile_funcs

import ember.runtime as rt
from ember import tir
from ember.codegen.c import generate_source
from ember.errors import EmberError, ExecutorError, FFIError
from ember.testing import compile_onnx, run_artifacts, run_onnxruntime

onnx = pytest.importorskip("onnx")
helper = onnx.helper
TP = onnx.TensorProto

BAD = [-100, 4, -5, 10**12, 2**32 + 1, -(2**63)]


def model(op: str, x_shape: list[int], i_shape: list[int], out_shape: list[int],
          extra: tuple[str, list[int]] | None = None, **attrs: int | str) -> object:  # fmt: skip
    """op(x, i[, u]) with float data, int64 indices given at run time."""
    inputs = [
        helper.make_tensor_value_info("x", TP.FLOAT, x_shape),
        helper.make_tensor_value_info("i", TP.INT64, i_shape),
    ]
    names = ["x", "i"]
    if extra is not None:
        inputs.append(helper.make_tensor_value_info(extra[0], TP.FLOAT, extra[1]))
        names.append(extra[0])
    node = helper.make_node(op, names, ["y"], **attrs)
    out = [helper.make_tensor_value_info("y", TP.FLOAT, out_shape)]
    graph = helper.make_graph([node], op.lower(), inputs, out)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


CASES = {
    "Gather": (model("Gather", [3, 4], [2], [2, 4], axis=0), (2,), [0, -3]),
    "GatherElements": (
        model("GatherElements", [3, 4], [3, 4], [3, 4], axis=1),
        (3, 4),
        [[0, 1, 2, 3], [-1, -2, -3, -4], [3, 3, 0, 0]],
    ),
    "GatherND": (model("GatherND", [3, 4], [2, 2], [2]), (2, 2), [[0, 1], [-1, -4]]),
    "ScatterElements": (
        model("ScatterElements", [3, 4], [1, 4], [3, 4], ("u", [1, 4]), axis=0),
        (1, 4),
        [[0, 1, -1, 2]],
    ),
    "ScatterND": (model("ScatterND", [3, 4], [2, 1], [3, 4], ("u", [2, 4])), (2, 1), [[0], [-1]]),
    "ScatterNDAdd": (
        model("ScatterND", [3, 4], [2, 1], [3, 4], ("u", [2, 4]), reduction="add"),
        (2, 1),
        [[0], [-1]],
    ),
}


def feeds(name: str, idx: np.ndarray) -> dict[str, np.ndarray]:
    """Inputs of case ``name`` with indices ``idx``."""
    x = np.arange(12, dtype="float32").reshape(3, 4)
    out = {"x": x, "i": idx}
    if name.startswith("Scatter"):
        out["u"] = -np.ones(model_shape(name), "float32")
    return out


def model_shape(name: str) -> tuple[int, ...]:
    """The updates' shape of a scatter case."""
    return (1, 4) if name.startswith("ScatterElements") else (2, 4)


@pytest.mark.cc
@pytest.mark.parametrize("name", sorted(CASES))
def test_out_of_range_index_raises_executor_error(name: str) -> None:
    m, shape, good = CASES[name]
    shapes = {"x": (3, 4), "i": shape}
    if name.startswith("Scatter"):
        shapes["u"] = model_shape(name)
    arts = compile_onnx(m, shape=shapes)
    ok = feeds(name, np.array(good, "int64"))
    np.testing.assert_array_equal(run_artifacts(arts, ok)[0], run_onnxruntime(m, ok)[0])
    for bad in BAD:
        idx = np.array(good, "int64")
        idx.reshape(-1)[0] = bad
        with pytest.raises(ExecutorError, match=f"index {bad} out of range"):
            run_artifacts(arts, feeds(name, idx))


@pytest.mark.cc
def test_embedding_rows_checked_once_per_row_in_parallel_loops() -> None:
    """Gather of whole rows runs its check in front of the row's vectorized copy
    (tir.transform.hoist_checks), inside the parallel loop: same rows, same errors."""
    m = model("Gather", [300, 64], [2, 64], [2, 64, 64], axis=0)
    arts = compile_onnx(m, shape={"x": (300, 64), "i": (2, 64)})
    src = arts.get("c", "lib0.c").content.decode()
    body = src[src.index("#pragma omp simd") :]
    assert "ember_index_check" not in body[: body.index("}")]
    x = np.arange(300 * 64, dtype="float32").reshape(300, 64)
    idx = np.random.default_rng(0).integers(-300, 300, (2, 64))
    idx[0, :3] = [-300, 299, -1]
    np.testing.assert_array_equal(run_artifacts(arts, {"x": x, "i": idx})[0], x[idx])
    for bad in (300, -301, 2**32):
        wrong = idx.copy()
        wrong[1, 63] = bad
        with pytest.raises(ExecutorError, match=rf"index {bad} out of range \[-300, 300\)"):
            run_artifacts(arts, {"x": x, "i": wrong})


@pytest.mark.cc
def test_int32_indices_are_checked_too() -> None:
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    graph = helper.make_graph(
        [node],
        "g32",
        [helper.make_tensor_value_info("x", TP.FLOAT, [2, 5]),
         helper.make_tensor_value_info("i", TP.INT32, [3])],
        [helper.make_tensor_value_info("y", TP.FLOAT, [2, 3])],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    arts = compile_onnx(m, shape={"x": (2, 5), "i": (3,)})
    x = np.arange(10, dtype="float32").reshape(2, 5)
    good = {"x": x, "i": np.array([4, -5, 0], "int32")}
    np.testing.assert_array_equal(run_artifacts(arts, good)[0], run_onnxruntime(m, good)[0])
    with pytest.raises(ExecutorError, match=r"index -6 out of range \[-5, 5\) in Gather"):
        run_artifacts(arts, {"x": x, "i": np.array([0, -6, 1], "int32")})


def test_constant_index_is_checked_at_compile_time() -> None:
    assert tir.index_check(-2, 5, "x") == tir.IntImm("int64", 3)
    with pytest.raises(EmberError, match=r"index 5 out of range \[-5, 5\) in the test"):
        tir.index_check(5, 5, "the test")


def test_proven_index_needs_no_check() -> None:
    a = tir.decl_buffer((8,), "float32", "A")
    out = tir.decl_buffer((4,), "float32", "B")
    i = tir.Var("i")
    body = tir.for_range(i, 4, tir.store(out, a[tir.index_check(i * 2, 8, "test")], i))
    text = generate_source([tir.PrimFunc("proven", (a, out), body)])
    assert "ember_index_check" not in text


@pytest.mark.cc
def test_serial_kernel_reports_at_its_end(tmp_path: Path) -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    idx = tir.decl_buffer((4,), "int64", "I")
    out = tir.decl_buffer((4,), "float32", "B")
    i = tir.Var("i")
    load = a[tir.index_check(idx[i], 4, "the test's indices")]
    func = tir.PrimFunc("pick", (a, idx, out), tir.for_range(i, 4, tir.store(out, load, i)))
    mod = compile_funcs([func], tmp_path)
    data = np.arange(4, dtype="float32")
    res = rt.array(np.zeros(4, "float32"))
    mod["ember_pick"](rt.array(data), rt.array(np.array([3, -1, 0, 1], "int64")), res)
    np.testing.assert_array_equal(res.numpy(), [3, 3, 0, 1])
    expected = np.zeros(4, "float32")
    tir.interpret(func, [data, np.array([3, -1, 0, 1], "int64"), expected])
    np.testing.assert_array_equal(res.numpy(), expected)
    with pytest.raises(FFIError, match=r"pick: index 7 out of range \[-4, 4\) in the test's"):
        mod["ember_pick"](rt.array(data), rt.array(np.array([0, 7, 0, 0], "int64")), res)
    with pytest.raises(EmberError, match="index 7 out of range"):
        tir.interpret(func, [data, np.array([0, 7, 0, 0], "int64"), expected])
