"""tests/executor/test_aot_executor.py for target ``llvm``: the run function and kernels
in one LLVM object, the metadata as C, linked together by the loading process."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from llvm_build import e2e_suite

import ember

# the models with run-time index checks too; the calling-convention test reads C source,
# its llvm form is below
globals().update(
    e2e_suite(
        "test_aot_executor",
        ("llvm",),
        folder="executor",
        skip={"test_every_allowed_calling_convention_matches_the_graph_executor"},
    )
)

pytestmark = pytest.mark.cc


@pytest.mark.parametrize("convention", ["unpacked", "cpacked"])
def test_every_allowed_calling_convention_matches_the_graph_executor_llvm(convention):
    c_suite = sys.modules["llvm_copy_test_aot_executor_llvm"]
    mod, params = c_suite._module()
    arts = ember.build(mod, "llvm", params, executor=f"aot -calling-convention={convention}")
    _, outs = c_suite._run(arts, "aot", c_suite._inputs())
    _, want = c_suite._run(ember.build(mod, "llvm", params), "graph", c_suite._inputs())
    assert all(np.array_equal(a, b) for a, b in zip(outs, want, strict=True))
    assert not any(a.file_name.endswith(".c") and b"ember_cpacked" in a.content for a in arts)
