"""tests/ops/test_nn_conv_f32.py's compiled tests for ``llvm`` and ``llvmjit``: the
16-channel kernel (ember_f32_conv_tile, on every layer) called from LLVM code in the runtime
library, outputs bitwise equal to ``c``'s (``tiles_suite.tile_suite``)."""

from __future__ import annotations

import pytest
from tiles_suite import tile_suite

globals().update(tile_suite("test_nn_conv_f32", {"test_compiled_kernel_matches_onnxruntime"}))

pytestmark = pytest.mark.cc
