"""tests/e2e/test_conformance_compiled.py for the ``llvm`` and ``llvmjit`` targets, with the same
tolerances (``llvm_build.e2e_suite``: every ``ember.build`` of a test targets the kind).

The llvm back end does not lower run-time index checks yet (``tir.index_check``, issue 13):
the fast cases whose kernels need them must fail with that CompileError, so the list
stays honest and shrinks when the lowering lands."""

from __future__ import annotations

import re
import sys

import pytest
from llvm_build import E2E_KINDS, e2e_suite

globals().update(
    e2e_suite(
        "test_conformance_compiled",
        skip={"test_fast_case_compiles_and_matches", "test_issue_op_cases_pass_compiled"},
    )
)
C_TESTS = sys.modules["llvm_copy_test_conformance_compiled_" + "_".join(E2E_KINDS)]

pytestmark = pytest.mark.cc

#: cases with float16, bfloat16 or float8 tensors: the llvm back ends refuse those dtypes
#: with a CompileError (test_llvm_half.py), so the sweep counts them as known failures.
C_TESTS.KNOWN_FAILURES.update(
    {
        c.name: "the llvm back ends refuse float16/bfloat16/float8"
        for c in C_TESTS.oc.select_cases(C_TESTS.oc.ISSUE_OPS)
        if re.search(r"(?i)(float16|bfloat16|float8)", c.name)
    }
)

#: ops whose kernels check data-dependent indices at run time.
INDEX_CHECK_OPS = ("Gather", "GatherElements", "GatherND", "ScatterElements", "ScatterND")
#: fast cases whose kernels check data-dependent indices at run time.
NEEDS_INDEX_CHECKS = frozenset(
    n for n in C_TESTS.FAST_CASES if n.startswith(("test_gather", "test_scatter"))
)


@pytest.mark.parametrize("name", C_TESTS.FAST_CASES)
def test_fast_case_compiles_and_matches(name):
    case = C_TESTS._by_name()[name]
    result = C_TESTS.oc.run_case(case, C_TESTS.oc.run_compiled)
    if name in NEEDS_INDEX_CHECKS:
        assert result.status != "pass" and "not supported by the llvm back end" in result.detail
    else:
        assert result.status == "pass", f"{name} [{result.status}] {result.detail}"


@pytest.mark.slow
@pytest.mark.parametrize("op", [op for op in C_TESTS.oc.ISSUE_OPS if op not in INDEX_CHECK_OPS])
def test_issue_op_cases_pass_compiled(op):
    """The C suite's sweep of every case of ``op`` (the index-checking ops are left to the
    fast tier above, which pins how they fail)."""
    C_TESTS.test_issue_op_cases_pass_compiled(op)
