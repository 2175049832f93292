"""Helpers of the back-end tests: small ONNX models, and a run in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import ember
from ember.backends.onednn import capi
from ember.testing.onnx_models import build_model, node

ROOT = Path(ember.__file__).resolve().parent.parent

FRESH = """
import importlib, json, sys
import numpy as np
cfg = json.loads(sys.argv[1])
exec(cfg["prelude"])
for name in cfg["backends"]:
    importlib.import_module(name)
import ember
dev = ember.cpu(0)
top = ember.load_module(cfg["lib"])["default"](dev)
ex = ember.GraphExecutor(top) if cfg["executor"] == "graph" else ember.AotExecutor(top)
for k, v in np.load(cfg["inputs"]).items():
    ex.set_input(k, v)
ex.run()
np.save(cfg["out"], ex.get_output(0).numpy())
"""


def run_fresh(
    lib: Path,
    inputs: dict[str, np.ndarray],
    backends: list[str],
    executor: str = "graph",
    prelude: str = "",
) -> np.ndarray | subprocess.CompletedProcess[str]:
    """Load the exported ``lib`` in a NEW Python process (importing only ``backends``), run
    it once and return output 0; the finished process when it failed."""
    npz, out = lib.with_suffix(".in.npz"), lib.with_suffix(f".{executor}.out.npy")
    np.savez(npz, **inputs)
    cfg = {"lib": str(lib), "inputs": str(npz), "out": str(out), "backends": backends}
    cfg.update(executor=executor, prelude=prelude)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", FRESH, json.dumps(cfg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        return proc
    return np.load(out)


def onednn_available() -> bool:
    """Whether the onednn wheel's libdnnl can be loaded here."""
    try:
        capi.library()
    except ember.errors.EmberError:
        return False
    return True


# CI installs onednn (the test extra): there a library that cannot load is a failure
needs_onednn = pytest.mark.skipif(
    not onednn_available() and not os.environ.get("CI"),
    reason="the onednn wheel is not installed (pip install onednn)",
)


def mixed_model(seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv+bias+Relu -> Flatten -> Gemm(transB)+bias -> Relu -> MatMul -> Softmax."""
    rng = np.random.default_rng(seed)
    inits = {
        "w": rng.standard_normal((8, 3, 3, 3)).astype("float32") * 0.3,
        "b": rng.standard_normal((8,)).astype("float32"),
        "g": rng.standard_normal((32, 8 * 8 * 8)).astype("float32") * 0.05,
        "gb": rng.standard_normal((32,)).astype("float32"),
        "m": rng.standard_normal((32, 10)).astype("float32") * 0.2,
    }
    nodes = [
        node("Conv", ["x", "w", "b"], "c", pads=[1, 1, 1, 1]),
        node("Relu", ["c"], "r"),
        node("Flatten", ["r"], "f"),
        node("Gemm", ["f", "g", "gb"], "h", transB=1),
        node("Relu", ["h"], "hr"),
        node("MatMul", ["hr", "m"], "o"),
        node("Softmax", ["o"], "y", axis=-1),
    ]
    model = build_model(nodes, {"x": ("float32", (2, 3, 8, 8))}, ["y"], inits)
    x = rng.standard_normal((2, 3, 8, 8)).astype("float32")
    return model, {"x": x}
