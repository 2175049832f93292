"""Fixtures of the op tests."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ops import nn_conv_pack


@pytest.fixture(autouse=True)
def _module_rng_per_test(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test module's ``RNG`` starts afresh at its ``RNG_SEED`` for every test: a module-wide
    generator gave each test data that depended on which tests ran before it in the same
    worker (pytest -n), and bitwise comparisons with onnxruntime then flaked on a draw that
    lands on a rounding edge (test_quant_int8's stride-2 depthwise: 206 against 207)."""
    seed = getattr(request.module, "RNG_SEED", None)
    if seed is not None:
        monkeypatch.setattr(request.module, "RNG", np.random.default_rng(seed))


@pytest.fixture
def every_layer_takes_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The conv tile kernel's layout (and kernel) on every layer, however short its
    reduction (nn_conv_pack.tile_kernel_pays says yes)."""
    monkeypatch.setattr(nn_conv_pack, "tile_kernel_pays", lambda *args: True)
