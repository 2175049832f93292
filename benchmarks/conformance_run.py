"""Conformance runs in this process: modes, one case, and batches built as one library.

A *mode* is a function ``(model, inputs) -> outputs`` named in ``MODES``: ``reference``
(ember's importer and numpy reference evaluator) or ``compiled`` (``ember.build`` for the C
target, ``ember.load_artifacts``, one graph executor run); each has an ``-unfrozen`` twin
that feeds every input at run time. ``run_case`` prepares a case (shape-like inputs baked
in as constants: "frozen"), runs it and compares with the expected outputs within onnx's
own ``tolerances``; it returns a ``Result`` row and
never raises. ``run_batch`` runs cases of one op, building compiled ones as one merged
module and falling back to each case alone, so every reported failure is the case's own.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from conformance_cases import Case, Result, exclusion_reason

#: a mode: runs an ONNX model on its named inputs and returns its outputs.
ModeFn = Callable[[onnx.ModelProto, dict[str, np.ndarray]], list[np.ndarray]]


def run_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Import ``model`` and run it with the numpy reference evaluator."""
    from ember.frontend import from_onnx
    from ember.ir import evaluate

    mod, params = from_onnx(model, shape=sequence_shapes(inputs, model))
    return evaluate(mod, flat_feeds(inputs), params)


