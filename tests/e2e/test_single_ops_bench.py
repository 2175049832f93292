"""benchmarks/single_ops.py works: every case builds an ONNX model that onnxruntime runs
(its output's shape left to inference), and a run prints its table. No timing is
asserted."""

import importlib.util
import sys
from pathlib import Path

import pytest

from ember.testing import run_onnxruntime

BENCH = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/single_ops.py loaded by file path (its folder joins sys.path)."""
    spec = importlib.util.spec_from_file_location("ember_bench_single_ops", BENCH / "single_ops.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_every_case_is_a_valid_model_onnxruntime_runs(bench):
    names = [case.name for case in bench.CASES]
    assert len(names) == len(set(names))
    for case in bench.CASES:
        model, inputs = bench.make_case(case)
        (out,) = run_onnxruntime(model, inputs)[:1]
        assert out.size > 0, case.name


@pytest.mark.cc
def test_a_run_prints_the_table(bench, capsys):
    assert bench.main(["--only", "pow3,argmax", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert rows[0].split("|")[1].strip() == "case" and len(rows) == 4
    assert bench.main(["--only", "nothing-like-this"]) == 2
