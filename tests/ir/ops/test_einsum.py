"""Type rules, error messages and numpy references of einsum."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import call

from .ir_check import run as _run
from .ir_check import var as _var


def test_einsum() -> None:
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    av, bv = _var(a.shape), _var(b.shape, name="b")
    for eq, shape in [("bij,bjk->bik", (2, 3, 5)), ("...ij,...jk", (2, 3, 5))]:
        e = call("einsum", av, bv, equation=eq)
        assert e.type.shape == shape  # type: ignore[attr-defined]
        (y,) = _run(e, [av, bv], [a, b])
        np.testing.assert_allclose(y, np.einsum(eq, a, b), rtol=1e-5)
    assert call("einsum", av, equation="ijk").type.shape == (2, 3, 4)  # type: ignore[attr-defined]
    assert call("einsum", av, equation="ijk->").type.shape == ()  # type: ignore[attr-defined]
    with pytest.raises(IRError, match="index 'j' has sizes 4 and 5"):
        call("einsum", av, bv, equation="bij,bjk->bik".replace("bjk", "bkj"))
    with pytest.raises(IRError, match="has 1 operands, got 2 inputs"):
        call("einsum", av, bv, equation="ijk")
