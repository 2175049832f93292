"""Compile the groups of a big LLVM build on every core: helper processes and this one.

llvmlite runs every LLVM call of a process behind one lock, so threads cannot optimise
two modules at once; helper processes can. ``compile_groups(texts, machine, embed, jobs)``
gives each group of kernels (its own LLVM module, ``build.split_groups``) to one of
``jobs`` workers: this process and ``jobs - 1`` helpers started as ``python -P -c <the
text of worker.py>`` (the standard library and llvmlite only, no ember import: a tenth
of a second to start). A helper gets its groups' IR text and returns their bitcode and
object code through pipes; nothing touches the file system. A helper that cannot start
or fails leaves its groups to this process, so the result never depends on helpers:
where a group is compiled does not change its bytes (the same LLVM, machine and passes).

Example::

    results = compile_groups([text_a, text_b], spec.as_tuple(), embed=True, jobs=2)
    bitcode_a, object_a = results[0]
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from ember.codegen.llvm import worker
from ember.codegen.llvm.worker import MachineTuple

#: the helper's program: worker.py's own text, run with ``python -P -c``.
_WORKER_SOURCE = Path(worker.__file__).read_text(encoding="utf-8")


def usable_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def assign(sizes: Sequence[int], jobs: int) -> list[list[int]]:
    """Group indices per worker, longest first onto the least loaded (worker 0 is this
    process); deterministic."""
    loads = [0] * jobs
    work: list[list[int]] = [[] for _ in range(jobs)]
    for k in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        w = min(range(jobs), key=lambda j: (loads[j], j))
        work[w].append(k)
        loads[w] += sizes[k]
    return work


class Helper:
    """One helper process compiling a list of texts while this process does its share."""

    def __init__(self, texts: list[str], m: MachineTuple, embed: bool) -> None:
        self.result: list[tuple[bytes, bytes]] | None = None
        self.error = ""
        request = pickle.dumps({"machine": m, "texts": texts, "embed": embed})
        self.thread = threading.Thread(target=self._run, args=(request,), daemon=True)
        self.thread.start()

    def _run(self, request: bytes) -> None:
        try:
            proc = subprocess.run(
                [sys.executable, "-P", "-c", _WORKER_SOURCE],
                input=request,
                capture_output=True,
                check=False,
            )
        except OSError as err:
            self.error = f"could not start {sys.executable}: {err}"
            return
        if proc.returncode != 0:
            self.error = proc.stderr.decode(errors="replace")[-2000:]
            return
        out = pickle.loads(proc.stdout)
        if isinstance(out, tuple):
            self.error = str(out[1])
            return
        self.result = out

    def join(self) -> list[tuple[bytes, bytes]] | None:
        """The helper's results, or None when it failed (``error`` says why)."""
        self.thread.join()
        return self.result


def compile_groups(
    texts: Sequence[str], m: MachineTuple, embed: bool, jobs: int = 0
) -> list[tuple[bytes, bytes]]:
    """``worker.compile_text`` of every text, spread over ``jobs`` workers (0: one per
    usable core); results in the order of ``texts``."""
    jobs = min(len(texts), jobs or usable_cores())
    # embedded in another program, sys.executable may not be a Python to start helpers with
    if jobs <= 1 or not Path(sys.executable).name.startswith("python"):
        return [worker.compile_text(t, m, embed) for t in texts]
    work = assign([len(t) for t in texts], jobs)
    helpers = [(ks, Helper([texts[k] for k in ks], m, embed)) for ks in work[1:]]
    results: dict[int, tuple[bytes, bytes]] = {}
    for k in work[0]:
        results[k] = worker.compile_text(texts[k], m, embed)
    for ks, helper in helpers:
        got = helper.join()
        if got is None or len(got) != len(ks):  # compile them here: same bytes, slower
            got = [worker.compile_text(texts[k], m, embed) for k in ks]
        results.update(zip(ks, got, strict=True))
    return [results[k] for k in range(len(texts))]
