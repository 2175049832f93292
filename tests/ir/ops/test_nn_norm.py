"""Type rules, error messages and numpy references of the normalisations and softmaxes."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import call

from .ir_check import run as _run
from .ir_check import var as _var


def test_norms_and_softmax() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    xv = _var(x.shape)
    vec = [_var((3,), name=n) for n in ("g", "b", "m", "v")]
    vals = [rng.standard_normal(3).astype(np.float32) for _ in range(3)]
    vals.append(rng.random(3).astype(np.float32) + 0.5)
    (y,) = _run(call("nn.batch_norm", xv, *vec, epsilon=1e-3), [xv, *vec], [x, *vals])
    g, b, m, v = (a.reshape(1, 3, 1) for a in vals)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-3) * g + b, rtol=1e-5, atol=1e-6)
    with pytest.raises(IRError, match="gamma must have shape \\(4,\\)"):
        call("nn.batch_norm", xv, *vec, axis=-1)
    (s,) = _run(call("nn.softmax", xv, axis=1), [xv], [x])
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-6)
    (ls,) = _run(call("nn.log_softmax", xv, axis=1), [xv], [x])
    np.testing.assert_allclose(np.exp(ls), s, rtol=1e-5)
    sc = _var((3, 4), name="s")
    ln = call("nn.layer_norm", xv, sc, axis=1)
    (y,) = _run(ln, [xv, sc], [x, np.ones((3, 4), np.float32)])
    np.testing.assert_allclose(y.reshape(2, -1).mean(axis=1), 0, atol=1e-6)
    with pytest.raises(IRError, match="must broadcast to the normalised shape"):
        call("nn.layer_norm", xv, _var((2, 3, 4), name="s"), axis=1)
