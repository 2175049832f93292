"""Conformance cases: the official ONNX test cases as data, and the ones excluded by design.

A ``Case`` is one onnx test case (model, main op, data sets of inputs and expected outputs,
tolerances) and a ``Result`` the row it gives. ``collect_cases`` generates the node cases
from the installed onnx package at run time (nothing is written to the repository),
``collect_model_cases`` reads one of the model suites onnx ships with data, and
``select_cases`` keeps the cases of some ops. ``read_case`` and ``write_case`` store a case
in onnx's backend test layout, which is how cases reach worker processes (no pickle).
``EXCLUDED`` and ``EXCLUDED_PATTERNS`` name the cases that cannot pass by design and
``exclusion_reason`` says why; ``ISSUE_OPS`` is the conformance target. Imports no ember.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

#: the ops of the importer issue (the conformance target).
ISSUE_OPS: tuple[str, ...] = (
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "BatchNormalization",
    "InstanceNormalization",
    "LayerNormalization",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Elu",
    "Selu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Softplus",
    "Gelu",
    "Erf",
    "Clip",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Sqrt",
    "Reciprocal",
    "Exp",
    "Log",
    "Neg",
    "Abs",
    "Sum",
    "Mean",
    "Max",
    "Min",
    "Where",
    "Equal",
    "Less",
    "Greater",
    "Not",
    "And",
    "Or",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "LRN",
    "Softmax",
    "LogSoftmax",
    "Concat",
    "Split",
    "Slice",
    "Reshape",
    "Flatten",
    "Transpose",
    "Squeeze",
    "Unsqueeze",
    "Expand",
    "Tile",
    "Pad",
    "Gather",
    "GatherElements",
    "Shape",
    "Size",
    "Cast",
    "CastLike",
    "Identity",
    "Dropout",
    "Constant",
    "ConstantOfShape",
    "Range",
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceSumSquare",
    "ReduceLogSumExp",
    "ArgMax",
    "ArgMin",
    "TopK",
    "Resize",
    "DepthToSpace",
    "SpaceToDepth",
    "Einsum",
    "Trilu",
    "LSTM",
    "GRU",
    "GridSample",
    "RoiAlign",
    "DeformConv",
    "Col2Im",
    "Det",
    "DFT",
    "STFT",
    "MelWeightMatrix",
)

#: cases that cannot pass by design, with the reason; they are counted apart, not failed.
EXCLUDED: dict[str, str] = {
    # (training-mode Dropout passes: ember's generator is numpy's RandomState(seed))
}

#: cases whose name matches one of these patterns are excluded, with the reason.
EXCLUDED_PATTERNS: tuple[tuple[str, str], ...] = (
    # Model suites: the training-only Gradient op.
    (r"^test_gradient_of_", "Gradient is a training op (ai.onnx.preview.training)"),
    # onnx draws the input and the expected output from one global numpy stream (seed 0),
    # so the output follows the input's words: no seed attribute reproduces it.
    (r"^test_bernoulli", "expected output drawn after the input from one numpy stream"),
)


@dataclass(frozen=True)
class Case:
    """One ONNX node test case: its model, op, and (inputs, expected outputs) data sets."""

    name: str
    op: str
    model: onnx.ModelProto
    data_sets: tuple[tuple[list[object], list[object]], ...]
    rtol: float
    atol: float


@dataclass(frozen=True)
class Result:
    """The outcome of one case: pass, fail, unsupported, error or excluded, and why."""

    case: str
    op: str
    status: str
    detail: str = ""
    seconds: float = 0.0


@functools.lru_cache(maxsize=1)
def collect_cases() -> tuple[Case, ...]:
    """All node test cases onnx ships, sorted by name, each tagged with its main op."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        raw = collect_testcases(None)
    models = {c.name: c.model for c in raw if c.model is not None}
    cases = []
    for c in sorted(raw, key=lambda c: c.name):
        if c.model is None or c.data_sets is None:
            continue
        cases.append(
            Case(
                c.name,
                _main_op(c.name, c.model, models),
                c.model,
                tuple((list(i), list(o)) for i, o in c.data_sets),
                float(c.rtol),
                float(c.atol),
            )
        )
    return tuple(cases)


#: model suites onnx ships with their data (backend/test/data/<suite>/<case>/model.onnx and
#: test_data_set_*/{input,output}_*.pb): real exporter output rather than single nodes.
MODEL_SUITES: tuple[str, ...] = ("pytorch-converted", "pytorch-operator", "simple")


