"""linalg.det lowered to loop IR (an extern stage), interpreted and compared with numpy."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.testing.lowering import check_lowered, primitive


@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 4, 5, 5)])
def test_det(shape: tuple[int, ...]) -> None:
    x = Var("x", TensorType(shape, "float32"))
    data = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    check_lowered(primitive([x], call("linalg.det", x)), [data], rtol=1e-4)


def test_det_singular_and_needs_pivoting() -> None:
    x = Var("x", TensorType((3, 3, 3), "float64"))
    data = np.array(
        [
            [[0, 1, 2], [3, 4, 5], [6, 7, 9]],  # zero on the diagonal: a row swap
            [[1, 2, 3], [2, 4, 6], [1, 0, 1]],  # dependent rows: 0
            [[0, 0, 1], [0, 1, 0], [1, 0, 0]],  # a permutation: -1
        ],
        np.float64,
    )
    check_lowered(primitive([x], call("linalg.det", x)), [data], rtol=1e-12, atol=1e-12)
