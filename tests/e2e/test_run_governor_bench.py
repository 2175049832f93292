"""benchmarks/run_governor.py works: one short round on a tiny model prints the cores'
round trip and a row with the three configurations and the governor's choice. No timing
is asserted."""

import re
from pathlib import Path

import pytest
from bench_script import load_bench_script

from ember.runtime.threads import num_cores, pool_policy

BENCH = Path(__file__).parents[2] / "benchmarks"


@pytest.mark.cc
def test_run_governor_benchmark_prints_a_round(capsys, monkeypatch):
    if num_cores() < 2:
        pytest.skip("the benchmark compares 1 and 2 threads: this machine has one core")
    module = load_bench_script("run_governor", "ember_bench_gov", monkeypatch)
    try:
        module.main(["--models", "dense_autoencoder", "--rounds", "1", "--seconds", "0.02"])
    finally:
        pool_policy("adaptive", reset=True)
    out = capsys.readouterr().out
    assert re.search(r"round 1: CPU 0 <-> 1 round trip \d+ ns before, \d+ ns after", out)
    rows = [line for line in out.splitlines() if line.startswith("| dense_autoencoder")]
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert len(cells) == 7 and cells[-1] in ("pool", "alone")
    assert all(float(c) > 0 for c in cells[1:6])
