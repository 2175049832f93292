"""The graph executor end to end over hand-written C kernels in the runtime ABI."""

from __future__ import annotations

import numpy as np
import pytest
from executor_kernels import op, three_node_graph

import ember.executor  # noqa: F401  (registers the metadata loader)
from ember.errors import EmberValueError, ExecutorError
from ember.executor import GraphExecutor, GraphExecutorModule, ProfileReport, create
from ember.formats.graph_json import GraphJSON, Node, NodeEntry
from ember.formats.params import save_params
from ember.runtime import PythonModule, cpu, load_module
from ember.runtime.module import Module
from ember.runtime.ndarray import NDArray
from ember.runtime.ndarray import array as nd_array

pytestmark = pytest.mark.cc

RNG = np.random.default_rng(0)


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.maximum(np.maximum(x, 0) + w, 0)


def data() -> tuple[np.ndarray, np.ndarray]:
    return (
        RNG.standard_normal((2, 3)).astype(np.float32),
        RNG.standard_normal((2, 3)).astype(np.float32),
    )


def test_three_node_graph_runs(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib, cpu(0))
    x, w = data()
    g.set_input("x", x)
    g.set_input(w=w)
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)
    # Run again with new inputs through run(**inputs): results follow the inputs.
    x2, _ = data()
    g.run(x=x2)
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x2, w), rtol=1e-6)


def test_module_interface_like_tvm(kernel_lib: Module) -> None:
    mod = GraphExecutorModule(three_node_graph(), kernel_lib, cpu(0))
    assert isinstance(mod, Module) and mod.type_key == "GraphExecutor"
    x, w = data()
    mod["set_input"]("x", nd_array(x))
    mod["set_input"](1, w)
    mod["run"]()
    out = mod["get_output"](0)
    assert isinstance(out, NDArray)
    np.testing.assert_allclose(out.numpy(), reference(x, w), rtol=1e-6)
    assert mod["get_num_inputs"]() == 2
    assert mod["get_num_outputs"]() == 1
    assert mod["get_input_index"]("w") == 1
    assert mod["get_input_index"]("nope") == -1
    assert "k_add" in mod  # the host module is imported
    assert GraphExecutor(mod).get_num_outputs() == 1


def test_storage_reuse_shares_memory(kernel_lib: Module) -> None:
    mod = GraphExecutorModule(three_node_graph(), kernel_lib, cpu(0))
    entries = mod.plan.entries
    # storages 0 (x), 1 (w) and 2 (the output; entry 2 shares it) are kept apart; entry 3,
    # an intermediate, lives in the workspace
    assert sorted(mod.plan.storage) == [0, 1, 2]
    assert entries[2].data_ptr == entries[4].data_ptr
    assert entries[3].data_ptr == mod.plan.workspace.data_ptr
    assert all(buf.data_ptr % 64 == 0 for buf in mod.plan.storage.values())
    # The same graph with every entry in its own storage computes the same answer.
    private = GraphExecutorModule(three_node_graph([0, 1, 2, 3, 4]), kernel_lib, cpu(0))
    x, w = data()
    for m in (mod, private):
        m.set_input("x", x)
        m.set_input("w", w)
        m.run()
    np.testing.assert_array_equal(mod.get_output(0).numpy(), private.get_output(0).numpy())


def test_storage_sized_by_largest_user(kernel_lib: Module) -> None:
    nodes = [Node("null", "x"), op("split", "k_split", [NodeEntry(0)], outputs=2)]
    graph = GraphJSON.create(
        nodes,
        [NodeEntry(1, 0), NodeEntry(1, 1)],
        shape=[[40], [20], [20]],
        dltype=["float32"] * 3,
        storage_id=[0, 1, 2],
    )
    g = GraphExecutor(graph, kernel_lib, cpu(0))
    assert g.module.plan.storage[0].nbytes == 192  # 160 bytes rounded up to 64
    x = np.arange(40, dtype=np.float32)
    g.run(x=x)
    np.testing.assert_array_equal(g.get_output(0).numpy(), x[:20])
    np.testing.assert_array_equal(g.get_output(1).numpy(), x[20:])


def test_flatten_data_passes_1d_tensors(kernel_lib: Module) -> None:
    nodes = [Node("null", "x"), op("dbl", "k_double_flat", [NodeEntry(0)], flat=1)]
    graph = GraphJSON.create(nodes, [NodeEntry(1)], [[2, 2], [2, 2]], ["float32"] * 2)
    g = GraphExecutor(graph, kernel_lib)
    x = np.ones((2, 2), np.float32)
    g.run(x=x)
    np.testing.assert_array_equal(g.get_output(0).numpy(), 2 * x)
    assert g.get_output(0).shape == (2, 2)


