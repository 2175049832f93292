"""The ONNX node test cases of the quantization ops, compiled for C and run.

Every case of QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ConvInteger,
MatMulInteger, QLinearConv and QLinearMatMul that onnx 1.23 ships passes compiled: the
int4/uint4/int2/uint2 forms (stored one element per byte) and the float8/float4 ones (casts)
included.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

QUANT_OPS = (
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "ConvInteger",
    "MatMulInteger",
    "QLinearConv",
    "QLinearMatMul",
)


def _runner() -> ModuleType:
    name = "ember_onnx_conformance"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "onnx_conformance.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.cc
@pytest.mark.slow
@pytest.mark.parametrize("op", QUANT_OPS)
def test_quantization_cases_pass_compiled(op: str) -> None:
    oc = _runner()
    cases = oc.select_cases([op])
    assert cases, f"onnx ships no node test case for {op}"
    results = oc.run(cases, "compiled", batch=oc.DEFAULT_BATCH)
    bad = [f"{r.case} [{r.status}] {r.detail}" for r in results if r.status != "pass"]
    assert not bad, "\n".join(bad)
