"""Compiled control flow (If, Loop, Scan) against onnxruntime, in both executors: each op is
one kernel that branches or loops around calls of its bodies' compiled run functions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import ember
from ember.frontend import from_onnx
from ember.testing import run_onnxruntime

pytestmark = pytest.mark.cc
RNG = np.random.default_rng(7)
EXECUTORS = ["graph", "aot"]


def _vi(name: str, dtype: int, shape: list[int] | None) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, dtype, shape)


def _init(name: str, value: np.ndarray) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(value, name)


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "m", inputs, outputs, list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def run_compiled(model: onnx.ModelProto, feeds: dict, executor: str) -> list[np.ndarray]:
    """Build for the c target with ``executor`` and run once."""
    mod, params = from_onnx(model)
    arts = ember.build(mod, "c", params, executor=executor)
    dev = ember.cpu(0)
    module = ember.load_artifacts(arts, dev)["default"](dev)
    ex = ember.GraphExecutor(module) if executor == "graph" else ember.AotExecutor(module)
    for k, v in feeds.items():
        ex.set_input(k, v)
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


def check(model: onnx.ModelProto, feeds: dict, executor: str, tol: float = 1e-5) -> None:
    want = run_onnxruntime(model, feeds)
    got = run_compiled(model, feeds, executor)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# -- Scan: a small RNN ----------------------------------------------------------------


def rnn_scan(hidden: int = 8, feat: int = 5, steps: int = 6, **attrs) -> onnx.ModelProto:
    """h_t = tanh(x_t W + h U + b); outputs the last state and every state (Scan)."""
    body = h.make_graph(
        [
            h.make_node("MatMul", ["x_t", "W"], ["xw"]),
            h.make_node("MatMul", ["h_in", "U"], ["hu"]),
            h.make_node("Add", ["xw", "hu"], ["s"]),
            h.make_node("Add", ["s", "b"], ["sb"]),
            h.make_node("Tanh", ["sb"], ["h_out"]),
            h.make_node("Identity", ["h_out"], ["y"]),
        ],
        "step",
        [_vi("h_in", TP.FLOAT, [1, hidden]), _vi("x_t", TP.FLOAT, [1, feat])],
        [_vi("h_out", TP.FLOAT, [1, hidden]), _vi("y", TP.FLOAT, [1, hidden])],
    )
    node = h.make_node(
        "Scan", ["h0", "xs"], ["h_last", "hs"], body=body, num_scan_inputs=1, **attrs
    )
    axis = attrs.get("scan_input_axes", [0])[0]
    xs_shape = [steps, 1, feat] if axis == 0 else [1, steps, feat]
    out_axis = attrs.get("scan_output_axes", [0])[0]
    hs_shape = [steps, 1, hidden] if out_axis == 0 else [1, steps, hidden]
    inits = [
        _init("W", RNG.standard_normal((feat, hidden)).astype("float32") * 0.5),
        _init("U", RNG.standard_normal((hidden, hidden)).astype("float32") * 0.5),
        _init("b", RNG.standard_normal((1, hidden)).astype("float32") * 0.1),
    ]
    return _model(
        [node],
        [_vi("h0", TP.FLOAT, [1, hidden]), _vi("xs", TP.FLOAT, xs_shape)],
        [_vi("h_last", TP.FLOAT, [1, hidden]), _vi("hs", TP.FLOAT, hs_shape)],
        inits,
    )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_scan_rnn_matches_onnxruntime(executor: str) -> None:
    model = rnn_scan()
    feeds = {
        "h0": RNG.standard_normal((1, 8)).astype("float32"),
        "xs": RNG.standard_normal((6, 1, 5)).astype("float32"),
    }
    check(model, feeds, executor)


def test_scan_axes_and_directions() -> None:
    attrs = {
        "scan_input_axes": [1],
        "scan_input_directions": [1],
        "scan_output_axes": [1],
        "scan_output_directions": [1],
    }
    model = rnn_scan(**attrs)
    feeds = {
        "h0": RNG.standard_normal((1, 8)).astype("float32"),
        "xs": RNG.standard_normal((1, 6, 5)).astype("float32"),
    }
    check(model, feeds, "graph")


def test_scan_is_one_kernel_calling_its_body() -> None:
    mod, params = from_onnx(rnn_scan())
    lowered = ember.lower(mod, "c", params)
    kernels = [f.name for f in lowered.prim_funcs if not f.attrs.get("called_by_kernel")]
    assert kernels == ["ember_control_scan"]
    text = lowered.as_text()
    assert 'call_extern("int32", "ember_default_ctl0_run_model_unpacked"' in text
    assert "for ctl_t in range(int64(6))" in text  # a loop, not six copies of the body


# -- If: a data-dependent branch ------------------------------------------------------


def branchy_if() -> onnx.ModelProto:
    """y = relu(x) * w + 1 if sum(x) > 0 else sigmoid(x) - x, with w an initializer."""
    then_g = h.make_graph(
        [
            h.make_node("Relu", ["x"], ["r"]),
            h.make_node("Mul", ["r", "w"], ["rw"]),
            h.make_node("Add", ["rw", "one"], ["t_out"]),
        ],
        "then",
        [],
        [_vi("t_out", TP.FLOAT, [2, 3])],
    )
    else_g = h.make_graph(
        [h.make_node("Sigmoid", ["x"], ["s"]), h.make_node("Sub", ["s", "x"], ["e_out"])],
        "else",
        [],
        [_vi("e_out", TP.FLOAT, [2, 3])],
    )
    nodes = [
        h.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        h.make_node("Greater", ["total", "zero"], ["c"]),
        h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    inits = [
        _init("w", RNG.standard_normal((2, 3)).astype("float32")),
        _init("one", np.array(1.0, "float32")),
        _init("zero", np.array(0.0, "float32")),
    ]
    return _model(nodes, [_vi("x", TP.FLOAT, [2, 3])], [_vi("y", TP.FLOAT, [2, 3])], inits)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_data_dependent_if_matches_onnxruntime(executor: str, sign: float) -> None:
    x = (np.abs(RNG.standard_normal((2, 3))) * sign).astype("float32")
    check(branchy_if(), {"x": x}, executor)


# -- Loop: greedy decoding with an early stop -----------------------------------------

VOCAB, HID, MAX_LEN = 6, 8, 7


def greedy_loop(eos: int, trip_input: bool = False, seed: int = 3) -> onnx.ModelProto:
    """Greedy decoding: each step picks the argmax token, writes it into a preallocated
    buffer at position i, feeds its embedding back, and stops after ``eos``."""
    rng = np.random.default_rng(seed)
    body = h.make_graph(
        [
            h.make_node("MatMul", ["h_in", "Wo"], ["logits"]),
            h.make_node("ArgMax", ["logits"], ["tok"], axis=1, keepdims=1),  # [1, 1]
            h.make_node("Reshape", ["tok", "shape1"], ["tok1"]),
            h.make_node("Gather", ["E", "tok1"], ["emb"]),  # [1, HID]
            h.make_node("MatMul", ["h_in", "W"], ["hw"]),
            h.make_node("Add", ["hw", "emb"], ["pre"]),
            h.make_node("Tanh", ["pre"], ["h_out"]),
            h.make_node("Reshape", ["i", "shape11"], ["pos"]),
            h.make_node("ScatterElements", ["toks_in", "pos", "tok"], ["toks_out"], axis=1),
            h.make_node("Equal", ["tok1", "eos"], ["stop"]),
            h.make_node("Not", ["stop"], ["go"]),
            h.make_node("Reshape", ["go", "scalar"], ["cond_out"]),
        ],
        "step",
        [
            _vi("i", TP.INT64, []),
            _vi("cond_in", TP.BOOL, []),
            _vi("h_in", TP.FLOAT, [1, HID]),
            _vi("toks_in", TP.INT64, [1, MAX_LEN]),
        ],
        [
            _vi("cond_out", TP.BOOL, []),
            _vi("h_out", TP.FLOAT, [1, HID]),
            _vi("toks_out", TP.INT64, [1, MAX_LEN]),
        ],
    )
    trip = "m" if trip_input else "max_len"
    node = h.make_node("Loop", [trip, "", "h0", "toks0"], ["h_end", "tokens"], body=body)
    inits = [
        _init("Wo", rng.standard_normal((HID, VOCAB)).astype("float32")),
        _init("W", rng.standard_normal((HID, HID)).astype("float32") * 0.5),
        _init("E", rng.standard_normal((VOCAB, HID)).astype("float32")),
        _init("toks0", np.full((1, MAX_LEN), -1, "int64")),
        _init("eos", np.array([eos], "int64")),
        _init("shape1", np.array([1], "int64")),
        _init("shape11", np.array([1, 1], "int64")),
        _init("scalar", np.array([], "int64")),
        _init("max_len", np.array(MAX_LEN, "int64")),
    ]
    inputs = [_vi("h0", TP.FLOAT, [1, HID])]
    if trip_input:
        inputs.append(_vi("m", TP.INT64, []))
    outputs = [_vi("h_end", TP.FLOAT, [1, HID]), _vi("tokens", TP.INT64, [1, MAX_LEN])]
    return _model([node], inputs, outputs, inits)


def _eos_mid_sequence(h0: np.ndarray) -> int:
    """A token that first appears mid-sequence, so that decoding stops early."""
    tokens = run_onnxruntime(greedy_loop(eos=-1), {"h0": h0})[1][0]
    for k in range(2, MAX_LEN):
        if tokens[k] not in tokens[:k]:
            return int(tokens[k])
    pytest.skip("no token appears first mid-sequence for this seed")


@pytest.mark.parametrize("executor", EXECUTORS)
def test_greedy_decode_loop_stops_at_eos(executor: str) -> None:
    h0 = np.random.default_rng(11).standard_normal((1, HID)).astype("float32")
    eos = _eos_mid_sequence(h0)
    model = greedy_loop(eos)
    want = run_onnxruntime(model, {"h0": h0})
    assert (want[1] == -1).any(), "the reference stops early"
    check(model, {"h0": h0}, executor)


def test_loop_with_a_run_time_trip_count() -> None:
    h0 = np.random.default_rng(5).standard_normal((1, HID)).astype("float32")
    model = greedy_loop(eos=-1, trip_input=True)
    for m in (0, 3, MAX_LEN):
        check(model, {"h0": h0, "m": np.array(m, "int64")}, "graph")


def test_loop_scan_outputs_with_a_static_count() -> None:
    """Cumulative products as scan outputs of a Loop with a constant trip count."""
    body = h.make_graph(
        [
            h.make_node("Mul", ["p_in", "x"], ["p_out"]),
            h.make_node("Add", ["p_out", "p_in"], ["row"]),
            h.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "step",
        [_vi("i", TP.INT64, []), _vi("cond_in", TP.BOOL, []), _vi("p_in", TP.FLOAT, [3])],
        [_vi("cond_out", TP.BOOL, []), _vi("p_out", TP.FLOAT, [3]), _vi("row", TP.FLOAT, [3])],
    )
    node = h.make_node("Loop", ["n", "t", "p0"], ["p", "rows"], body=body)
    inits = [_init("n", np.array(4, "int64")), _init("t", np.array(True))]
    model = _model(
        [node],
        [_vi("p0", TP.FLOAT, [3]), _vi("x", TP.FLOAT, [3])],
        [_vi("p", TP.FLOAT, [3]), _vi("rows", TP.FLOAT, [4, 3])],
        inits,
    )
    feeds = {"p0": np.ones(3, "float32"), "x": np.array([0.5, 2.0, -1.0], "float32")}
    for executor in EXECUTORS:
        check(model, feeds, executor)


# -- nesting ----------------------------------------------------------------------------


def test_if_inside_a_scan_body() -> None:
    """Each step adds or subtracts its slice depending on the slice's sum (nested bodies)."""
    then_g = h.make_graph(
        [h.make_node("Add", ["s_in", "x_t"], ["a"])], "then", [], [_vi("a", TP.FLOAT, [4])]
    )
    else_g = h.make_graph(
        [h.make_node("Sub", ["s_in", "x_t"], ["d"])], "else", [], [_vi("d", TP.FLOAT, [4])]
    )
    body = h.make_graph(
        [
            h.make_node("ReduceSum", ["x_t"], ["tot"], keepdims=0),
            h.make_node("Greater", ["tot", "zero"], ["c"]),
            h.make_node("If", ["c"], ["s_out"], then_branch=then_g, else_branch=else_g),
            h.make_node("Mul", ["s_out", "s_out"], ["y"]),
        ],
        "step",
        [_vi("s_in", TP.FLOAT, [4]), _vi("x_t", TP.FLOAT, [4])],
        [_vi("s_out", TP.FLOAT, [4]), _vi("y", TP.FLOAT, [4])],
    )
    node = h.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1)
    model = _model(
        [node],
        [_vi("s0", TP.FLOAT, [4]), _vi("xs", TP.FLOAT, [5, 4])],
        [_vi("s", TP.FLOAT, [4]), _vi("ys", TP.FLOAT, [5, 4])],
        [_init("zero", np.array(0.0, "float32"))],
    )
    feeds = {"s0": np.zeros(4, "float32"), "xs": RNG.standard_normal((5, 4)).astype("float32")}
    for executor in EXECUTORS:
        check(model, feeds, executor)
