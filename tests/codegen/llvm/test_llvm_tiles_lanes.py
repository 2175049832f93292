"""tests/ops/test_nn_conv_lanes.py's compiled tests for ``llvm`` and ``llvmjit``: the
position-lane kernel (ember_f32_lanes_tile) and the 16-channel one called from LLVM code in
the runtime library, outputs bitwise equal to ``c``'s (``tiles_suite.tile_suite``)."""

from __future__ import annotations

import pytest
from tiles_suite import tile_suite

globals().update(
    tile_suite("test_nn_conv_lanes", {"test_compiled_position_lanes_match_onnxruntime"})
)

pytestmark = pytest.mark.cc
