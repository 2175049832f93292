"""Helpers shared by the benchmark scripts: interleaved timing, onnxruntime sessions, the
machine and its load, and markdown tables.

The scripts put their own folder on ``sys.path`` before importing this module, so it also
works when a test loads a script by file path.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any


def best_times(
    fns: Sequence[Callable[[], object]], repeat: int, warmup: int = 2, cpu: bool = False
) -> list[float]:
    """The minimum time of each of ``fns`` over ``repeat`` interleaved rounds: wall time, or
    with ``cpu`` the calling thread's CPU time (time.thread_time), which a loaded machine
    does not inflate by preempting the thread (valid when all work runs on this thread)."""
    clock = time.thread_time if cpu else time.perf_counter
    for fn in fns:
        for _ in range(warmup):
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = clock()
            fn()
            best[k] = min(best[k], clock() - start)
    return best


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table with padded columns (docs/performance.md takes it verbatim)."""
    lines = [list(header), *[list(r) for r in rows]]
    widths = [max(len(line[k]) for line in lines) for k in range(len(header))]
    out = []
    for i, line in enumerate(lines):
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) + " |")
        if i == 0:
            out.append("| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(out)


def interleaved_medians(
    fns: Sequence[Callable[[], object]],
    repeat: int,
    warmup: int = 2,
    clocks: Sequence[Callable[[], float]] | None = None,
) -> list[float]:
    """Median time of each of ``fns`` over ``repeat`` rounds that call each once.

    Interleaving makes a burst of load from other processes hit every engine alike.
    ``clocks`` gives each function its clock (default: wall time for all).
    """
    timers = list(clocks) if clocks is not None else [time.perf_counter] * len(fns)
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            clock = timers[k]
            start = clock()
            fn()
            times[k].append(clock() - start)
    return [statistics.median(t) for t in times]


def rotated_medians(
    fns: Sequence[Callable[[], object]],
    repeat: int,
    clock: Callable[[], float] = time.perf_counter,
    warmup: int = 2,
) -> list[float]:
    """Median time of each of ``fns`` over ``repeat`` rounds whose order rotates (round ``r``
    starts at ``fns[r % n]``), so that every function follows every other equally often.

    For comparing like with like (one model built by two back ends): what ran just before a
    call changes its time. On a 0.05 ms model, a 1-thread call that followed ember at 2
    threads and then a pause of some 0.1-0.5 ms (onnxruntime's run) took 1.35-1.56x the
    thread CPU time of the same call after another 1-thread call, so the column that always
    sat there read 1.3-1.45x slow (docs/llvm.md)."""
    n = len(fns)
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for r in range(repeat):
        for k in [(r + j) % n for j in range(n)]:
            start = clock()
            fns[k]()
            times[k].append(clock() - start)
    return [statistics.median(t) for t in times]


def clock_for(threads: int, cpu_clock: bool) -> Callable[[], float]:
    """The calling thread's CPU time for a single-threaded engine when ``cpu_clock`` (so
    that other processes preempting it do not count), else wall time."""
    return time.thread_time if cpu_clock and threads == 1 else time.perf_counter


def ort_session(model_bytes: bytes, threads: int, spinning: bool = False) -> Any:
    """An onnxruntime CPU session with ``threads`` intra-op threads; with ``spinning``,
    onnxruntime's default of pool threads that spin between runs."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # onnxruntime's pool threads spin after a run by default (~30 ms after each run on this
    # Zen 5, measured by the process's CPU time during a sleep), taking a core from whatever
    # runs next: in interleaved rounds that doubled ember's resnet50 time (12x bert's).
    # models.py times the spinning default separately (ORT_SPIN_PAUSE_S).
    if not spinning:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])


def machine() -> str:
    """``<n> cores, <CPU model>`` of this machine."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}"


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages: other processes distort every timing."""
    if not hasattr(os, "getloadavg"):
        return "n/a"
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_table(
    description: str,
    cases: Sequence[Any],
    measure: Callable[[Any, int, int], list[str]],
    header: Sequence[str],
    argv: Sequence[str] | None = None,
    repeat: int = 15,
) -> int:
    """The command line of a per-case micro-benchmark: ``--only`` (name prefixes),
    ``--repeat``, ``--threads``; measures every selected case (each has a ``name``) with
    ``measure(case, repeat, threads)`` and prints a markdown table. Exit status 2 when
    ``--only`` matches nothing."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--only", default="", help="comma-separated case names or prefixes")
    parser.add_argument("--repeat", type=int, default=repeat, help="timed rounds per engine")
    parser.add_argument("--threads", type=int, default=1, help="threads of both engines")
    args = parser.parse_args(argv)
    wanted = [s for s in args.only.split(",") if s]
    chosen = [c for c in cases if not wanted or any(c.name.startswith(w) for w in wanted)]
    if not chosen:
        known = ", ".join(c.name for c in cases)
        print(f"no case matches {args.only!r}; known: {known}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        os.environ["EMBER_NUM_THREADS"] = str(args.threads)
        os.environ.setdefault("EMBER_CACHE_DIR", tmp)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"threads {args.threads}; repeat {args.repeat} (best of); load {load:.2f}")
        rows = []
        for case in chosen:
            rows.append(measure(case, args.repeat, args.threads))
            print("  " + " | ".join(rows[-1]), file=sys.stderr, flush=True)
        print(markdown_table(header, rows))
    return 0
