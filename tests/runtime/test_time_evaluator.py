"""time_evaluator: TVM semantics, the C loop for C functions and the Python loop otherwise."""

from __future__ import annotations

import pytest
from runtime_test_util import build_library

import ember
import ember.runtime as rt
from ember.errors import EmberValueError, FFIError
from ember.runtime.time_evaluator import BenchmarkResult

C_SOURCE = r"""
static int64_t g_calls = 0;
EMBER_DLL int32_t count(EMBER_ARGS) { g_calls += args[0].v_int64; return 0; }
EMBER_DLL int32_t get_count(EMBER_ARGS) {
  ret->v_int64 = g_calls; *ret_code = EMBER_INT; g_calls = 0; return 0;
}
EMBER_DLL int32_t fail(EMBER_ARGS) { EmberAPISetLastError("fail: always"); return -1; }
"""


@pytest.mark.cc
def test_c_loop_counts_calls_exactly(tmp_path):
    mod = build_library(tmp_path, C_SOURCE, "timing")
    mod["get_count"]()
    timer = mod.time_evaluator("count", ember.cpu(0), number=7, repeat=3)
    assert timer.uses_c_loop
    res = timer(1)
    assert len(res.results) == 3 and all(r >= 0 for r in res.results)
    assert mod["get_count"]() == 1 + 7 * 3  # warm-up + number * repeat


@pytest.mark.cc
def test_c_loop_grows_number_until_min_repeat_ms(tmp_path):
    mod = build_library(tmp_path, C_SOURCE, "timing2")
    mod["get_count"]()
    res = mod.time_evaluator("count", ember.cpu(0), number=1, repeat=2, min_repeat_ms=5)(1)
    assert mod["get_count"]() > 1000  # a no-op needs many calls to last 5 ms
    assert len(res.results) == 2 and res.mean < 1e-3


@pytest.mark.cc
def test_c_loop_reports_errors(tmp_path):
    mod = build_library(tmp_path, C_SOURCE, "timing3")
    with pytest.raises(FFIError, match="fail: always"):
        mod.time_evaluator("fail", ember.cpu(0))()


def test_python_loop_semantics():
    calls = []
    mod = rt.PythonModule({"f": lambda x: calls.append(x)})
    timer = mod.time_evaluator("f", ember.cpu(0), number=4, repeat=2)
    assert not timer.uses_c_loop
    res = timer("a")
    assert len(calls) == 1 + 4 * 2 and set(calls) == {"a"}
    assert len(res.results) == 2
    calls.clear()
    mod.time_evaluator("f", ember.cpu(0), number=1, repeat=1, min_repeat_ms=2)(0)
    assert len(calls) > 10


def test_benchmark_result_statistics():
    res = BenchmarkResult((1.0, 2.0, 6.0))
    assert res.mean == 3.0 and res.median == 2.0 and res.min == 1.0 and res.max == 6.0
    assert res.std == pytest.approx(((4 + 1 + 9) / 3) ** 0.5)
    assert BenchmarkResult((5.0,)).std == 0.0
    assert "mean" in str(res)


def test_bad_parameters():
    mod = rt.PythonModule({"f": lambda: None})
    with pytest.raises(EmberValueError):
        mod.time_evaluator("f", ember.cpu(0), number=0)
