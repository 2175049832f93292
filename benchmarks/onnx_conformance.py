"""ONNX conformance: run the official ONNX node test cases through ember and print pass rates.

The cases are generated at run time from the installed onnx package
(``onnx.backend.test.case.node.collect_testcases``: each case is a model plus input and
expected output arrays), nothing is written to the repository. Each case is imported with
``ember.frontend.from_onnx`` and run by a *mode*: a function ``(model, inputs) ->
outputs`` in ``MODES``. ``reference`` runs the numpy reference evaluator; ``compiled``
runs ``ember.build`` for the C target, ``ember.load_artifacts`` and the graph executor.
Compiled sweeps run in worker processes (``--jobs``) and build up to ``--batch`` cases of
one op as one library. A compiled case is counted as *unsupported* when an op has no
compute (OpNotSupportedError), *fail* on a wrong result, *error* on any other exception
or a crashed or hung worker.

    python benchmarks/onnx_conformance.py                      # the issue's op list
    python benchmarks/onnx_conformance.py --ops Conv,Relu -v   # some ops, with failures
    python benchmarks/onnx_conformance.py --mode both          # reference | compiled
    python benchmarks/onnx_conformance.py --mode compiled --all --jobs 2 --batch 8
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

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
)

#: cases that cannot pass by design, with the reason; they are counted apart, not failed.
EXCLUDED: dict[str, str] = {
    # Training-mode Dropout draws random masks: not reproducible, and ember is inference-only.
    "test_training_dropout": "training-mode dropout (random)",
    "test_training_dropout_default": "training-mode dropout (random)",
    "test_training_dropout_default_mask": "training-mode dropout (random)",
    "test_training_dropout_mask": "training-mode dropout (random)",
}

#: cases whose name matches one of these patterns are excluded, with the reason.
EXCLUDED_PATTERNS: tuple[tuple[str, str], ...] = (
    # Sequence and optional values (Identity of a sequence/optional) are not tensors.
    (r"^test_identity_(opt|sequence)", "sequence/optional values are not tensors"),
    # 8-bit and 4-bit float and int4 element types have no ember dtype.
    (r"(float8|FLOAT8|e4m3|e5m2|int4|uint4|float4|e2m1|FLOAT4|INT4|UINT4)", "no 8/4-bit types"),
    # 2-bit integer types have no ember dtype.
    (r"(INT2|UINT2)", "no 2-bit types"),
    # The '_expanded' form of Range is a Loop (control flow, not in ember's op set).
    (r"^test_range_.*_expanded$", "expands to a Loop (control flow)"),
    # Model suites: sequence values, the training-only Gradient op, string normalisation.
    (r"^test_sequence_model", "sequence values are not tensors"),
    (r"^test_gradient_of_", "Gradient is a training op (ai.onnx.preview.training)"),
    (r"^test_strnorm_model", "string tensors are not supported"),
    # Opset-6 PRelu broadcast a (C,) slope per channel; onnx's converter to opset 7 (numpy
    # broadcasting) keeps the slope as is, so the upgraded model is invalid.
    (r"^test_PReLU_\dd_multiparam$", "opset-6 PRelu; the opset converter breaks it"),
    # String tensors are not numeric.
    (r"(_string|STRING)", "string tensors are not supported"),
)

ModeFn = Callable[[onnx.ModelProto, dict[str, np.ndarray]], list[np.ndarray]]


def run_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Import ``model`` and run it with the numpy reference evaluator."""
    from ember.frontend import from_onnx
    from ember.ir import evaluate

    mod, params = from_onnx(model)
    return evaluate(mod, inputs, params)


