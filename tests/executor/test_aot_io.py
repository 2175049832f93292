"""The AOT executor's inputs and outputs: set_input's fast path, zero copy, get_output."""

import numpy as np
import pytest

import ember
from ember.errors import EmberTypeError, EmberValueError
from ember.ir import Function, IRModule, TensorType, Var, call
from ember.runtime.ndarray import from_numpy_view

pytestmark = pytest.mark.cc

DEV = ember.cpu(0)


def _module() -> tuple[IRModule, dict[str, np.ndarray]]:
    """relu(x + w) * y with a bound constant w."""
    x = Var("x", TensorType((4, 32), "float32"))
    w = Var("w", TensorType((4, 32), "float32"))
    y = Var("y", TensorType((4, 32), "float32"))
    body = call("multiply", call("relu", call("add", x, w)), y)
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(4, 32)}
    return IRModule.from_expr(Function((x, w, y), body)), params


def _executors() -> tuple[ember.AotExecutor, ember.GraphExecutor, dict[str, np.ndarray]]:
    mod, params = _module()
    aot = ember.load_artifacts(ember.build(mod, "c", params, executor="aot"), DEV)
    graph = ember.load_artifacts(ember.build(mod, "c", params), DEV)
    return (
        ember.AotExecutor(aot["default"](DEV)),
        ember.GraphExecutor(graph["default"](DEV)),
        params,
    )


def _inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal((4, 32)).astype("float32") for k in ("x", "y")}


def _graph_out(graph: ember.GraphExecutor, inputs: dict[str, np.ndarray]) -> np.ndarray:
    graph.set_input(**inputs)
    graph.run()
    return graph.get_output(0).numpy()


def test_set_input_copies_every_kind_of_value_and_matches_the_graph_executor_bitwise():
    aot, graph, _ = _executors()
    inputs = _inputs(0)
    x_strided = np.asfortranarray(inputs["x"])  # the fast path's copy takes any strides
    aot.set_input("x", x_strided)
    aot.set_input(1, inputs["y"].tolist())  # a list: converted on the checked path
    aot.run()
    np.testing.assert_array_equal(aot.get_output(0).numpy(), _graph_out(graph, inputs))
    inputs["x"][:] = 0  # the executor copied: the caller's array is not read by run
    aot.run()
    assert not np.array_equal(aot.get_output(0).numpy(), _graph_out(graph, inputs))


def test_set_input_still_refuses_what_the_checked_path_refuses():
    aot, _, _ = _executors()
    with pytest.raises(EmberValueError, match="expects shape"):
        aot.set_input("x", np.zeros((4, 32), "float64"))
    with pytest.raises(EmberValueError, match="expects shape"):
        aot.set_input("x", np.zeros((32, 4), "float32"))


def test_set_input_of_a_constant_never_writes_the_factorys_array():
    aot, _, params = _executors()
    index = aot.get_input_index(aot.module.metadata.params[0].name)
    before = aot.get_input(index).numpy()
    aot.set_input(index, np.full((4, 32), 3.0, "float32"))  # copy on write, then the copy
    aot.set_input(index, np.full((4, 32), 2.0, "float32"))
    np.testing.assert_array_equal(aot.get_input(index).numpy(), 2.0)
    fresh, _, _ = _executors()
    np.testing.assert_array_equal(fresh.get_input(index).numpy(), before)
    np.testing.assert_array_equal(before, params["w"])


def test_set_input_zero_copy_runs_on_the_callers_array():
    aot, graph, _ = _executors()
    inputs = _inputs(1)
    x = ember.nd.array(inputs["x"])
    aot.set_input_zero_copy("x", x)
    aot.set_input("y", inputs["y"])
    aot.run()
    np.testing.assert_array_equal(aot.get_output(0).numpy(), _graph_out(graph, inputs))
    x.copyfrom(inputs["y"])  # later writes to the array are what the next run reads
    aot.run()
    inputs["x"] = inputs["y"]
    np.testing.assert_array_equal(aot.get_output(0).numpy(), _graph_out(graph, inputs))
    aot.set_input("x", np.ones((4, 32), "float32"))  # set_input copies into it, as the graph's
    np.testing.assert_array_equal(x.numpy(), 1.0)


