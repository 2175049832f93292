"""The pair groups of the int8 conv rows (``split_pair_groups``, ``pack_conv_rows``): every
group of 4 weights the tile adds in int16 fits, and the fix slots give the weight back."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ir.ops.quant_int8_ref import conv_weight_rows
from ember.transform.qdq_int8 import (
    MAX_FIX_COLUMN,
    PAIR_GROUP_LIMIT,
    pack_conv_rows,
    split_pair_groups,
)

RNG = np.random.default_rng(11)


def _group_sums(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each pair group's sum of positive weights and of negative magnitudes."""
    m, k = rows.shape
    steps = k // 8
    g = rows[:, : 8 * steps].astype(np.int64).reshape(m, steps, 2, 2, 2)
    g = g.transpose(0, 1, 3, 2, 4).reshape(m, steps, 2, 4)
    return np.clip(g, 0, None).sum(-1), np.clip(-g, 0, None).sum(-1)


@pytest.mark.parametrize("shape", [(7, 5, 3, 3), (4, 16, 1, 1), (9, 3, 2, 5), (1, 1, 1, 1)])
@pytest.mark.parametrize("spread", ["normal", "one_sign"])
def test_packed_rows_give_the_weight_back_and_every_group_fits(shape, spread) -> None:
    if spread == "normal":
        w = np.clip(np.rint(RNG.standard_normal(shape) * 20), -64, 63)
    else:
        w = (
            RNG.integers(40, 64, shape)
            * np.where(RNG.random(shape[:1]) < 0.5, -1, 1)[:, None, None, None]
        )
    w = w.astype(np.int8)
    m, k = shape[0], int(np.prod(shape[1:]))
    packed = pack_conv_rows(w)
    assert packed is not None and packed.dtype == np.int8 and packed.shape[0] % 4 == 0
    np.testing.assert_array_equal(conv_weight_rows(packed, m, k), w.reshape(m, k))
    pos, neg = _group_sums(packed[:, : (k + 3) // 4 * 4])
    assert pos.max(initial=0) <= PAIR_GROUP_LIMIT and neg.max(initial=0) <= PAIR_GROUP_LIMIT


def test_split_moves_the_largest_weights_of_an_overfull_group() -> None:
    rows = np.zeros((1, 8), np.int64)
    rows[0, [0, 1, 4, 5]] = (63, 40, 30, -64)  # positives 133 > 128: the 63 moves
    rows[0, [2, 3, 6, 7]] = (-60, -50, -30, 10)  # negatives 140 > 128: the -60 moves
    fixes = split_pair_groups(rows)
    assert sorted(fixes[0]) == [(0, 63), (2, -60)]
    assert rows[0].tolist() == [0, 40, 0, -50, 30, -64, -30, 10]


def test_limit_is_the_int16_bound_of_unsigned_bytes() -> None:
    assert 255 * PAIR_GROUP_LIMIT <= 32767 < 255 * (PAIR_GROUP_LIMIT + 1)
    assert MAX_FIX_COLUMN == 0xFFFF
