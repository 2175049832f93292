"""Pools with data_layout "NHWC" (ember.ops.nn_pool, planned by convert_layout): type rule,
reference and compiled kernels against the NCHW ones (the same taps in the same order:
equal up to float32 rounding of the average's division)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.driver import build
from ember.ir import Function, IRModule, TensorType, Var, call, evaluate
from ember.testing.runners import run_artifacts

F32 = "float32"
TO_LAST = (0, 2, 3, 1)
TO_FIRST = (0, 3, 1, 2)

CASES = [
    ("nn.max_pool", {"pool_size": [3, 3], "strides": [2, 2], "padding": [1, 1, 1, 1]}),
    ("nn.max_pool", {"pool_size": [2, 2], "strides": [2, 2], "ceil_mode": True}),
    ("nn.avg_pool", {"pool_size": [3, 3], "padding": [1, 1, 1, 1]}),
    ("nn.avg_pool", {"pool_size": [3, 3], "padding": [1, 1, 1, 1], "count_include_pad": True}),
    ("nn.avg_pool", {"pool_size": [7, 9]}),
    ("nn.global_avg_pool", {}),
    ("nn.global_max_pool", {}),
]


def _module(op: str, attrs: dict, shape: tuple[int, ...], layout: str) -> IRModule:
    x = Var("x", TensorType(shape if layout == "NCHW" else tuple(shape[a] for a in TO_LAST), F32))
    return IRModule({"main": Function((x,), call(op, x, data_layout=layout, **attrs))})


@pytest.mark.parametrize(("op", "attrs"), CASES)
def test_nhwc_pool_matches_nchw(op: str, attrs: dict) -> None:
    shape = (1, 24, 7, 9)
    x = np.random.default_rng(0).standard_normal(shape).astype(F32)
    xl = np.ascontiguousarray(x.transpose(TO_LAST))
    nchw, nhwc = _module(op, attrs, shape, "NCHW"), _module(op, attrs, shape, "NHWC")
    out_type = nhwc.main.body.type
    assert out_type.shape == tuple(nchw.main.body.type.shape[a] for a in TO_LAST)  # type: ignore[union-attr]
    want = evaluate(nchw, [x])[0]
    np.testing.assert_allclose(
        evaluate(nhwc, [xl])[0].transpose(TO_FIRST), want, rtol=1e-5, atol=1e-6
    )
    got = run_artifacts(build(nhwc, "c"), {"x": xl})[0]
    np.testing.assert_allclose(got.transpose(TO_FIRST), want, rtol=1e-5, atol=1e-6)
