"""docs/onnx_support.md's generated ops table matches the handler registry."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "conformance_support.py"


def _load():
    spec = importlib.util.spec_from_file_location("ember_conformance_support", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_generated_ops_table_has_not_drifted():
    # A fresh process: other tests register toy handlers into this one's registry.
    env = {**os.environ, "PYTHONPATH": str(_SCRIPT.parents[1])}
    done = subprocess.run(
        [sys.executable, str(_SCRIPT), "--check"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_failures_are_grouped_by_reason():
    support = _load()
    results = [
        {"suite": "node", "case": "test_a", "status": "pass", "detail": ""},
        {"suite": "node", "case": "test_b", "status": "unsupported",
         "detail": "- Unique (domain ai.onnx, opset 11, input dtype float32): no handler"},
        {"suite": "node", "case": "test_c", "status": "error",
         "detail": "CompileError: nn.matmul: float16 is not supported by the C code generator"},
    ]  # fmt: skip
    text = support.failures_section(results)
    assert "2 cases do not pass" in text
    assert "unsupported op Unique (ai.onnx)** (1): node/test_b" in text
    assert "float16/bfloat16 kernels" in text and "test_a" not in text