def run_compiled(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Import ``model``, build it for the C target, load it and run the graph executor once."""
    import ember

    mod, params = ember.import_onnx(model, shape=sequence_shapes(inputs, model))
    return build_and_run(mod, params, flat_feeds(inputs))


def sequence_shapes(
    inputs: Mapping[str, object], model: onnx.ModelProto | None = None
) -> dict[str, object] | None:
    """The element shapes of the sequence inputs (lists of arrays), as ``from_onnx`` takes
    them (a compiled model takes each element as an input ``<name>.<i>``), with every other
    input's shape (such models often leave their dims symbolic); also the fed shapes when a
    tensor input of ``model`` has a symbolic dim; otherwise None."""
    shapes: dict[str, object] = {
        n: [np.shape(e) for e in v] for n, v in inputs.items() if isinstance(v, list)
    }
    shapes.update({n: None for n, v in inputs.items() if v is None})  # empty optionals
    if not shapes and not (model is not None and _symbolic_inputs(model)):
        return None
    tensors = {n: np.shape(v) for n, v in inputs.items() if not isinstance(v, list | None)}
    return {**tensors, **shapes}


def _symbolic_inputs(model: onnx.ModelProto) -> bool:
    """True when a tensor input of ``model`` has a dim without a fixed value."""
    return any(
        not d.HasField("dim_value")
        for i in model.graph.input
        if i.type.HasField("tensor_type") and i.type.tensor_type.HasField("shape")
        for d in i.type.tensor_type.shape.dim
    )


def flat_feeds(inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The feeds with each sequence input as one input per element (``<name>.<i>``); an
    empty optional (None) is no input of the compiled model."""
    out: dict[str, np.ndarray] = {}
    for name, value in inputs.items():
        if value is None:
            continue
        if isinstance(value, list):
            out.update({f"{name}.{i}": np.asarray(e) for i, e in enumerate(value)})
        else:
            out[name] = value
    return out


def flat_values(values: Sequence[object]) -> list[object]:
    """Expected outputs with each sequence (a list) as its elements, as ember returns them."""
    out: list[object] = []
    for v in values:
        if isinstance(v, list):
            out.extend(_as_array(e) for e in v)
        else:
            out.append(v)
    return out


def _is_value(value: object) -> bool:
    """A tensor, or a sequence of tensors (what a compiled case can feed and compare)."""
    if isinstance(value, list):
        return all(isinstance(_as_array(e), np.ndarray | np.generic) for e in value)
    return isinstance(value, np.ndarray | np.generic)


#: the environment variable naming the target compiled cases are built for.
TARGET_ENV = "EMBER_CONFORMANCE_TARGET"


def build_and_run(
    mod: Any, params: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """``ember.build`` for the target of ``EMBER_CONFORMANCE_TARGET`` (default ``c``; the
    sweep's ``--target`` sets it for its workers), ``ember.load_artifacts``, one graph
    executor run."""
    import ember

    target = os.environ.get(TARGET_ENV) or "c"
    artifacts = ember.build(mod, target=target, params=params)
    dev = ember.cpu(0)
    executor = ember.GraphExecutor(ember.load_artifacts(artifacts, dev)["default"](dev))
    for name, value in inputs.items():
        executor.set_input(name, value)
    executor.run()
    return [executor.get_output(i).numpy() for i in range(executor.get_num_outputs())]


#: how a case is run: name -> function(model, inputs) -> outputs.
MODES: dict[str, ModeFn] = {"reference": run_reference, "compiled": run_compiled}

#: suffix of a mode name that feeds every input at run time (nothing frozen).
UNFROZEN = "-unfrozen"
MODES.update({f"{name}{UNFROZEN}": fn for name, fn in list(MODES.items())})


#: relative size of one unit in the last place of the narrow float types: onnx's runner
#: uses one tolerance per case (rtol 1e-3 by default), finer than these types can tell apart,
#: so a result rounded once to the narrow type from a float32 value one float32 ulp away
#: (another exp, another summation order) would fail; their rtol is at least one ulp.
NARROW_ULP = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def tolerances(dtype: np.dtype, case: Case) -> tuple[float, float]:
    """(rtol, atol) for an output: onnx's own for the case (its runner's defaults, or what
    the case sets); for float16/bfloat16 outputs rtol is at least one ulp of the type."""
    return max(case.rtol, NARROW_ULP.get(np.dtype(dtype).name, 0.0)), case.atol


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
        if w.dtype.name.startswith("float8"):  # exact values, NaN where NaN
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            if not np.array_equal(g64, w64, equal_nan=True):
                return f"output {i}: {int(np.sum(~((g64 == w64) | np.isnan(w64))))} elements differ"
        elif w.dtype.kind in "fc" or w.dtype.name == "bfloat16":
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


def prepare(
    case: Case, inputs: Sequence[object], all_static: bool = False, freeze: bool = True
) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """(model, runtime feeds, note) for one data set: the model with its shape-like inputs
    (or with ``all_static`` every input) baked in; with ``freeze`` False nothing is baked."""
    inits = {t.name for t in case.model.graph.initializer}
    names = [vi.name for vi in case.model.graph.input if vi.name not in inits]
    feeds = {
        n: [_as_array(e) for e in v] if isinstance(v, list) else v if v is None else np.asarray(v)
        for n, v in zip(names, inputs, strict=False)
    }
    source, note = case.model, ""  # older opsets: the importer upgrades them itself
    if not freeze:
        return source, feeds, " (unfrozen)"
    tensors = {n: v for n, v in feeds.items() if not isinstance(v, list | None)}  # sequences stay
    baked = list(tensors) if all_static else static_inputs(source, tensors)
    model, runtime = bake_inputs(source, feeds, baked)
    return model, runtime, note + (" (all inputs static)" if all_static else "")


def run_case(case: Case, mode: ModeFn, freeze: bool = True) -> Result:
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
            values = [v for v in inputs if v is not None] + list(expected)  # None: empty optional
            if any(not _is_value(v) for v in values):
                return Result(case.name, case.op, "unsupported", "non-tensor inputs or outputs")
            model, runtime, note = prepare(case, inputs, freeze=freeze)
            try:
                with np.errstate(all="ignore"):
                    got = mode(model, runtime)
            except FrontendError as err:
                if not freeze or "must be constant" not in str(err):
                    raise
                model, runtime, note = prepare(case, inputs, all_static=True)
                with np.errstate(all="ignore"):
                    got = mode(model, runtime)
            problem = compare(got, flat_values(expected), case)
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
    if mode.endswith(UNFROZEN):
        return [run_case(c, fn, freeze=False) for c in cases]
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
