"""The preview training optimizers (Adagrad, Momentum, Adam) as update formulas, against
onnx's reference (onnxruntime has no kernel for them): R and T constant or fed at run
time, one or several parameter groups, the first step (T = 0)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.errors import FrontendError
from ember.testing import run_onnx_compiled

from .conftest import assert_close, make_model

TRAINING = "ai.onnx.preview.training"
RNG = np.random.default_rng(23)
STATES = {"Adagrad": ["H"], "Momentum": ["V"], "Adam": ["V", "H"]}
ATTRS = {
    "Adagrad": {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01},
    "Momentum": {"alpha": 0.9, "beta": 0.5, "mode": "standard", "norm_coefficient": 0.01},
    "Nesterov": {"alpha": 0.9, "beta": 0.5, "mode": "nesterov", "norm_coefficient": 0.01},
    "Adam": {"alpha": 0.9, "beta": 0.8, "epsilon": 1e-3, "norm_coefficient": 0.01},
}


def _model(op: str, shapes: list[tuple[int, ...]], attrs: dict, const_rt: np.ndarray | None):
    kinds = ["X", "G", *STATES[op]]
    ins = ["R", "T"] + [f"{k}{i}" for k in kinds for i in range(len(shapes))]
    outs = [f"{k}{i}_new" for k in ["X", *STATES[op]] for i in range(len(shapes))]
    node = helper.make_node(op, ins, outs, domain=TRAINING, **attrs)
    specs = {f"{k}{i}": ("float32", s) for k in kinds for i, s in enumerate(shapes)}
    inits = None
    if const_rt is None:
        specs = {"R": ("float32", ()), "T": ("int64", ()), **specs}
    else:
        inits = {"R": np.array(0.1, np.float32), "T": const_rt}
    model = make_model([node], specs, outs, inits, opset=21, extra_opsets={TRAINING: 1})
    return model, specs


def _feeds(specs: dict) -> dict[str, np.ndarray]:
    feeds = {}
    for name, (dtype, shape) in specs.items():
        if name == "R":
            feeds[name] = np.array(0.1, np.float32)
        elif name == "T":
            feeds[name] = np.array(3, np.int64)
        elif name.startswith("H"):
            feeds[name] = RNG.uniform(0.1, 1.0, shape).astype(dtype)
        else:
            feeds[name] = RNG.standard_normal(shape).astype(dtype)
    return feeds


def _want(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return [np.asarray(v, np.float32) for v in ReferenceEvaluator(model).run(None, feeds)]


@pytest.mark.parametrize("name", list(ATTRS))
@pytest.mark.parametrize("shapes", [[(4,)], [(1,), (2, 3)]])
@pytest.mark.parametrize("step", [None, 0, 5])
def test_optimizer_matches_onnx_reference(run_ember, name: str, shapes, step) -> None:
    op = "Momentum" if name == "Nesterov" else name
    const = None if step is None else np.array(step, np.int64)
    model, specs = _model(op, shapes, ATTRS[name], const)
    feeds = _feeds(specs)
    assert_close(run_ember(model, feeds), _want(model, feeds), rtol=1e-4, atol=1e-6)


@pytest.mark.cc
@pytest.mark.parametrize("name", ["Adagrad", "Nesterov", "Adam"])
@pytest.mark.parametrize("step", [None, 0])
def test_compiled_optimizer(name: str, step) -> None:
    op = "Momentum" if name == "Nesterov" else name
    const = None if step is None else np.array(step, np.int64)
    model, specs = _model(op, [(3,), (2, 2)], ATTRS[name], const)
    feeds = _feeds(specs)
    assert_close(run_onnx_compiled(model, feeds), _want(model, feeds), rtol=1e-4, atol=1e-6)


def test_uneven_groups_are_reported(run_ember) -> None:
    node = helper.make_node("Adagrad", ["R", "T", "X", "G"], ["X_new"], domain=TRAINING)
    specs = {"R": ("float32", ()), "T": ("int64", ()), "X": ("float32", (2,))}
    specs["G"] = ("float32", (2,))
    model = make_model([node], specs, ["X_new"], opset=21, extra_opsets={TRAINING: 1})
    with pytest.raises(FrontendError, match="groups"):
        run_ember(model, _feeds(specs))


@pytest.mark.parametrize("op", ["Adagrad", "Adam"])
def test_schema_defaults(run_ember, op: str) -> None:
    model, specs = _model(op, [(5,)], {}, np.array(2, np.int64))
    feeds = _feeds(specs)
    feeds["H0"] = np.zeros(5, np.float32)  # a tiny state: the default epsilon shows
    feeds["G0"] = feeds["G0"] * np.float32(1e-5)
    assert_close(run_ember(model, feeds), _want(model, feeds), rtol=1e-4, atol=1e-6)
