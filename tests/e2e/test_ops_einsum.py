"""Compiled Einsum against onnxruntime, one C compile per test."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ember.testing import assert_matches_onnxruntime, build_model, random_input

pytestmark = pytest.mark.cc


def test_einsum():
    rng = np.random.default_rng(8)
    inputs = {
        "a": random_input((2, 3, 4), seed=rng),
        "b": random_input((2, 4, 5), seed=rng),
        "m": random_input((4, 4), seed=rng),
        "q": random_input((1, 2, 3, 8), seed=rng),
        "k": random_input((1, 2, 6, 8), seed=rng),
    }
    cases = [
        ("bij,bjk->bik", ["a", "b"]),
        ("ii->i", ["m"]),
        ("ij->ji", ["m"]),
        ("bhqd,bhkd->bhqk", ["q", "k"]),
        ("...ij,...jk->...ik", ["a", "b"]),
        ("bij->", ["a"]),
        ("bij,bjk", ["a", "b"]),
    ]
    nodes = [
        helper.make_node("Einsum", ins, [f"e{i}"], name=f"e{i}", equation=eq)
        for i, (eq, ins) in enumerate(cases)
    ]
    outs = {f"e{i}": "float32" for i in range(len(cases))}
    assert_matches_onnxruntime(build_model(nodes, inputs, outs), inputs, rtol=1e-4, atol=1e-5)
