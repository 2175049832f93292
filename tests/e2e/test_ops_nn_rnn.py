"""Compiled recurrent layers (one input projection + the nn.recurrence kernel) against
onnxruntime: every cell, direction and option the kernel has a code path for, at sizes
where R packs into blocks with and without padding. One model (one C compile) holds many
nodes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import helper

from ember.frontend import from_onnx
from ember.ir import evaluate
from ember.testing import assert_matches_onnxruntime, build_model, run_onnx_compiled

pytestmark = pytest.mark.cc

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


class _Model:
    """Recurrent nodes reading one X, their weights initializers (or graph inputs)."""

    def __init__(self, seq: int, batch: int, inp: int, seed: int, dtype: str = "float32") -> None:
        self.rng = np.random.default_rng(seed)
        self.dtype = dtype
        self.seq, self.batch = seq, batch
        self.inputs: dict[str, np.ndarray] = {"X": self.rand((seq, batch, inp), 1.0)}
        self.inits: dict[str, np.ndarray] = {}
        self.nodes: list[Any] = []
        self.outs: dict[str, str] = {}

    def rand(self, shape: tuple[int, ...], scale: float) -> np.ndarray:
        return (self.rng.standard_normal(shape) * scale).astype(self.dtype)

    def add(
        self,
        op: str,
        hidden: int,
        dirs: int = 1,
        weights_as_inputs: bool = False,
        extras: tuple[str, ...] = (),
        **attrs: Any,
    ) -> None:
        """A node named after its position; ``extras`` adds sequence_lens, h0, c0, P."""
        name = f"n{len(self.nodes)}"
        g, inp = GATES[op], self.inputs["X"].shape[2]
        into = self.inputs if weights_as_inputs else self.inits
        into[f"{name}_W"] = self.rand((dirs, g * hidden, inp), 0.5)
        into[f"{name}_R"] = self.rand((dirs, g * hidden, hidden), 0.5 / np.sqrt(hidden / 4))
        into[f"{name}_B"] = self.rand((dirs, 2 * g * hidden), 0.3)
        names = ["X", f"{name}_W", f"{name}_R", f"{name}_B", "", "", "", ""]
        state = (dirs, self.batch, hidden)
        values = {
            "lens": lambda: np.array([self.seq, 1, 3][: self.batch], np.int32),
            "h0": lambda: self.rand(state, 0.5),
            "c0": lambda: self.rand(state, 0.5),
            "P": lambda: self.rand((dirs, 3 * hidden), 0.5),
        }
        for k, extra in enumerate(("lens", "h0", "c0", "P"), start=4):
            if extra in extras:
                names[k] = f"{name}_{extra}"
                self.inputs[names[k]] = values[extra]()
        while names[-1] == "":
            names.pop()
        outs = [f"{name}_Y", f"{name}_Yh"] + ([f"{name}_Yc"] if op == "LSTM" else [])
        direction = "bidirectional" if dirs == 2 else attrs.pop("direction", "forward")
        self.nodes.append(
            helper.make_node(
                op, names, outs, name=name, hidden_size=hidden, direction=direction, **attrs
            )
        )
        self.outs.update({o: self.dtype for o in outs})

    def model(self) -> Any:
        return build_model(self.nodes, self.inputs, self.outs, self.inits, opset=14)


def test_every_cell_and_option_against_onnxruntime() -> None:
    m = _Model(seq=6, batch=3, inp=5, seed=1)
    m.add("LSTM", 16, 2, extras=("lens", "h0", "c0", "P"))
    m.add("LSTM", 5, 1, direction="reverse", clip=0.7, input_forget=1)
    m.add(
        "LSTM",
        8,
        2,
        activations=["HardSigmoid", "Tanh", "Relu", "Sigmoid", "Softsign", "Tanh"],
        activation_alpha=[0.3],
        activation_beta=[0.4],
    )
    m.add("GRU", 16, 2, extras=("lens", "h0"))
    m.add("GRU", 5, 2, linear_before_reset=1, clip=1.5, extras=("h0",))
    m.add("GRU", 12, 1, direction="reverse", linear_before_reset=1, extras=("lens",))
    m.add("RNN", 24, 2, extras=("lens", "h0"))
    m.add("RNN", 5, 1, activations=["LeakyRelu"], activation_alpha=[0.2], clip=2.0)
    assert_matches_onnxruntime(m.model(), m.inputs, rtol=1e-4, atol=1e-5)


def test_weights_given_at_run_time_and_wide_layers() -> None:
    m = _Model(seq=4, batch=2, inp=7, seed=2)
    m.add("LSTM", 12, 2, weights_as_inputs=True, extras=("lens", "h0", "c0", "P"))
    m.add("GRU", 8, 2, weights_as_inputs=True)
    m.add("GRU", 8, 1, weights_as_inputs=True, linear_before_reset=1)
    m.add("LSTM", 64, 2, extras=("h0", "c0"))  # R in blocks of 64, the projection of 32
    m.add("GRU", 96, 1)  # segments of 192 and 96 columns
    assert_matches_onnxruntime(m.model(), m.inputs, rtol=1e-4, atol=1e-5)


def test_float64_matches_the_reference() -> None:
    m = _Model(seq=3, batch=2, inp=3, seed=3, dtype="float64")
    m.add("LSTM", 4, 2, extras=("lens", "h0", "c0", "P"))
    m.add("GRU", 4, 1, linear_before_reset=1)
    m.add("RNN", 4, 2)
    model = m.model()
    mod, params = from_onnx(model)
    want = evaluate(mod, {**m.inputs, **params})
    got = run_onnx_compiled(model, m.inputs)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_large_state_comes_from_the_heap() -> None:
    m = _Model(seq=2, batch=40, inp=3, seed=4)  # h and c: 40 x 512 floats, 80 KiB each
    m.add("LSTM", 512, 1, extras=("h0", "c0"))
    assert_matches_onnxruntime(m.model(), m.inputs, rtol=1e-4, atol=1e-5)
