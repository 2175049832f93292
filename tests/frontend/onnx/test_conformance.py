"""The official ONNX node test cases of the issue's ops pass through importer + evaluator.

One test per op (so a red op is visible by name); the whole sweep takes a few seconds,
most of it onnx generating the cases once per process.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

_RUNNER = Path(__file__).resolve().parents[3] / "benchmarks" / "onnx_conformance.py"


def _load_runner() -> ModuleType:
    name = "ember_onnx_conformance"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


oc = _load_runner()


@pytest.mark.parametrize("op", oc.ISSUE_OPS)
def test_issue_op_cases_pass(op):
    cases = oc.select_cases([op])
    results = oc.run(cases, "reference")
    assert results, f"onnx ships no node test case for {op}"
    bad = [
        f"{r.case} [{r.status}] {r.detail}" for r in results if r.status not in ("pass", "excluded")
    ]
    assert not bad, f"{len(bad)} of {len(results)} {op} cases do not pass:\n" + "\n".join(bad)


def test_every_named_exclusion_is_a_real_case():
    names = {c.name for c in oc.collect_cases()}
    assert set(oc.EXCLUDED) <= names
    for _pattern, reason in oc.EXCLUDED_PATTERNS:
        assert reason


def test_a_wrong_mode_is_reported_as_failures_not_an_abort():
    cases = oc.select_cases(["Relu", "Size"])

    def off_by_one(model, inputs):
        return [np.asarray(v) + 1 for v in oc.run_reference(model, inputs)]

    def crashes(model, inputs):
        raise RuntimeError("boom")

    wrong = [oc.run_case(c, off_by_one) for c in cases]
    assert wrong and all(r.status == "fail" for r in wrong)
    crashed = [oc.run_case(c, crashes) for c in cases]
    assert all(r.status == "error" and "boom" in r.detail for r in crashed)
    table = oc.format_table(wrong + crashed, verbose=True)
    assert "Relu" in table and "overall: 0/" in table and "not passing:" in table


def test_shape_arguments_are_baked_in_as_constants():
    (case,) = [c for c in oc.collect_cases() if c.name == "test_unsqueeze_axis_0"]
    inputs, _ = case.data_sets[0]
    names = [vi.name for vi in case.model.graph.input]
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs, strict=True)}
    static = oc.static_inputs(case.model, feeds)
    assert static == ["axes"]
    model, runtime = oc.bake_inputs(case.model, feeds, static)
    assert list(runtime) == ["x"]
    assert [t.name for t in model.graph.initializer] == ["axes"]


def test_command_line_filters(capsys):
    code = oc.main(["--ops", "Shape,Size", "-k", "test_s"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Shape" in out and "Size" in out and "overall:" in out


@pytest.mark.parametrize("suite", oc.MODEL_SUITES)
def test_shipped_model_suites_pass(suite):
    # PyTorch-exported models and small model tests onnx ships with their data.
    results = oc.run(oc.collect_model_cases(suite), "reference")
    assert results
    bad = [
        f"{r.case} [{r.status}] {r.detail}" for r in results if r.status not in ("pass", "excluded")
    ]
    assert not bad, f"{len(bad)} {suite} cases do not pass:\n" + "\n".join(bad)


def test_unfrozen_mode_feeds_shape_operands_at_run_time():
    cases = [c for c in oc.select_cases(["Slice"]) if c.name == "test_slice"]
    frozen = oc.run(cases, "reference")
    unfrozen = oc.run(cases, f"reference{oc.UNFROZEN}")
    assert [r.status for r in frozen] == ["pass"]
    assert unfrozen[0].status == "error" and "must be constant" in unfrozen[0].detail


def test_tolerances_are_the_cases_own():
    case = oc.select_cases(["Relu"])[0]
    assert oc.tolerances(np.dtype("float32"), case) == (case.rtol, case.atol)
