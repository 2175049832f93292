"""ONNX node cases fixed for issues 16/17, compiled for C: the float16/bfloat16 Attention
cases (onnx's reference rounds the softmax to the narrow type step by step, see
ops/narrow_softmax.py) and an empty optional as a model input (fed as None)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(_BENCHMARKS) not in sys.path:
    sys.path.append(str(_BENCHMARKS))

import onnx_conformance as oc  # noqa: E402

pytestmark = pytest.mark.cc

NARROW_ATTENTION = tuple(
    f"test_attention_4d_{name}{suffix}"
    for name in (
        "causal_fp16",
        "causal_bf16",
        "attn_mask_causal_bf16",
        "causal_padded_kv_bf16",
        "padded_kv_bf16",
    )
    for suffix in ("", "_expanded")
)
FAST = {
    "test_attention_4d_causal_fp16",
    "test_attention_4d_causal_bf16_expanded",
    "test_attention_4d_causal_padded_kv_bf16",
}


def _run(name: str) -> None:
    case = next(c for c in oc.collect_cases() if c.name == name)
    result = oc.run_case(case, oc.run_compiled)
    assert result.status == "pass", f"{name} [{result.status}] {result.detail}"


@pytest.mark.parametrize(
    "name",
    [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in NARROW_ATTENTION],
)
def test_narrow_attention_case_passes_compiled(name: str) -> None:
    _run(name)


def test_empty_optional_model_input_passes_compiled() -> None:
    _run("test_optional_has_element_empty_optional_input")
