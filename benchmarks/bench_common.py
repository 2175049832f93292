"""Helpers shared by the benchmark scripts: interleaved best-of timing and markdown tables.

The scripts put their own folder on ``sys.path`` before importing this module, so it also
works when a test loads a script by file path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


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
