"""tests/executor/test_aot_executor.py for target ``llvm``: the run function and kernels
in one LLVM object, the metadata as C, linked together by the loading process."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

# call_cpacked and run-time index checks have no LLVM lowering yet (issue 13); the
# unpacked convention is covered by every other test of the module
globals().update(
    e2e_suite(
        "test_aot_executor",
        ("llvm",),
        folder="executor",
        skip={
            "test_every_allowed_calling_convention_matches_the_graph_executor",
            # its SqueezeNet case uses cpacked and BERT gathers (index checks); the llvm
            # models suite (test_llvm_e2e_models.py) covers models for llvm
            "test_models_are_bitwise_identical_under_both_executors",
        },
    )
)

pytestmark = pytest.mark.cc