def test_nop_and_copy_nodes(kernel_lib: Module) -> None:
    nodes = [
        Node("null", "x"),
        op("reshape", "__nop", [NodeEntry(0)]),
        op("copy", "__copy", [NodeEntry(1)]),
    ]
    graph = GraphJSON.create(
        nodes, [NodeEntry(2)], [[6], [2, 3], [2, 3]], ["float32"] * 3, storage_id=[0, 0, 1]
    )
    g = GraphExecutor(graph, kernel_lib)
    x = np.arange(6, dtype=np.float32)
    g.run(x=x)
    np.testing.assert_array_equal(g.get_output(0).numpy(), x.reshape(2, 3))


def test_params_by_blob_dict_and_constructor(kernel_lib: Module) -> None:
    x, w = data()
    blob = save_params({"w": w, "unused": np.zeros(1, np.int8)})
    for g in (
        GraphExecutor(three_node_graph().to_json(), kernel_lib, params=blob),
        create(three_node_graph(), kernel_lib, cpu(0), params={"w": w}),
    ):
        assert g.get_input_info() == {"shape": {"x": (2, 3)}, "dtype": {"x": "float32"}}
        g.run(x=x)
        np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    assert set(g.get_input_info()["shape"]) == {"x", "w"}
    g.load_params(blob)
    assert set(g.get_input_info()["shape"]) == {"x"}
    np.testing.assert_array_equal(g.get_input("w").numpy(), w)