def run_compiled(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Import ``model``, build it for the C target, load it and run the graph executor once."""
    import ember

    mod, params = ember.import_onnx(model)
    return build_and_run(mod, params, inputs)


def build_and_run(
    mod: Any, params: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``ember.build`` for the C target, ``ember.load_artifacts``, one graph executor run."""
    import ember

    artifacts = ember.build(mod, target="c", params=params)
    dev = ember.cpu(0)
    executor = ember.GraphExecutor(ember.load_artifacts(artifacts, dev)["default"](dev))
    for name, value in inputs.items():
        executor.set_input(name, value)
    executor.run()
    return [executor.get_output(i).numpy() for i in range(executor.get_num_outputs())]


#: how a case is run: name -> function(model, inputs) -> outputs.
MODES: dict[str, ModeFn] = {"reference": run_reference, "compiled": run_compiled}


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
    from onnx import numpy_helper

    data_sets: list[tuple[list[object], list[object]]] = []
    for ds in sorted(case_dir.glob("test_data_set_*"), key=_pb_index):
        inputs = [
            numpy_helper.to_array(onnx.load_tensor(str(f)))
            for f in sorted(ds.glob("input_*.pb"), key=_pb_index)
        ]
        outputs = [
            numpy_helper.to_array(onnx.load_tensor(str(f)))
            for f in sorted(ds.glob("output_*.pb"), key=_pb_index)
        ]
        data_sets.append((list(inputs), list(outputs)))
    model = onnx.load(str(case_dir / "model.onnx"))
    return Case(name, op, model, tuple(data_sets), rtol, atol)


def write_case(case: Case, case_dir: Path) -> bool:
    """Store ``case`` in onnx's backend test layout (see :func:`read_case`); False when a
    value is not a tensor (sequences, optionals) and the case cannot be stored."""
    from onnx import numpy_helper

    values = [v for inputs, outputs in case.data_sets for v in (*inputs, *outputs)]
    if any(not isinstance(v, np.ndarray | np.generic | onnx.TensorProto) for v in values):
        return False
    case_dir.mkdir(parents=True)
    (case_dir / "model.onnx").write_bytes(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = case_dir / f"test_data_set_{i}"
        ds.mkdir()
        for kind, group in (("input", inputs), ("output", outputs)):
            for j, value in enumerate(group):
                if isinstance(value, onnx.TensorProto):
                    tensor = value
                else:
                    tensor = numpy_helper.from_array(np.asarray(value))
                (ds / f"{kind}_{j}.pb").write_bytes(tensor.SerializeToString())
    return True


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


def tolerances(dtype: np.dtype, case: Case) -> tuple[float, float]:
    """(rtol, atol) for an output dtype: the case's, loosened to a floor per precision."""
    if dtype.name in ("float16", "bfloat16"):
        return max(case.rtol, 1e-2), max(case.atol, 1e-3)
    return max(case.rtol, 1e-3), max(case.atol, 1e-5)


def compare(got: Sequence[np.ndarray], want: Sequence[object], case: Case) -> str:
    """'' when the outputs match, else a description of the first mismatch."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        w = np.asarray(w)
        g = np.asarray(g)
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, expected {w.shape}"
        if g.dtype != w.dtype:
            return f"output {i}: dtype {g.dtype}, expected {w.dtype}"
        if w.dtype.kind in "fc" or w.dtype.name == "bfloat16":
            rtol, atol = tolerances(w.dtype, case)
            g64 = g.astype(np.float64)
            w64 = w.astype(np.float64)
            if not np.allclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True):
                err = np.nanmax(np.abs(g64 - w64)) if g.size else 0.0
                return f"output {i}: max abs error {err:.3g} (rtol {rtol}, atol {atol})"
        elif not np.array_equal(g, w):
            return f"output {i}: {int(np.sum(g != w))} of {w.size} elements differ"
    return ""


def bake_inputs(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], names: Iterable[str]
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A copy of ``model`` where the inputs ``names`` are initializers holding their feeds.

    ONNX node tests pass shape-like arguments (axes, pads, K, repeats, split sizes) as graph
    inputs; ember compiles static shapes, so those become constants, as a deployed model
    would have them.
    """
    from onnx import numpy_helper

    baked = set(names)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    keep = [vi for vi in out.graph.input if vi.name not in baked]
    del out.graph.input[:]
    out.graph.input.extend(keep)
    for name in sorted(baked):
        out.graph.initializer.append(numpy_helper.from_array(feeds[name], name))
    return out, {n: v for n, v in feeds.items() if n not in baked}


def static_inputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[str]:
    """Inputs that look like shape arguments: integer or scalar, never a node's first input."""
    first = {node.input[0] for node in model.graph.node if node.input}
    return [n for n, v in feeds.items() if n not in first and (v.dtype.kind in "iu" or v.ndim == 0)]


def _as_array(value: object) -> object:
    """A TensorProto (how cases ship bfloat16 and friends) as numpy; other values as is."""
    if isinstance(value, onnx.TensorProto):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return value


def _upgraded(model: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """Models older than ember's minimum opset, converted the way ember's error advises."""
    from ember.frontend.onnx.model_check import MIN_OPSET

    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if not version or version >= MIN_OPSET:
        return model, ""
    from onnx import version_converter

    return version_converter.convert_version(model, MIN_OPSET), f" (converted from opset {version})"


def prepare(
    case: Case, inputs: Sequence[object], all_static: bool = False
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """(model, runtime feeds, note) for one data set: the model upgraded to ember's minimum
    opset, its shape-like inputs (or with ``all_static`` every input) baked in."""
    inits = {t.name for t in case.model.graph.initializer}
    names = [vi.name for vi in case.model.graph.input if vi.name not in inits]
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs, strict=False)}
    source, note = _upgraded(case.model)
    baked = list(feeds) if all_static else static_inputs(source, feeds)
    model, runtime = bake_inputs(source, feeds, baked)
    return model, runtime, note + (" (all inputs static)" if all_static else "")


def run_case(case: Case, mode: ModeFn) -> Result:
    """Run one case with ``mode`` and compare with its expected outputs.

    Shape-like inputs are baked in as constants first; when the import still needs a
    constant (e.g. Range over float scalars), every input is baked in ("all static").
    """
    from ember.errors import FrontendError, OpNotSupportedError

    reason = exclusion_reason(case.name)
    if reason is not None:
        return Result(case.name, case.op, "excluded", reason)
    start = time.perf_counter()
    note = ""
    try:
        for inputs, expected in case.data_sets:
            inputs = [_as_array(v) for v in inputs]
            expected = [_as_array(v) for v in expected]
            values = list(inputs) + list(expected)
            if any(not isinstance(v, np.ndarray | np.generic) for v in values):
                return Result(case.name, case.op, "unsupported", "non-tensor inputs or outputs")
            model, runtime, note = prepare(case, inputs)
            try:
                with np.errstate(all="ignore"):
                    got = mode(model, runtime)
            except FrontendError as err:
                if "must be constant" not in str(err):
                    raise
                model, runtime, note = prepare(case, inputs, all_static=True)
                with np.errstate(all="ignore"):
                    got = mode(model, runtime)
            problem = compare(got, list(expected), case)
            if problem:
                elapsed = time.perf_counter() - start
                return Result(case.name, case.op, "fail", problem + note, elapsed)
    except OpNotSupportedError as err:
        first = str(err).splitlines()[1].strip() if "\n" in str(err) else str(err)
        return Result(case.name, case.op, "unsupported", first, time.perf_counter() - start)
    except Exception as err:  # each failure is a row in the table, never an abort
        detail = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        return Result(case.name, case.op, "error", detail + note, time.perf_counter() - start)
    return Result(case.name, case.op, "pass", note.strip(), time.perf_counter() - start)


def select_cases(ops: Iterable[str] | None, cases: Sequence[Case] | None = None) -> list[Case]:
    """The cases whose main op is in ``ops`` (all cases when ops is None)."""
    cases = collect_cases() if cases is None else cases
    if ops is None:
        return list(cases)
    wanted = set(ops)
    return [c for c in cases if c.op in wanted]


#: a progress callback: (cases done, cases in all).
Progress = Callable[[int, int], None]


def run(
    cases: Sequence[Case],
    mode: str = "reference",
    jobs: int = 0,
    batch: int = 1,
    progress: Progress | None = None,
) -> list[Result]:
    """Run ``cases`` with the named mode, in this process (``jobs`` 0) or in ``jobs`` worker
    processes, compiling up to ``batch`` cases of one op together; results in case order.
    ``progress(done, total)`` is called after each batch."""
    if mode not in MODES:
        raise SystemExit(f"unknown mode '{mode}'; known: {', '.join(sorted(MODES))}")
    if jobs > 0:
        return run_in_workers(cases, mode, jobs, batch, progress=progress)
    results: dict[int, Result] = {}
    for group in batches(cases, batch):
        results.update(zip(group, run_batch([cases[i] for i in group], mode), strict=True))
        if progress is not None:
            progress(len(results), len(cases))
    return [results[i] for i in range(len(cases))]


def print_progress(done: int, total: int) -> None:
    """A progress line on stderr, rewritten in place (for terminals)."""
    end = "\n" if done == total else ""
    print(f"\r{done}/{total} cases", end=end, file=sys.stderr, flush=True)


# -- batches: several cases of one op compiled as one library -----------------------------
# A C compiler run has a fixed cost (process, headers, link, dlopen) of the order of the
# whole build of a small case, so compiled mode builds a batch of cases as ONE IRModule
# whose main computes every case side by side (inputs renamed c<k>_<name>, outputs
# concatenated): one build, one library, one run. A batch that fails to build or run is
# split in two halves, recursively, and a case whose output does not match is run again
# alone, so every reported failure (and its message) is the case's own; a pass is a pass
# whichever way it was reached.

#: cases per compiled batch on the command line (1: every case alone).
DEFAULT_BATCH = 16


@dataclass(frozen=True)
class _Imported:
    """One case's single data set, imported and ready to be merged into a batch."""

    mod: Any
    params: Mapping[str, np.ndarray]
    feeds: Mapping[str, np.ndarray]
    expected: list[object]
    note: str


def batches(cases: Sequence[Case], size: int) -> list[list[int]]:
    """Indices of ``cases`` in groups of at most ``size`` cases of the same op."""
    by_op: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_op.setdefault(case.op, []).append(i)
    step = max(1, size)
    return [ids[k : k + step] for ids in by_op.values() for k in range(0, len(ids), step)]


def run_batch(cases: Sequence[Case], mode: str) -> list[Result]:
    """Run ``cases`` with the named mode; compiled cases that can be are built together."""
    fn = MODES[mode]
    if mode != "compiled" or len(cases) < 2:
        return [run_case(c, fn) for c in cases]
    results: dict[int, Result] = {}
    items: list[tuple[int, Case, _Imported]] = []
    for i, case in enumerate(cases):
        part = _import_alone(case)
        if part is None:
            results[i] = run_case(case, fn)
        else:
            items.append((i, case, part))
    results.update(_run_merged_or_split(items))
    return [results[i] for i in range(len(cases))]


def _run_merged_or_split(items: Sequence[tuple[int, Case, _Imported]]) -> dict[int, Result]:
    """Results of imported cases by index: merged, and when the merged build fails,
    bisected, so one case that cannot compile leaves the others batched."""
    fn = MODES["compiled"]
    if len(items) < 2:
        return {i: run_case(case, fn) for i, case, _ in items}
    start = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            outputs = run_merged([part for _, _, part in items])
    except Exception:  # some case cannot compile: split the batch in two
        half = len(items) // 2
        return {**_run_merged_or_split(items[:half]), **_run_merged_or_split(items[half:])}
    share = (time.perf_counter() - start) / len(items)
    results = {}
    for (i, case, part), got in zip(items, outputs, strict=True):
        if compare(got, part.expected, case):
            results[i] = run_case(case, fn)  # a mismatch is reported as the case gives alone
        else:
            results[i] = Result(case.name, case.op, "pass", part.note.strip(), share)
    return results


def _import_alone(case: Case) -> _Imported | None:
    """``case`` imported for a batch, or None when it must run alone (excluded, several
    data sets, non-tensor values, an import error: run_case reports those)."""
    from ember.errors import FrontendError
    from ember.frontend import from_onnx

    if exclusion_reason(case.name) is not None or len(case.data_sets) != 1:
        return None
    raw_inputs, raw_expected = case.data_sets[0]
    inputs = [_as_array(v) for v in raw_inputs]
    expected = [_as_array(v) for v in raw_expected]
    if any(not isinstance(v, np.ndarray | np.generic) for v in inputs + expected):
        return None
    try:
        with np.errstate(all="ignore"):
            model, feeds, note = prepare(case, inputs)
            try:
                mod, params = from_onnx(model)
            except FrontendError as err:
                if "must be constant" not in str(err):
                    return None
                model, feeds, note = prepare(case, inputs, all_static=True)
                mod, params = from_onnx(model)
    except Exception:
        return None
    return _Imported(mod, params, feeds, expected, note)


def run_merged(parts: Sequence[_Imported]) -> list[list[np.ndarray]]:
    """Build and run imported cases as one module; the outputs of each case, in order."""
    from ember.ir import Function, IRModule, Tuple, Var, rewrite

    args: list[Var] = []
    outputs: list[Any] = []
    counts: list[int] = []
    params: dict[str, np.ndarray] = {}
    feeds: dict[str, np.ndarray] = {}
    for k, part in enumerate(parts):
        main = part.mod.main
        renamed = {id(v): Var(f"c{k}_{v.name}", v.type) for v in main.params}
        body = rewrite(main.body, functools.partial(_swap, renamed))
        fields = list(body.fields) if isinstance(body, Tuple) else [body]
        args.extend(renamed[id(v)] for v in main.params)
        outputs.extend(fields)
        counts.append(len(fields))
        params.update({f"c{k}_{n}": v for n, v in part.params.items()})
        feeds.update({f"c{k}_{n}": v for n, v in part.feeds.items()})
    merged = IRModule.from_expr(Function(tuple(args), Tuple(tuple(outputs))))
    flat = build_and_run(merged, params, feeds)
    split, at = [], 0
    for n in counts:
        split.append(flat[at : at + n])
        at += n
    return split


def _swap(table: Mapping[int, Any], node: Any, _new: object) -> Any:
    """A rewrite callback: ``node``'s replacement in ``table`` (by identity) or None."""
    return table.get(id(node))


# -- worker processes ---------------------------------------------------------------------
# Compiling means C compiler runs, so compiled sweeps run in workers: this script started
# with ``--worker MODE``. The parent stores each case in onnx's backend test layout in a
# temporary directory and sends one JSON line per batch on the worker's stdin
# ({"cases": [{"dir", "name", "op", "rtol", "atol"}, ...]}); the worker answers one JSON
# Result per case, one per line, on stdout. Plain processes rather than a multiprocessing
# pool: no pickling, no fork of a process whose runtime threads are live, a worker starts
# in about a second (it does not generate the cases again), and a case that crashes or
# hangs its worker is reported as that case's error while the sweep goes on: the rest of a
# dead worker's batch is run again case by case in a fresh worker.

#: seconds one request (a batch, or a case alone) may take before its worker is killed; the
#: rest of a batch then runs case by case, and a case alone is reported as an error.
CASE_TIMEOUT = 300.0


def worker_main(mode: str) -> int:
    """The ``--worker`` loop: run each batch of cases named on stdin, answer on stdout."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray output (Python or compiled code) goes to stderr, not the protocol
    for line in sys.stdin:
        requests = json.loads(line)["cases"]
        results: dict[int, Result] = {}
        cases: dict[int, Case] = {}
        for k, req in enumerate(requests):
            name, op = req["name"], req["op"]
            try:
                cases[k] = read_case(Path(req["dir"]), name, op, req["rtol"], req["atol"])
            except Exception as err:  # a row of the table, never an abort
                results[k] = Result(name, op, "error", f"cannot read the case: {err}")
        results.update(zip(cases, run_batch(list(cases.values()), mode), strict=True))
        for k in range(len(requests)):  # answers in the order of the request
            protocol.write(json.dumps(dataclasses.asdict(results[k]), sort_keys=True) + "\n")
        protocol.flush()
    return 0


class _Worker:
    """One worker process, started on first use and again after it died."""

    def __init__(self, mode: str, env: dict[str, str]) -> None:
        self.argv = [sys.executable, str(Path(__file__).resolve()), "--worker", mode]
        self.env = env
        self.proc: subprocess.Popen[str] | None = None

    def run(self, stored: Sequence[tuple[Case, Path]], timeout: float) -> tuple[list[Result], str]:
        """Run stored cases as one batch: their Results (fewer when the worker died or timed
        out before answering them all) and, then, why it stopped."""
        if self.proc is None:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=self.env,
            )
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        request = [
            {"dir": str(d), "name": c.name, "op": c.op, "rtol": c.rtol, "atol": c.atol}
            for c, d in stored
        ]
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            proc.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        results: list[Result] = []
        try:
            proc.stdin.write(json.dumps({"cases": request}, sort_keys=True) + "\n")
            proc.stdin.flush()
            while len(results) < len(stored):
                line = proc.stdout.readline()
                if not line:
                    break
                results.append(Result(**json.loads(line)))
        except OSError:
            pass
        finally:
            timer.cancel()
        if len(results) == len(stored):
            return results, ""
        code = proc.wait()
        self.proc = None
        why = f"timed out after {timeout:g} s" if expired.is_set() else _exit_reason(code)
        return results, f"worker {why}"

    def close(self) -> None:
        """Stop the worker: end of input, then a kill if it does not exit."""
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"crashed ({signal.Signals(-code).name})"
        except ValueError:
            return f"crashed (signal {-code})"
    return f"exited with code {code}"


def run_in_workers(
    cases: Sequence[Case],
    mode: str,
    jobs: int,
    batch: int = 1,
    timeout: float = CASE_TIMEOUT,
    progress: Progress | None = None,
) -> list[Result]:
    """Run ``cases`` in ``jobs`` worker processes, ``batch`` cases of one op per request;
    results in the order of ``cases``. Excluded cases and cases with non-tensor values
    never reach a worker (they end before any compilation, in this process)."""
    env = dict(os.environ)
    # Each worker is one of ``jobs`` processes on the machine: one thread per kernel.
    env.setdefault("EMBER_NUM_THREADS", "1")
    env.setdefault("OMP_NUM_THREADS", "1")
    fn = MODES[mode]
    results: dict[int, Result] = {}
    todo: queue.SimpleQueue[list[int]] = queue.SimpleQueue()
    for group in batches(cases, batch):
        todo.put(group)

    def handle(group: list[int], worker: _Worker, tmp: Path) -> None:
        stored: list[tuple[int, Path]] = []
        for i in group:
            case, case_dir = cases[i], tmp / f"case_{i}"
            try:
                ok = exclusion_reason(case.name) is None and write_case(case, case_dir)
            except Exception as err:  # a row of the table, never an abort
                results[i] = Result(case.name, case.op, "error", f"cannot store the case: {err}")
                continue
            if ok:
                stored.append((i, case_dir))
            else:
                results[i] = run_case(case, fn)  # settled before any compilation
        if not stored:
            return
        got, why = worker.run([(cases[i], d) for i, d in stored], timeout)
        for _, case_dir in stored:
            shutil.rmtree(case_dir, ignore_errors=True)
        for (i, _), result in zip(stored, got, strict=False):
            results[i] = result
        for i, _ in stored[len(got) :]:
            if len(stored) > 1:
                todo.put([i])  # run the rest of a dead batch case by case
            else:
                results[i] = Result(cases[i].name, cases[i].op, "error", why)

    lock = threading.Lock()

    def serve(tmp: Path) -> None:
        worker = _Worker(mode, env)
        try:
            while True:
                try:
                    group = todo.get_nowait()
                except queue.Empty:
                    return
                handle(group, worker, tmp)
                if progress is not None:
                    with lock:
                        progress(len(results), len(cases))
        finally:
            worker.close()

    with tempfile.TemporaryDirectory(prefix="ember-conformance-") as tmp:
        while not todo.empty():  # a batch re-queued as the others finished: serve again
            threads = [
                threading.Thread(target=serve, args=(Path(tmp),), daemon=True) for _ in range(jobs)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    return [results[i] for i in range(len(cases))]


def summarize(results: Sequence[Result]) -> tuple[int, int]:
    """(passed, counted) where excluded cases are not counted."""
    counted = [r for r in results if r.status != "excluded"]
    return sum(r.status == "pass" for r in counted), len(counted)


def format_table(results: Sequence[Result], verbose: bool = False) -> str:
    """A table of pass counts by op, failures (when verbose) and the overall rate."""
    by_op = _by_op(results)
    header = (
        f"{'op':<24}{'cases':>6}{'pass':>6}{'fail':>6}{'unsup':>6}{'error':>6}{'excl':>6}"
        f"{'rate':>8}"
    )
    lines = [header, "-" * len(header)]
    for op in sorted(by_op):
        rs = by_op[op]
        count = {
            s: sum(r.status == s for r in rs)
            for s in ("pass", "fail", "unsupported", "error", "excluded")
        }
        passed, counted = summarize(rs)
        rate = f"{100.0 * passed / counted:.1f}%" if counted else "-"
        lines.append(
            f"{op:<24}{len(rs):>6}{count['pass']:>6}{count['fail']:>6}"
            f"{count['unsupported']:>6}{count['error']:>6}{count['excluded']:>6}{rate:>8}"
        )
    passed, counted = summarize(results)
    overall = 100.0 * passed / counted if counted else 0.0
    lines.append("-" * len(header))
    lines.append(
        f"overall: {passed}/{counted} passed ({overall:.1f}%), {len(results) - counted} excluded"
    )
    if verbose:
        lines.extend(_not_passing(results, "not passing:"))
    return "\n".join(lines)


def _dtype_groups(dtypes: set[str]) -> str:
    """'float, int, bool' style summary of a dtype set (whole groups named once)."""
    from ember.frontend.onnx.registry import FLOAT_TYPES, INT_TYPES

    parts: list[str] = []
    rest = set(dtypes)
    for label, group in (("float*", FLOAT_TYPES), ("int*/uint*", INT_TYPES)):
        if group <= rest:
            parts.append(label)
            rest -= group
    return ", ".join(parts + sorted(rest))


def coverage_markdown(results: Sequence[Result]) -> str:
    """A markdown table of every registered ONNX handler with its opsets, dtypes and the
    conformance results of its cases (used to write docs/frontend.md)."""
    import ember.frontend.onnx  # noqa: F401  (registers the handlers)
    from ember.frontend.onnx.registry import HANDLERS

    by_op = _by_op(results)
    lines = [
        "| ONNX op | handlers since opset | input dtypes | node tests passed |",
        "|---|---|---|---|",
    ]
    for key in sorted(HANDLERS.names(), key=str.lower):
        versions = HANDLERS.get(key)
        sinces = ", ".join(str(v) for v in sorted(versions))
        dtype_sets = {h.dtypes for h in versions.values()}
        if None in dtype_sets:
            dtypes = "any"
        else:
            dtypes = _dtype_groups(set().union(*[d for d in dtype_sets if d is not None]))
        op = key.split("::")[-1]
        rs = by_op.get(op, [])
        passed, counted = summarize(rs)
        tests = f"{passed}/{counted}" if counted else "-"
        lines.append(f"| {key} | {sinces} | {dtypes} | {tests} |")
    return "\n".join(lines)


def format_comparison(
    reference: Sequence[Result], compiled: Sequence[Result], verbose: bool = False
) -> str:
    """Reference and compiled pass counts side by side, by op, and the overall rates.

    The compiled columns split what does not pass into unsupported (an op without a
    compute), fail (a wrong result) and error (a crash, in the compiler or the kernel).
    """
    ref_by_op = _by_op(reference)
    comp_by_op = _by_op(compiled)
    header = (
        f"{'op':<24}{'cases':>6}{'reference':>11}{'compiled':>10}"
        f"{'unsup':>7}{'fail':>6}{'error':>6}{'rate':>8}"
    )
    lines = [header, "-" * len(header)]
    for op in sorted(set(ref_by_op) | set(comp_by_op)):
        rs = ref_by_op.get(op, [])
        cs = comp_by_op.get(op, [])
        ref_pass, ref_counted = summarize(rs)
        comp_pass, comp_counted = summarize(cs)
        rate = f"{100.0 * comp_pass / comp_counted:.1f}%" if comp_counted else "-"
        lines.append(
            f"{op:<24}{max(len(rs), len(cs)):>6}{f'{ref_pass}/{ref_counted}':>11}"
            f"{f'{comp_pass}/{comp_counted}':>10}{_count(cs, 'unsupported'):>7}"
            f"{_count(cs, 'fail'):>6}{_count(cs, 'error'):>6}{rate:>8}"
        )
    lines.append("-" * len(header))
    for label, results in (("reference", reference), ("compiled", compiled)):
        passed, counted = summarize(results)
        overall = 100.0 * passed / counted if counted else 0.0
        lines.append(f"overall {label + ':':<11}{passed}/{counted} passed ({overall:.1f}%)")
    ref_passing = {r.case for r in reference if r.status == "pass"}
    kept = sum(r.status == "pass" for r in compiled if r.case in ref_passing)
    lines.append(f"compiled passes {kept} of the {len(ref_passing)} cases reference passes")
    if verbose:
        for label, results in (("reference", reference), ("compiled", compiled)):
            lines.extend(_not_passing(results, f"not passing ({label}):"))
    return "\n".join(lines)


def _by_op(results: Sequence[Result]) -> dict[str, list[Result]]:
    by_op: dict[str, list[Result]] = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    return by_op


def _count(results: Sequence[Result], status: str) -> int:
    return sum(r.status == status for r in results)


def _not_passing(results: Sequence[Result], title: str) -> list[str]:
    bad = [r for r in results if r.status not in ("pass", "excluded")]
    if not bad:
        return []
    return ["", title, *(f"  {r.case} [{r.status}] {r.detail}" for r in bad)]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns 0 when every counted case passed (in every mode)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated op types (default: the issue's list)")
    parser.add_argument("--all", action="store_true", help="every case onnx ships")
    parser.add_argument(
        "--mode",
        default="reference",
        choices=[*MODES, "both"],
        help="how cases run; 'both' prints reference and compiled side by side",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=2,
        help="worker processes for compiled cases (0: in this process; default 2)",
    )
    parser.add_argument(
        "-b",
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help=f"compiled cases of one op built as one library (1: each alone; default "
        f"{DEFAULT_BATCH})",
    )
    parser.add_argument("-k", dest="pattern", help="only cases whose name contains this")
    parser.add_argument(
        "--suite",
        default="node",
        choices=["node", *MODEL_SUITES],
        help="node tests (default) or one of the model suites onnx ships with data",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list every failure")
    parser.add_argument(
        "--coverage", action="store_true", help="print the markdown op coverage table"
    )
    parser.add_argument("--worker", choices=sorted(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    ops: Iterable[str] | None
    if args.all:
        ops = None
    elif args.ops:
        ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    else:
        ops = ISSUE_OPS
    node_suite = args.suite == "node"
    cases = select_cases(ops) if node_suite else list(collect_model_cases(args.suite))
    if args.pattern:
        cases = [c for c in cases if args.pattern in c.name]
    modes = ["reference", "compiled"] if args.mode == "both" else [args.mode]
    runs: dict[str, list[Result]] = {}
    timings = []
    for mode in modes:
        start = time.perf_counter()
        jobs = args.jobs if mode == "compiled" else 0
        progress = print_progress if sys.stderr.isatty() else None
        runs[mode] = run(cases, mode, jobs=jobs, batch=args.batch, progress=progress)
        seconds = time.perf_counter() - start
        where = f"{jobs} workers" if jobs > 0 else "in process"
        timings.append(f"mode {mode}: {len(cases)} cases in {seconds:.1f} s ({where})")
    if args.coverage:
        print(coverage_markdown(runs[modes[0]]))
        return 0
    if len(modes) == 2:
        print(format_comparison(runs["reference"], runs["compiled"], args.verbose))
    else:
        print(format_table(runs[modes[0]], args.verbose))
    print("\n".join(timings))
    return 0 if all(summarize(rs)[0] == summarize(rs)[1] for rs in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