def test_set_input_zero_copy_refuses_what_it_cannot_share():
    aot, _, _ = _executors()
    with pytest.raises(EmberTypeError, match="needs an NDArray"):
        aot.set_input_zero_copy("x", np.zeros((4, 32), "float32"))
    with pytest.raises(EmberValueError, match="expects shape"):
        aot.set_input_zero_copy("x", ember.nd.array(np.zeros((4, 31), "float32")))
    raw = np.zeros(4 * 32 + 1, "float32")[1:].reshape(4, 32)  # 4 bytes off alignment
    with pytest.raises(EmberValueError, match="aligned"):
        aot.set_input_zero_copy("x", from_numpy_view(raw))
    const = aot.module.metadata.params[0].name
    with pytest.raises(EmberValueError, match="is a constant"):
        aot.set_input_zero_copy(const, ember.nd.array(np.zeros((4, 32), "float32")))


def test_get_output_hands_out_the_view_or_copies_into_out():
    aot, graph, _ = _executors()
    inputs = _inputs(2)
    aot.set_input(**inputs)
    aot.run()
    want = _graph_out(graph, inputs)
    (name,) = aot.module.get_output_names()
    view = aot.get_output(name)
    assert view is aot.get_output(0)  # the executor's array, not a copy
    out = np.empty((4, 32), "float32")
    assert aot.get_output(0, out=out) is out
    np.testing.assert_array_equal(out, want)
    aot.set_input("x", np.zeros((4, 32), "float32"))
    aot.run()
    inputs["x"] = np.zeros((4, 32), "float32")
    np.testing.assert_array_equal(view.numpy(), _graph_out(graph, inputs))  # overwritten
    np.testing.assert_array_equal(out, want)  # the copy is not
    with pytest.raises(EmberValueError, match="out has shape"):
        aot.get_output(0, out=np.empty((4, 31), "float32"))


def test_native_call_runs_the_model_as_a_c_caller_would():
    """native_call() hands out the run function's address and packed arguments; a call
    through them (here ctypes) writes the executor's outputs, bitwise its own run's."""
    import ctypes

    aot, _, _ = _executors()
    aot.set_input(**_inputs(3))
    aot.run()
    want = aot.get_output(0).numpy()
    aot.get_output(0).copyfrom(np.zeros((4, 32), "float32"))
    native = aot.module.native_call()
    assert native is not None
    address, args, _keep = native
    fn = ctypes.CFUNCTYPE(
        ctypes.c_int32, *[ctypes.c_void_p] * 2, ctypes.c_int32, *[ctypes.c_void_p] * 3
    )(address)
    assert fn(*args) == 0
    np.testing.assert_array_equal(aot.get_output(0).numpy(), want)
    aot.set_input(**_inputs(4))  # the prepared run (PreparedCall or ctypes) sees new inputs
    aot.run()
    assert not np.array_equal(aot.get_output(0).numpy(), want)


def test_runs_see_moved_inputs_with_and_without_the_accelerator(monkeypatch):
    """After its first checked run a run is one prepared call; moving an input (zero copy)
    prepares it again. Without the CPython extension the same runs go through ctypes."""
    from ember.runtime import fastcall

    for available in (True, False):
        if not available:
            monkeypatch.setattr(fastcall, "extension", lambda: None)
        aot, graph, _ = _executors()
        inputs = _inputs(5)
        aot.set_input(**inputs)
        aot.run()
        aot.run()
        np.testing.assert_array_equal(aot.get_output(0).numpy(), _graph_out(graph, inputs))
        moved = ember.nd.array(_inputs(6)["x"])
        aot.set_input_zero_copy("x", moved)
        aot.run()
        want = _graph_out(graph, {"x": moved.numpy(), "y": inputs["y"]})
        np.testing.assert_array_equal(aot.get_output(0).numpy(), want)