def test_set_input_errors_name_expected_and_given(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    with pytest.raises(
        EmberValueError,
        match=r"expects shape \(2, 3\) and dtype float32, got "
        r"shape \(3, 2\) and dtype float32",
    ):
        g.set_input("x", np.zeros((3, 2), np.float32))
    with pytest.raises(EmberValueError, match="dtype float32, got shape .* dtype float64"):
        g.set_input("x", np.zeros((2, 3), np.float64))
    with pytest.raises(EmberValueError, match="dtype int32"):
        g.set_input("x", nd_array(np.zeros((2, 3), np.int32)))
    with pytest.raises(ExecutorError, match="no input 'y'; inputs: 'x', 'w'"):
        g.set_input("y", np.zeros((2, 3), np.float32))
    with pytest.raises(ExecutorError, match="index 5 is out of range"):
        g.set_input(5, np.zeros((2, 3), np.float32))
    with pytest.raises(EmberValueError, match="cannot convert"):
        g.set_input("x", "text")
    # Lists convert to the expected dtype; nothing above touched the input.
    g.set_input("x", [[1, -2, 3], [4, 5, -6]])
    assert g.get_input("x").dtype == "float32"
    np.testing.assert_array_equal(g.get_input(0).numpy(), [[1, -2, 3], [4, 5, -6]])


def test_run_refuses_unset_inputs_and_bad_output_index(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    g.set_input("x", np.zeros((2, 3), np.float32))
    with pytest.raises(ExecutorError, match=r"\['w'\] were never set"):
        g.run()
    g.set_input("w", np.zeros((2, 3), np.float32))
    g.run()
    with pytest.raises(ExecutorError, match="output index 1 is out of range"):
        g.get_output(1)


def test_get_output_into_out(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    x, w = data()
    g.run(x=x, w=w)
    out_np = np.empty((2, 3), np.float32)
    assert g.get_output(0, out_np) is out_np
    out_nd = nd_array(np.zeros((2, 3), np.float32))
    g.get_output(0, out_nd)
    np.testing.assert_array_equal(out_np, out_nd.numpy())
    with pytest.raises(EmberValueError, match="out has shape"):
        g.get_output(0, np.empty((3,), np.float32))


def test_missing_kernel_is_named(kernel_lib: Module) -> None:
    nodes = [Node("null", "x"), op("conv0", "k_conv", [NodeEntry(0)])]
    graph = GraphJSON.create(nodes, [NodeEntry(1)], [[1], [1]], ["float32"] * 2)
    with pytest.raises(ExecutorError, match="lacks 1 kernel.*'k_conv' \\(used by conv0\\)"):
        GraphExecutor(graph, kernel_lib)


def test_kernel_failure_names_node_and_message(kernel_lib: Module) -> None:
    nodes = [Node("null", "x"), op("bad0", "k_fail", [NodeEntry(0)])]
    graph = GraphJSON.create(nodes, [NodeEntry(1)], [[1], [1]], ["float32"] * 2)
    g = GraphExecutor(graph, kernel_lib)
    g.set_input("x", np.zeros(1, np.float32))
    with pytest.raises(ExecutorError, match="'bad0' \\(kernel 'k_fail'\\) failed.*deliberate"):
        g.run()


def test_kernel_calls_go_through_the_accelerator_when_it_is_available(
    kernel_lib: Module,
) -> None:
    from ember.runtime import fastcall

    nodes = [Node("null", "x"), op("bad0", "k_fail", [NodeEntry(0)])]
    graph = GraphJSON.create(nodes, [NodeEntry(1)], [[1], [1]], ["float32"] * 2)
    g = GraphExecutor(graph, kernel_lib)
    (call,) = g.module.plan.calls
    accelerated = type(call.fn).__name__ == "PreparedCall"
    assert accelerated == (fastcall.extension() is not None) and (call.args == ()) == accelerated


def test_python_kernels_work_through_packed_funcs(kernel_lib: Module) -> None:
    def negate(x: NDArray, y: NDArray) -> None:
        y.copyfrom(-x.numpy())

    lib = PythonModule({"py_neg": negate})
    nodes = [Node("null", "x"), op("neg", "py_neg", [NodeEntry(0)])]
    graph = GraphJSON.create(nodes, [NodeEntry(1)], [[3], [3]], ["float32"] * 2)
    g = GraphExecutor(graph, lib)
    g.run(x=np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(g.get_output(0).numpy(), [0, -1, -2])


def test_profile_table(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    x, w = data()
    g.set_input(x=x, w=w)
    report = g.profile(repeat=3)
    assert isinstance(report, ProfileReport)
    assert [r.name for r in report.rows] == ["relu0", "add0", "relu1"]
    assert [r.op for r in report.rows] == ["k_relu", "k_add", "k_relu"]
    assert all(r.time_us > 0 and r.shape == ((2, 3),) for r in report.rows)
    assert abs(sum(r.percent for r in report.rows) - 100.0) < 1e-6
    text = str(report)
    assert "Node" in text and "Percent" in text and "add0" in text and "Total" in text
    by_op = {op: (n, us, pct) for op, n, us, pct in report.by_op()}
    assert by_op["k_relu"][0] == 2 and by_op["k_add"][0] == 1
    assert abs(sum(v[2] for v in by_op.values()) - 100.0) < 1e-6
    assert report.rows[0].as_dict()["shape"] == [[2, 3]]
    with pytest.raises(ExecutorError, match="debug=True"):
        g.profile(repeat=0)


def test_profile_by_thread_cpu_time(kernel_lib: Module) -> None:
    """clock="thread" times each node by the calling thread's CPU time (robust under load)."""
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    x, w = data()
    g.set_input(x=x, w=w)
    report = g.profile(repeat=3, clock="thread")
    assert [r.name for r in report.rows] == ["relu0", "add0", "relu1"]
    assert all(r.time_us >= 0 for r in report.rows)
    with pytest.raises(EmberValueError, match="'thread', 'wall'"):
        g.profile(repeat=1, clock="cycles")


def test_debug_mode_records_runs(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib, debug=True)
    x, w = data()
    for _ in range(4):
        g.run(x=x, w=w)
    report = g.profile(repeat=0)
    assert report.repeat == 4 and len(report.rows) == 3
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)


def test_benchmark(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    x, w = data()
    res = g.benchmark(cpu(0), repeat=3, number=2, x=x, w=w)
    assert len(res.results) == 3 and res.mean > 0 and res.median > 0 and res.std >= 0
    e2e = g.benchmark(cpu(0), repeat=2, number=2, end_to_end=True)
    assert len(e2e.results) == 2 and e2e.mean > 0
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)


def test_wrapper_argument_errors(kernel_lib: Module) -> None:
    with pytest.raises(TypeError, match="host module"):
        GraphExecutor(three_node_graph().to_json())
    with pytest.raises(TypeError, match="wraps a graph executor Module"):
        GraphExecutor(42)  # type: ignore[arg-type]


def test_reload_library_from_path(kernels_so: object) -> None:
    lib = load_module(str(kernels_so))
    g = GraphExecutor(three_node_graph().to_json(), lib)
    x, w = data()
    g.run(x=x, w=w)
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)


def test_debug_get_output_runs_up_to_the_node(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    x, w = data()
    g.set_input(x=x, w=w)
    np.testing.assert_array_equal(g.debug_get_output("relu0").numpy(), np.maximum(x, 0))
    add0 = g.debug_get_output(3)
    np.testing.assert_allclose(add0.numpy(), np.maximum(x, 0) + w, rtol=1e-6)
    # relu1 reuses relu0's storage; the copy taken above is not affected by later nodes.
    g.run()
    np.testing.assert_allclose(add0.numpy(), np.maximum(x, 0) + w, rtol=1e-6)
    with pytest.raises(ExecutorError, match="no node named 'conv'"):
        g.debug_get_output("conv")
    with pytest.raises(ExecutorError, match="has 1 output"):
        g.debug_get_output("add0", 1)


def test_refuses_heterogeneous_graph(kernel_lib: Module) -> None:
    graph = three_node_graph()
    hetero = GraphJSON.create(
        graph.nodes, graph.heads, graph.shape, graph.dltype, graph.storage_id, [1, 1, 2, 1, 1]
    )
    with pytest.raises(ExecutorError, match="heterogeneous"):
        GraphExecutor(hetero, kernel_lib)
    same = GraphJSON.create(
        graph.nodes, graph.heads, graph.shape, graph.dltype, graph.storage_id, [1] * 5
    )
    assert GraphExecutor(same, kernel_lib).get_num_outputs() == 1


def test_zero_size_and_identity_graphs_of_other_dtypes(kernel_lib: Module) -> None:
    import ml_dtypes

    nodes = [Node("null", "x"), op("r", "k_relu", [NodeEntry(0)])]
    empty = GraphJSON.create(nodes, [NodeEntry(1)], [[0, 3], [0, 3]], ["float32"] * 2)
    g = GraphExecutor(empty, kernel_lib)
    g.run(x=np.zeros((0, 3), np.float32))
    assert g.get_output(0).shape == (0, 3)
    for dtype, value in [
        ("bool", np.array([True, False])),
        ("bfloat16", np.array([1.5, -2], ml_dtypes.bfloat16)),
        ("int64", np.array([1 << 40, -3])),
    ]:
        ident = GraphJSON.create([Node("null", "x")], [NodeEntry(0)], [[2]], [dtype])
        g = GraphExecutor(ident, kernel_lib)
        g.run(x=value)
        out = g.get_output(0)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out.numpy(), value)


def test_set_input_zero_copy(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    x, w = data()
    xs = nd_array(x)
    g.set_input_zero_copy("x", xs)
    g.set_input("w", w)
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)
    assert g.get_input("x").data_ptr == xs.data_ptr
    xs.copyfrom(-x)  # the executor sees writes to the caller's array
    g.run()
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(-x, w), rtol=1e-6)
    with pytest.raises(EmberValueError, match=r"expects shape \(2, 3\)"):
        g.set_input_zero_copy("x", nd_array(np.zeros(3, np.float32)))
    with pytest.raises(TypeError, match="needs an NDArray"):
        g.set_input_zero_copy("x", x)  # type: ignore[arg-type]


def test_set_input_zero_copy_refuses_shared_storage(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph([0, 1, 0, 2, 0]).to_json(), kernel_lib)
    with pytest.raises(ExecutorError, match="shares storage 0 with entries \\[2, 4\\]"):
        g.set_input_zero_copy("x", nd_array(np.zeros((2, 3), np.float32)))


def test_set_input_zero_copy_with_flattened_and_copy_users(kernel_lib: Module) -> None:
    nodes = [
        Node("null", "x"),
        op("dbl", "k_double_flat", [NodeEntry(0)], flat=1),
        op("cp", "__copy", [NodeEntry(0)]),
    ]
    graph = GraphJSON.create(nodes, [NodeEntry(1), NodeEntry(2)], [[2, 2]] * 3, ["float32"] * 3)
    g = GraphExecutor(graph, kernel_lib)
    xs = nd_array(np.arange(4, dtype=np.float32).reshape(2, 2))
    g.set_input_zero_copy(0, xs)
    g.run()
    np.testing.assert_array_equal(g.get_output(0).numpy(), 2 * xs.numpy())
    np.testing.assert_array_equal(g.get_output(1).numpy(), xs.numpy())


def test_set_input_after_zero_copy_writes_the_callers_array(kernel_lib: Module) -> None:
    g = GraphExecutor(three_node_graph().to_json(), kernel_lib)
    xs = nd_array(np.zeros((2, 3), np.float32))
    g.set_input_zero_copy("x", xs)
    x, w = data()
    g.run(x=x, w=w)  # set_input copies into the rebound memory, i.e. into xs
    np.testing.assert_array_equal(xs.numpy(), x)
    np.testing.assert_allclose(g.get_output(0).numpy(), reference(x, w), rtol=1e-6)
