"""tests/ops/test_nn_conv_narrow.py's compiled tests for ``llvm`` and ``llvmjit``: the
kernels for blocks of 8 and 24 channels called from LLVM code in the runtime library,
outputs bitwise equal to ``c``'s (``tiles_suite.tile_suite``)."""

from __future__ import annotations

import pytest
from tiles_suite import tile_suite

globals().update(tile_suite("test_nn_conv_narrow", {"test_compiled_kernels_match_onnxruntime"}))

pytestmark = pytest.mark.cc