@functools.cache
def collect_model_cases(suite: str) -> tuple[Case, ...]:
    """The cases of one shipped model suite; each case's 'op' is its model name."""
    if suite not in MODEL_SUITES:
        raise SystemExit(f"unknown suite '{suite}'; known: node, {', '.join(MODEL_SUITES)}")
    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / suite
    cases = []
    for case_dir in sorted(p for p in root.iterdir() if (p / "model.onnx").is_file()):
        name = case_dir.name
        cases.append(read_case(case_dir, name, name.removeprefix("test_"), 1e-3, 1e-7))
    return tuple(cases)


def read_case(case_dir: Path, name: str, op: str, rtol: float, atol: float) -> Case:
    """A case stored in onnx's backend test layout: model.onnx and test_data_set_<i>/
    {input,output}_<j>.pb."""
    data_sets: list[tuple[list[object], list[object]]] = []
    for ds in sorted(case_dir.glob("test_data_set_*"), key=_pb_index):
        inputs = [_load_value(f) for f in sorted(ds.glob("input_*.pb"), key=_pb_index)]
        outputs = [_load_value(f) for f in sorted(ds.glob("output_*.pb"), key=_pb_index)]
        data_sets.append((list(inputs), list(outputs)))
    model = onnx.load(str(case_dir / "model.onnx"))
    return Case(name, op, model, tuple(data_sets), rtol, atol)


def write_case(case: Case, case_dir: Path) -> bool:
    """Store ``case`` in onnx's backend test layout (see :func:`read_case`); False when a
    value is not a tensor (sequences, optionals) and the case cannot be stored."""
    values = [v for inputs, outputs in case.data_sets for v in (*inputs, *outputs)]
    if any(not _storable(v) for v in values):
        return False
    case_dir.mkdir(parents=True)
    (case_dir / "model.onnx").write_bytes(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = case_dir / f"test_data_set_{i}"
        ds.mkdir()
        for kind, group in (("input", inputs), ("output", outputs)):
            for j, value in enumerate(group):
                if isinstance(value, list):  # a sequence: its elements, one file each
                    (ds / f"{kind}_{j}.pb").mkdir()
                    for k, item in enumerate(value):
                        tensor = _as_tensor(item)
                        (ds / f"{kind}_{j}.pb" / f"item_{k}.pb").write_bytes(
                            tensor.SerializeToString()
                        )
                    continue
                (ds / f"{kind}_{j}.pb").write_bytes(_as_tensor(value).SerializeToString())
    return True


def _as_tensor(value: object) -> onnx.TensorProto:
    return (
        value if isinstance(value, onnx.TensorProto) else numpy_helper.from_array(np.asarray(value))
    )


def _storable(value: object) -> bool:
    """A tensor, or a sequence (list) of tensors."""
    if isinstance(value, list):
        return all(_storable(v) and not isinstance(v, list) for v in value)
    return isinstance(value, np.ndarray | np.generic | onnx.TensorProto)


def _load_value(path: Path) -> object:
    """A stored tensor, or a sequence stored as a folder of its elements."""
    if path.is_dir():
        return [_load_value(f) for f in sorted(path.glob("item_*.pb"), key=_pb_index)]
    return numpy_helper.to_array(onnx.load_tensor(str(path)))


def _pb_index(path: object) -> int:
    """The number in input_<n>.pb, so input_10 sorts after input_9."""
    match = re.search(r"_(\d+)(\.pb)?$", str(path))
    return int(match.group(1)) if match else 0


def _main_op(name: str, model: onnx.ModelProto, models: dict[str, onnx.ModelProto]) -> str:
    """The op a case tests: its single node, or for an '_expanded' case, its base case's."""
    base = re.sub(r"_expanded(_ver\d+)?$", "", name)
    if base != name and base in models:
        model = models[base]
    nodes = model.graph.node
    if len(nodes) == 1:
        return nodes[0].op_type
    squashed = name.removeprefix("test_").replace("_", "").lower()
    best = ""
    for node in nodes:
        if squashed.startswith(node.op_type.lower()) and len(node.op_type) > len(best):
            best = node.op_type
    return best or (nodes[0].op_type if nodes else "?")


def exclusion_reason(name: str) -> str | None:
    """Why a case is excluded, or None."""
    if name in EXCLUDED:
        return EXCLUDED[name]
    for pattern, reason in EXCLUDED_PATTERNS:
        if re.search(pattern, name):
            return reason
    return None


def select_cases(ops: Iterable[str] | None, cases: Sequence[Case] | None = None) -> list[Case]:
    """The cases whose main op is in ``ops`` (all cases when ops is None)."""
    cases = collect_cases() if cases is None else cases
    if ops is None:
        return list(cases)
    wanted = set(ops)
    return [c for c in cases if c.op in wanted]
