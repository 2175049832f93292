"""Every float16, bfloat16 and float8 case of the ONNX node suite, compiled for C and run.

A case is a narrow-float case when its model has a float16, bfloat16 or float8 (e4m3fn,
e4m3fnuz, e5m2, e5m2fnuz) tensor anywhere: graph
inputs, outputs, value infos, initializers, constant attributes or a Cast ``to``. Each one
that passes through importer + reference evaluator must pass compiled too (the cases whose
op ember does not import count as unsupported in both modes, not here). The fast tier runs
the Cast/CastLike pairs and one case per other op family; the slow tier all of them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import onnx
import pytest

_BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(_BENCHMARKS) not in sys.path:
    sys.path.append(str(_BENCHMARKS))

import onnx_conformance as oc  # noqa: E402

pytestmark = pytest.mark.cc

T = onnx.TensorProto
HALF = {T.FLOAT16, T.BFLOAT16, T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ}

#: the fast tier: the plain Cast/CastLike pairs and one case of each other op family.
FAST_CASES: tuple[str, ...] = (
    "test_cast_BFLOAT16_to_FLOAT",
    "test_cast_DOUBLE_to_FLOAT16",
    "test_cast_FLOAT16_to_DOUBLE",
    "test_cast_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT16_to_FLOAT_expanded",
    "test_castlike_FLOAT_to_FLOAT16",
    "test_cast_FLOAT_to_FLOAT8E4M3FN",
    "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2",
    "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded",
    "test_cast_FLOAT8E4M3FNUZ_to_FLOAT",
    "test_celu_bfloat16",
    "test_einsum_batch_matmul_bfloat16",
    "test_isnan_float16",
    "test_max_float16",
    "test_mod_mixed_sign_float16",
    "test_reversesequence_bfloat16",
)


def _elem_types(model: onnx.ModelProto) -> set[int]:
    g = model.graph
    types = {v.type.tensor_type.elem_type for v in (*g.input, *g.output, *g.value_info)}
    types |= {t.data_type for t in g.initializer}
    for node in g.node:
        for a in node.attribute:
            if a.name == "to":
                types.add(a.i)
            if a.type == onnx.AttributeProto.TENSOR:
                types.add(a.t.data_type)
    return types


def half_cases() -> list[Any]:
    """The node cases with a narrow float tensor, less those excluded by design."""
    return [
        c
        for c in oc.collect_cases()
        if _elem_types(c.model) & HALF and oc.exclusion_reason(c.name) is None
    ]


def test_fast_cases_are_half_cases() -> None:
    names = {c.name for c in half_cases()}
    assert set(FAST_CASES) <= names, sorted(set(FAST_CASES) - names)
    assert len(names) >= 140


@pytest.mark.parametrize("name", FAST_CASES)
def test_fast_half_case_compiles_and_matches(name: str) -> None:
    case = next(c for c in half_cases() if c.name == name)
    result = oc.run_case(case, oc.run_compiled)
    assert result.status == "pass", f"{name} [{result.status}] {result.detail}"


@pytest.mark.slow
def test_every_half_case_that_imports_passes_compiled() -> None:
    cases = half_cases()
    reference = {r.case: r for r in oc.run(cases, "reference")}
    compiled = oc.run(cases, "compiled", batch=oc.DEFAULT_BATCH)
    bad = [
        f"{r.case} [{r.status}] {r.detail}"
        for r in compiled
        if r.status != "pass" and reference[r.case].status == "pass"
    ]
    assert not bad, f"{len(bad)} half cases pass in reference mode only:\n" + "\n".join(bad)
    unsupported = {r.case for r in compiled if r.status == "unsupported"}
    assert unsupported == {r.case for r in reference.values() if r.status == "unsupported"}
