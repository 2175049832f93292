"""The ONNX node test cases of the quantization ops, compiled for C and run.

Every case of QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, ConvInteger,
MatMulInteger, QLinearConv and QLinearMatMul that onnx 1.23 ships passes compiled, except:

* the float4 and int4/uint4 cases, excluded by the conformance runner (ember's dtype
  table has no such element type), and the int2/uint2 ones in ``NO_DTYPE`` (same reason,
  new in onnx 1.23),
* quantization to and from the float8 types (``FLOAT8``): ember stores float8 tensors and
  casts them, but QuantizeLinear/DequantizeLinear refuse them at compile time
  (unsupported, never wrong numbers).
"""

from __future__ import annotations

import importlib.util
import re
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

NO_DTYPE = {
    f"test_{op}_{t}" for op in ("quantizelinear", "dequantizelinear") for t in ("int2", "uint2")
}
FLOAT8 = re.compile(r"e4m3|e5m2|float8")


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
    bad = [
        f"{r.case} [{r.status}] {r.detail}"
        for r in results
        if r.status not in ("pass", "excluded")
        and r.case not in NO_DTYPE
        and not (r.status == "unsupported" and FLOAT8.search(r.case))
    ]
    assert not bad, "\n".join(bad)
    assert all(r.status != "pass" for r in results if r.case in NO_DTYPE)
