"""Compile the modules of a big LLVM build on every core, while their IR is still written.

llvmlite runs every LLVM call of a process behind one lock, so threads cannot optimise
two modules at once; helper processes can. A ``CompilePool`` starts ``jobs - 1`` helpers
at once (``python -P -c <the text of worker.py>``: the standard library and llvmlite
only, no ember import, a tenth of a second to start), so they are ready by the time the
first module's IR text is written. ``submit(k, text)`` queues a module as soon as its
text exists: a helper takes it while this process writes the next one (the IR text is
Python work, a fifth of the build), and once every text is written this process takes
modules from the same queue until it is empty. ``results()`` returns them in module
order. Texts and results travel through pipes (length-prefixed pickles), nothing
touches the file system. A helper that cannot start or fails puts its module back in
the queue and stops, so the result never depends on helpers: where a module is compiled
does not change its bytes (the same LLVM, machine and passes, a fresh context each).

Example::

    pool = CompilePool(spec.as_tuple(), embed=True, jobs=2)
    pool.submit(0, text_a)
    pool.submit(1, text_b)
    (bitcode_a, object_a), (bitcode_b, object_b) = pool.results()
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from ember.codegen.llvm import worker
from ember.codegen.llvm.worker import MachineTuple, read_frame, write_frame

#: the helper's program: worker.py's own text, run with ``python -P -c``.
_WORKER_SOURCE = Path(worker.__file__).read_text(encoding="utf-8")
#: seconds between looks at the queue (a helper waiting for work, this process waiting
#: for a helper's last module)
_POLL = 0.01

Result = tuple[bytes, bytes]


def usable_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def helpers_possible() -> bool:
    """Whether helpers can be started: embedded in another program, ``sys.executable``
    may not be a Python."""
    return Path(sys.executable).name.startswith("python")


def assign(sizes: Sequence[int], jobs: int) -> list[list[int]]:
    """Indices per worker, longest first onto the least loaded (worker 0 is this
    process); deterministic. ``assign(sizes, 1)[0]`` is the longest-first order."""
    loads = [0] * jobs
    work: list[list[int]] = [[] for _ in range(jobs)]
    for k in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        w = min(range(jobs), key=lambda j: (loads[j], j))
        work[w].append(k)
        loads[w] += sizes[k]
    return work


class Helper:
    """One helper process and the thread that feeds it modules from the pool's queue."""

    def __init__(self, pool: CompilePool) -> None:
        self.pool = pool
        self.error = ""
        self.proc: subprocess.Popen[bytes] | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _start(self) -> tuple[IO[bytes], IO[bytes]] | None:
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-c", _WORKER_SOURCE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as err:
            self.error = f"could not start {sys.executable}: {err}"
            return None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        return self.proc.stdin, self.proc.stdout

    def _run(self) -> None:
        pipes = self._start()
        if pipes is None:
            return
        to_helper, from_helper = pipes
        try:
            write_frame(to_helper, {"machine": self.pool.machine, "embed": self.pool.embed})
            while True:
                item = self.pool.take()
                if item is None:
                    return
                self._compile(item, to_helper, from_helper)
                if self.error:
                    return
        except OSError as err:  # the helper ended before it was asked anything
            self.error = str(err)
        finally:
            self._stop()

    def _compile(self, item: tuple[int, str], to_helper: IO[bytes], from_helper: IO[bytes]) -> None:
        """Have the helper compile ``item``; on any failure put it back for another."""
        got: object = None
        try:
            write_frame(to_helper, item[1])
            got = read_frame(from_helper)
        except Exception as err:  # noqa: BLE001 - any failure: the module goes back
            self.error = f"helper ended: {type(err).__name__}: {err}"
        if isinstance(got, list) and len(got) == 2:
            self.pool.done(item[0], (bytes(got[0]), bytes(got[1])))
            return
        if not self.error:
            self.error = str(got[1]) if isinstance(got, tuple) else "bad answer"
        self.pool.give_back(item)

    def _stop(self) -> None:
        if self.proc is None:
            return
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def join(self) -> None:
        """Wait until the helper has stopped."""
        self.thread.join()


class CompilePool:
    """``worker.compile_text`` of submitted IR texts on this process and ``jobs - 1``
    helpers (``jobs`` 0: one per usable core), started at once; see the module doc."""

    def __init__(self, m: MachineTuple, embed: bool, jobs: int = 0) -> None:
        self.machine = m
        self.embed = embed
        self._queue: queue.Queue[tuple[int, str]] = queue.Queue()
        self._results: dict[int, Result] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._count = 0
        jobs = jobs or usable_cores()
        self.helpers = [Helper(self) for _ in range(jobs - 1)] if helpers_possible() else []

    def submit(self, k: int, text: str) -> None:
        """Queue module ``k`` (numbered from 0 in submission order)."""
        self._count = max(self._count, k + 1)
        self._queue.put((k, text))

    def take(self) -> tuple[int, str] | None:
        """The next queued module for a helper, or None once the pool is closing."""
        while not self._closing.is_set():
            try:
                return self._queue.get(timeout=_POLL)
            except queue.Empty:
                continue
        return None

    def done(self, k: int, result: Result) -> None:
        """Record the result of module ``k``."""
        with self._lock:
            self._results[k] = result

    def give_back(self, item: tuple[int, str]) -> None:
        """Queue a module again (its helper failed): this process compiles it."""
        self._queue.put(item)

    def results(self) -> list[Result]:
        """Compile what is still queued here, wait for the helpers, stop them; the
        results in module order (RuntimeError if LLVM rejects a text)."""
        try:
            while True:
                with self._lock:
                    if len(self._results) >= self._count:
                        break
                try:
                    k, text = self._queue.get(timeout=_POLL)
                except queue.Empty:
                    if not any(h.thread.is_alive() for h in self.helpers):
                        self._compile_rest()
                    continue
                self.done(k, worker.compile_text(text, self.machine, self.embed))
        finally:
            self.close()
        return [self._results[k] for k in range(self._count)]

    def _compile_rest(self) -> None:
        """Every helper has stopped: compile whatever is still queued here."""
        while True:
            try:
                k, text = self._queue.get_nowait()
            except queue.Empty:
                return
            self.done(k, worker.compile_text(text, self.machine, self.embed))

    def close(self) -> None:
        """Stop the helpers (idempotent)."""
        self._closing.set()
        for helper in self.helpers:
            helper.join()


def compile_groups(
    texts: Sequence[str], m: MachineTuple, embed: bool, jobs: int = 0
) -> list[Result]:
    """``worker.compile_text`` of every text, spread over ``jobs`` workers (0: one per
    usable core), longest first; results in the order of ``texts``."""
    jobs = min(len(texts), jobs or usable_cores())
    if jobs <= 1:
        return [worker.compile_text(t, m, embed) for t in texts]
    pool = CompilePool(m, embed, jobs)
    order = assign([len(t) for t in texts], 1)[0]
    for k in order:
        pool.submit(k, texts[k])
    return pool.results()
