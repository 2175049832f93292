"""RNN, GRU and LSTM against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from .nn_check import check_node, rand
except ImportError:
    from nn_check import check_node, rand  # type: ignore[no-redef]

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, INP, HID = 5, 3, 4, 6


def _run(
    op: str,
    attrs: dict[str, Any],
    with_bias: bool = True,
    with_state: bool = False,
    lens: list[int] | None = None,
    layout: int = 0,
    dtype: str = "float32",
    peephole: bool = False,
) -> None:
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    g = GATES[op]
    x = rand((BATCH, SEQ, INP) if layout else (SEQ, BATCH, INP), dtype)
    params: dict[str, np.ndarray] = {
        "w": rand((dirs, g * HID, INP), dtype, 1) * 0.5,
        "r": rand((dirs, g * HID, HID), dtype, 2) * 0.5,
    }
    order = ["x", "w", "r", "", "", "", "", ""]
    if with_bias:
        params["b"] = rand((dirs, 2 * g * HID), dtype, 3) * 0.5
        order[3] = "b"
    if lens is not None:
        params["lens"] = np.array(lens, np.int32)
        order[4] = "lens"
    state_shape = (BATCH, dirs, HID) if layout else (dirs, BATCH, HID)
    if with_state:
        params["h0"] = rand(state_shape, dtype, 4)
        order[5] = "h0"
        if op == "LSTM":
            params["c0"] = rand(state_shape, dtype, 5)
            order[6] = "c0"
    if peephole:
        params["p"] = rand((dirs, 3 * HID), dtype, 6)
        order[7] = "p"
    while order[-1] == "":
        order.pop()
    outputs = 3 if op == "LSTM" else 2
    all_attrs = {"hidden_size": HID, "layout": layout, **attrs}
    check_node(
        op,
        {"x": x},
        all_attrs,
        params,
        opset=14,
        outputs=outputs,
        input_order=order,
        # ORT's CPU kernels reject batch-major layout and double GRU/LSTM
        reference=layout == 1 or (dtype == "float64" and op != "RNN"),
    )


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_directions(op: str, direction: str) -> None:
    _run(op, {"direction": direction})
    _run(op, {"direction": direction}, with_bias=False, with_state=True)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout_1_and_float64(op: str) -> None:
    _run(op, {"direction": "bidirectional"}, with_state=True, layout=1)
    _run(op, {}, dtype="float64")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_sequence_lens(op: str, direction: str) -> None:
    _run(op, {"direction": direction}, lens=[5, 2, 4], with_state=True)
    _run(op, {"direction": direction}, lens=[SEQ] * BATCH)


def test_gru_linear_before_reset_and_clip() -> None:
    _run("GRU", {"linear_before_reset": 1}, with_state=True)
    _run("GRU", {"clip": 0.5, "direction": "bidirectional"})


def test_lstm_peepholes_input_forget_activations() -> None:
    _run("LSTM", {}, peephole=True, with_state=True)
    _run("LSTM", {"input_forget": 1})
    acts = {
        "activations": ["HardSigmoid", "Tanh", "Relu"],
        "activation_alpha": [0.3],
        "activation_beta": [0.4],
    }
    _run("LSTM", acts)
    _run("RNN", {"activations": ["LeakyRelu"], "activation_alpha": [0.2]})


@pytest.mark.parametrize(
    "acts",
    [
        ["Elu", "Softsign", "Softplus"],
        ["ScaledTanh", "Affine", "ThresholdedRelu"],
    ],
)
def test_lstm_more_activations(acts: list[str]) -> None:
    _run("LSTM", {"activations": acts, "activation_alpha": [0.7, 0.5], "activation_beta": [1.2]})
    _run("LSTM", {"activations": acts})  # every alpha/beta at its default
