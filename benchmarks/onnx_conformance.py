"""ONNX conformance: run the official ONNX node test cases through ember and print pass rates.

The cases are generated at run time from the installed onnx package
(``onnx.backend.test.case.node.collect_testcases``: each case is a model plus input and
expected output arrays), nothing is written to the repository. Each case is imported with
``ember.frontend.from_onnx`` and run by a *mode*: a function ``(model, inputs) ->
outputs`` in ``MODES``. ``reference`` runs the numpy reference evaluator; ``compiled``
runs ``ember.build`` for the C target (``--target llvm`` or ``llvmjit``: the LLVM back
ends), ``ember.load_artifacts`` and the graph executor.
Compiled sweeps run in worker processes (``--jobs``) and build up to ``--batch`` cases of
one op as one library. A compiled case is counted as *unsupported* when an op has no
compute (OpNotSupportedError), *fail* on a wrong result, *error* on any other exception
or a crashed or hung worker.

    python benchmarks/onnx_conformance.py                      # the issue's op list
    python benchmarks/onnx_conformance.py --ops Conv,Relu -v   # some ops, with failures
    python benchmarks/onnx_conformance.py --mode both          # reference | compiled
    python benchmarks/onnx_conformance.py --mode compiled --all --jobs 2 --batch 8
    python benchmarks/onnx_conformance.py --mode compiled --all --suite every --unfrozen

Every compiled case runs in a worker subprocess with a time limit (``CASE_TIMEOUT``) and is
compared with onnx's own tolerances. "Frozen" (the default) bakes shape-like inputs (axes,
pads, scales...) into initializers, as a deployed model has them; ``--unfrozen`` also runs
each case with every input fed at run time, and both counts are printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

# The sibling conformance_* modules are imported by plain name: when this file is loaded by
# path (the tests do) its folder is not on sys.path unless we put it there.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from conformance_cases import (  # noqa: E402
    EXCLUDED,
    EXCLUDED_PATTERNS,
    ISSUE_OPS,
    MODEL_SUITES,
    Case,
    Result,
    collect_cases,
    collect_model_cases,
    exclusion_reason,
    read_case,
    select_cases,
    write_case,
)
from conformance_pool import (  # noqa: E402
    CASE_TIMEOUT,
    Progress,
    _Worker,
    run_in_workers,
    worker_main,
)
from conformance_report import (  # noqa: E402
    coverage_markdown,
    format_comparison,
    format_table,
    summarize,
)
from conformance_run import (  # noqa: E402
    DEFAULT_BATCH,
    MODES,
    TARGET_ENV,
    UNFROZEN,
    ModeFn,
    _as_array,
    _import_alone,
    bake_inputs,
    batches,
    build_and_run,
    compare,
    prepare,
    run_batch,
    run_case,
    run_compiled,
    run_merged,
    run_reference,
    static_inputs,
    tolerances,
)

#: the names this entry point offers (tests and callers reach them through this module).
__all__ = [
    "CASE_TIMEOUT",
    "DEFAULT_BATCH",
    "EXCLUDED",
    "EXCLUDED_PATTERNS",
    "ISSUE_OPS",
    "MODEL_SUITES",
    "MODES",
    "UNFROZEN",
    "Case",
    "ModeFn",
    "Progress",
    "Result",
    "_Worker",
    "_as_array",
    "_import_alone",
    "bake_inputs",
    "batches",
    "build_and_run",
    "collect_cases",
    "collect_model_cases",
    "compare",
    "coverage_markdown",
    "exclusion_reason",
    "format_comparison",
    "format_table",
    "main",
    "prepare",
    "print_progress",
    "read_case",
    "run",
    "run_batch",
    "run_case",
    "run_compiled",
    "run_in_workers",
    "run_merged",
    "run_reference",
    "select_cases",
    "static_inputs",
    "summarize",
    "tolerances",
    "worker_main",
    "write_case",
]


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
        choices=["node", *MODEL_SUITES, "every"],
        help="node tests (default), one of the model suites onnx ships with data, or every "
        "suite (one table each, then the totals)",
    )
    parser.add_argument(
        "--json", help="with --suite every: write every result (suite, mode) to this file"
    )
    parser.add_argument(
        "--unfrozen",
        action="store_true",
        help="also run each mode with every input fed at run time and print both counts",
    )
    parser.add_argument(
        "--target",
        default="c",
        help="target compiled cases are built for: c (default), llvm or llvmjit (any target "
        "string; the workers inherit it through EMBER_CONFORMANCE_TARGET)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="list every failure")
    parser.add_argument(
        "--coverage", action="store_true", help="print the markdown op coverage table"
    )
    parser.add_argument("--worker", choices=sorted(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # its target comes from the environment of the sweep that started it
        return worker_main(args.worker)
    os.environ[TARGET_ENV] = args.target
    ops: Iterable[str] | None
    if args.all:
        ops = None
    elif args.ops:
        ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    else:
        ops = ISSUE_OPS
    if args.suite == "every":
        return _every_suite(args, ops)
    node_suite = args.suite == "node"
    cases = select_cases(ops) if node_suite else list(collect_model_cases(args.suite))
    if args.pattern:
        cases = [c for c in cases if args.pattern in c.name]
    modes = ["reference", "compiled"] if args.mode == "both" else [args.mode]
    if args.unfrozen:
        modes += [f"{m}{UNFROZEN}" for m in modes if not m.endswith(UNFROZEN)]
    runs: dict[str, list[Result]] = {}
    timings = []
    for mode in modes:
        start = time.perf_counter()
        jobs = args.jobs if mode.startswith("compiled") else 0
        progress = print_progress if sys.stderr.isatty() else None
        runs[mode] = run(cases, mode, jobs=jobs, batch=args.batch, progress=progress)
        seconds = time.perf_counter() - start
        where = f"{jobs} workers" if jobs > 0 else "in process"
        timings.append(f"mode {mode}: {len(cases)} cases in {seconds:.1f} s ({where})")
    if args.coverage:
        print(coverage_markdown(runs[modes[0]]))
        return 0
    if modes == ["reference", "compiled"]:
        print(format_comparison(runs["reference"], runs["compiled"], args.verbose))
    else:
        print(format_table(runs[modes[0]], args.verbose))
        for mode in modes[1:]:
            print(f"\n== mode {mode}")
            print(format_table(runs[mode], args.verbose))
    print("\n".join(timings))
    print("\n".join(_overall_line(mode, runs[mode]) for mode in modes))
    return 0 if all(summarize(rs)[0] == summarize(rs)[1] for rs in runs.values()) else 1


def _overall_line(label: str, results: Sequence[Result]) -> str:
    passed, counted = summarize(results)
    rate = 100.0 * passed / counted if counted else 0.0
    return f"{label}: {passed}/{counted} passed ({rate:.1f}%)"


def _every_suite(args: argparse.Namespace, ops: Iterable[str] | None) -> int:
    """Every suite in turn (tables per suite), then the frozen/unfrozen totals over all."""
    modes = [args.mode] if args.mode != "both" else ["reference", "compiled"]
    if args.unfrozen:
        modes += [f"{m}{UNFROZEN}" for m in modes if not m.endswith(UNFROZEN)]
    totals: dict[str, list[Result]] = {m: [] for m in modes}
    lines = []
    rows: list[dict[str, object]] = []
    for suite in ("node", *MODEL_SUITES):
        cases = select_cases(ops) if suite == "node" else list(collect_model_cases(suite))
        if args.pattern:
            cases = [c for c in cases if args.pattern in c.name]
        for mode in modes:
            jobs = args.jobs if mode.startswith("compiled") else 0
            results = run(cases, mode, jobs=jobs, batch=args.batch)
            totals[mode] += results
            rows += [{**dataclasses.asdict(r), "suite": suite, "mode": mode} for r in results]
            print(f"\n== suite {suite}, mode {mode}")
            print(format_table(results, args.verbose))
            lines.append(_overall_line(f"{suite} {mode}", results))
    print("\n".join(lines + [_overall_line(f"all suites {m}", totals[m]) for m in modes]))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    return 0 if all(summarize(r)[0] == summarize(r)[1] for r in totals.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
