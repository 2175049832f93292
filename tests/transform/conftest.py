"""Shared helpers for the pass tests: random inputs and a result-equality check."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from ember.ir import IRModule, TensorType, evaluate
from ember.ir.verify import verify


def random_inputs(mod: IRModule, seed: int = 0) -> dict[str, np.ndarray]:
    """A random value for every parameter of ``main`` (fixed seed)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for p in mod.main.params:
        ty = p.type
        assert isinstance(ty, TensorType)
        out[p.name] = rng.standard_normal(ty.shape).astype(ty.dtype)
    return out


def check_same_results(
    before: IRModule, after: IRModule, seeds: tuple[int, ...] = (0, 1), rtol: float = 1e-5
) -> None:
    """``after`` verifies and evaluates like ``before`` on random inputs."""
    verify(after)
    for seed in seeds:
        inputs = random_inputs(before, seed)
        want = evaluate(before, inputs)
        got = evaluate(after, inputs)
        assert len(want) == len(got)
        for w, g in zip(want, got, strict=True):
            assert w.shape == g.shape and w.dtype == g.dtype
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol)


@pytest.fixture
def same_results() -> Callable[..., None]:
    """The :func:`check_same_results` helper."""
    return check_same_results
