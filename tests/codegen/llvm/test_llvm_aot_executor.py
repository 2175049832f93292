"""tests/executor/test_aot_executor.py for target ``llvm``: the run function and kernels
in one LLVM object, the metadata as C, linked together by the loading process."""

from __future__ import annotations

import pytest
from llvm_build import e2e_suite

globals().update(e2e_suite("test_aot_executor", ("llvm",), folder="executor"))

pytestmark = pytest.mark.cc
