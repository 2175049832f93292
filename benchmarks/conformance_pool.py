"""Conformance worker processes: a sweep spread over ``--jobs`` subprocesses, JSON lines.

Compiling means C compiler runs, so compiled sweeps run in workers: ``onnx_conformance.py
--worker MODE``, whose loop is ``worker_main``. ``run_in_workers`` stores each case in
onnx's backend test layout in a temporary directory and sends one JSON line per batch on a
worker's stdin (``{"cases": [{"dir", "name", "op", "rtol", "atol"}, ...]}``); the worker
answers one JSON ``Result`` per case, one per line, in the order asked, on stdout. Results
come back in the order of the cases. Plain processes rather than a multiprocessing pool: no
pickling, no fork of a process whose runtime threads are live, a worker starts in about a
second (it does not generate the cases again), and a case that crashes or hangs its worker
(``CASE_TIMEOUT``) is reported as that case's error while the sweep goes on: the rest of a
dead worker's batch is run again case by case in a fresh worker.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from conformance_cases import Case, Result, exclusion_reason, read_case, write_case
from conformance_run import MODES, batches, run_batch, run_case

#: a progress callback: (cases done, cases in all).
Progress = Callable[[int, int], None]

#: the script that runs as a worker (with ``--worker MODE``).
ENTRY_POINT = Path(__file__).resolve().with_name("onnx_conformance.py")

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
        self.argv = [sys.executable, str(ENTRY_POINT), "--worker", mode]
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
