"""Type rules, error messages and numpy references of the pools."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import TensorType, call

from .ir_check import run as _run
from .ir_check import var as _var


def test_pools() -> None:
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    xv = _var(x.shape)
    mp = call("nn.max_pool", xv, pool_size=(2, 2), strides=(2, 2), ceil_mode=True)
    assert mp.type.shape == (2, 3, 3, 3)  # type: ignore[attr-defined]
    (y,) = _run(mp, [xv], [x])
    np.testing.assert_array_equal(y[0, 0], [[6, 8, 9], [16, 18, 19], [21, 23, 24]])
    ap = call("nn.avg_pool", xv, pool_size=(3, 3), padding=(1, 1, 1, 1))
    (y,) = _run(ap, [xv], [x])
    np.testing.assert_allclose(y[0, 0, 0, 0], np.mean([0, 1, 5, 6]))
    ap = call("nn.avg_pool", xv, pool_size=(3, 3), padding=(1, 1, 1, 1), count_include_pad=True)
    (y,) = _run(ap, [xv], [x])
    np.testing.assert_allclose(y[0, 0, 0, 0], (0 + 1 + 5 + 6) / 9, rtol=1e-6)
    (g,) = _run(call("nn.global_avg_pool", xv), [xv], [x])
    np.testing.assert_allclose(g, x.mean(axis=(2, 3), keepdims=True))
    with pytest.raises(IRError, match="pool_size \\[2\\] must hold 2 positive sizes"):
        call("nn.max_pool", xv, pool_size=(2,))


def test_max_pool_argmax_and_lp_pool() -> None:
    x = np.array([[[[1, 5, 2], [7, 3, 7], [0, 9, 4]]]], dtype=np.float32)
    xv = _var(x.shape)
    arg = call("nn.max_pool_argmax", xv, pool_size=(2, 2))
    assert arg.type == TensorType((1, 1, 2, 2), "int64")
    (idx,) = _run(arg, [xv], [x])
    np.testing.assert_array_equal(idx[0, 0], [[3, 5], [7, 7]])  # first maximum wins ties
    col = call("nn.max_pool_argmax", xv, pool_size=(2, 2), storage_order=1)
    (idx,) = _run(col, [xv], [x])
    np.testing.assert_array_equal(idx[0, 0], [[1, 7], [5, 5]])
    with pytest.raises(IRError, match="storage_order must be 0"):
        call("nn.max_pool_argmax", xv, pool_size=(2, 2), storage_order=2)
    lp = call("nn.lp_pool", xv, pool_size=(3, 3), p=2.0)
    (y,) = _run(lp, [xv], [x])
    np.testing.assert_allclose(y[0, 0, 0, 0], np.sqrt((x**2).sum()), rtol=1e-6)
