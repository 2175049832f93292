"""benchmarks/parallel_budget.py: its reading of the generated C's parallel loops, and a
report on a tiny model (no timing asserted, only the report's shape)."""

import re
from pathlib import Path

import pytest
from bench_script import load_bench_script

BENCH = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def budget(monkeypatch):
    """benchmarks/parallel_budget.py loaded by file path (its folder joins sys.path)."""
    module = load_bench_script("parallel_budget", "ember_bench_budget", monkeypatch)
    return module


SOURCE = """\
static int32_t ember_pad_conv_unpacked(float* restrict p0, float* restrict out) {
  if (EmberBackendParallelFor(ember_pad_conv_par0, &ember_par0, (int64_t)34, 75, 0) != 0) {
    return -1;
  }
  if (EmberBackendParallelFor(ember_pad_conv_par1, &ember_par1, (int64_t)96, 3, 0) != 0) {
    return -1;
  }
  return 0;
}
EMBER_DLL int32_t ember_dyn_unpacked(float* restrict p0) {
  if (EmberBackendParallelFor(ember_dyn_par0, NULL, (int64_t)(n * 4), 8, 0) != 0) {
    return -1;
  }
  return 0;
}
static int32_t ember_small_unpacked(float* restrict p0) {
  return 0;
}
"""


def test_kernel_launches_reads_extent_and_grain_per_kernel(budget):
    found = budget.kernel_launches(SOURCE)
    assert set(found) == {"ember_pad_conv", "ember_dyn", "ember_small"}
    pad, conv = found["ember_pad_conv"]
    assert (pad.extent, pad.grain, conv.extent, conv.grain) == (34, 75, 96, 3)
    assert pad.threads(2) == 1 and conv.threads(2) == 2  # under two grains: inline
    (dyn,) = found["ember_dyn"]
    assert dyn.extent is None and dyn.threads(2) == 2
    assert found["ember_small"] == []


@pytest.mark.cc
def test_budget_reports_every_kernel_and_the_aot_overhead(budget, capsys):
    assert budget.main(["--models", "dense_autoencoder", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ember_")]
    assert len(rows) == 10  # the autoencoder's ten Gemm kernels
    # one: its widest Gemm runs in two halves (parallel.LOCAL_SPLIT_WORK)
    assert re.search(r"\b\d+ parallel launches per run at 2 threads", out)
    assert "Amdahl bound at 2 threads" in out and "AOT run" in out
