"""The type rules and helpers of ember.ir.ops.quant that fuse_qdq's C kernels rely on."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import TensorType, Var, call, const, evaluate
from ember.ir.expr import Function
from ember.ir.ops.quant import row_broadcast


@pytest.mark.parametrize(
    ("a", "b", "out", "want"),
    [
        ((1, 4, 3, 3), (1, 4, 1, 1), (1, 4, 3, 3), (4, 9, 2)),  # an SE scale: b per row of 9
        ((2, 1), (2, 5), (2, 5), (2, 5, 1)),  # a per row
        ((3,), (), (3,), (1, 3, 2)),  # a scalar: one row
        ((2, 3), (2, 3), (2, 3), (1, 6, 0)),  # both whole
        ((2, 3), (3,), (2, 3), None),  # constant along the leading axis: not rows
        ((1, 4, 3, 3), (1, 1, 3, 3), (1, 4, 3, 3), None),  # a spatial mask
        ((2, 1), (1, 3), (2, 3), None),  # both broadcast
    ],
)
def test_row_broadcast(a, b, out, want):
    assert row_broadcast(a, b, out) == want


def test_table_int8_type_and_reference():
    """``quantized_table_int8`` indexes by the byte's bits (int8 -1 reads entry 255) and
    refuses a table that is not 256 bytes."""
    x = Var("x", TensorType((4,), "int8"))
    table = np.arange(256, dtype=np.uint8)[::-1].copy()
    body = call("quantized_table_int8", x, const(table))
    assert body.tensor_type == TensorType((4,), "uint8")
    (out,) = evaluate(Function((x,), body), [np.array([0, 1, -1, -128], np.int8)])
    np.testing.assert_array_equal(out, [255, 254, 0, 127])
    with pytest.raises(IRError, match="256 entries"):
        call("quantized_table_int8", x, const(np.zeros(16, np.uint8)))
