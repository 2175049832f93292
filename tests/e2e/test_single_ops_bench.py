"""benchmarks/single_ops.py works: every case builds an ONNX model that onnxruntime runs
(its output's shape left to inference), and a run prints its table. No timing is
asserted."""

import pytest
from bench_script import load_bench_script

from ember.testing import run_onnxruntime


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/single_ops.py loaded by file path."""
    return load_bench_script("single_ops", "ember_bench_single_ops", monkeypatch)


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
