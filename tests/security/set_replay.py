"""Run mutated artifact sets in child processes (tests/security/set_fuzz_child.py).

:func:`replay` writes each batch of mutated sets, feeds their paths to one child, and turns
what the child printed (or the signal that ended it, or its hang) into one verdict per
mutation: ``ok``, ``ember <ErrorType>`` (both fine), or a failure text (``signal N``,
``hang``, ``exit N``, ``NONEMBER <type>: <message>``). A child killed by a signal is
restarted after the input that killed it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from set_mutations import Mutation, write_mutated

CHILD = Path(__file__).with_name("set_fuzz_child.py")
ROOT = Path(__file__).resolve().parents[2]
#: sets per child process (a child's start, imports included, is about 0.5 s)
BATCH = 40
#: a batch's time limit: loading a cached model and running it takes milliseconds (resnet8:
#: 7 ms); the first load of a model compiles its C (resnet8: 2.5 s at load 3)
BATCH_SECONDS = 120
#: glibc's checking allocator, when present: heap corruption aborts at once, as a signal
MALLOC_DEBUG = Path("/lib/x86_64-linux-gnu/libc_malloc_debug.so.0")


def child_env(work: Path) -> dict[str, str]:
    """The environment of a child: private cache, temporary and home directories."""
    env = dict(os.environ)
    env.update(
        EMBER_CACHE_DIR=str(work / "cache"),
        TMPDIR=str(work / "tmp"),
        HOME=str(work / "home"),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    if MALLOC_DEBUG.exists():
        env.update(LD_PRELOAD=str(MALLOC_DEBUG), MALLOC_CHECK_="3")
    for name in ("cache", "tmp", "home"):
        (work / name).mkdir(parents=True, exist_ok=True)
    return env


def run_child(
    child: Path, lines: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> tuple[str, int | None]:
    """Feed ``lines`` to a fresh ``child`` script: its stdout and exit code (None: it hung
    past ``timeout`` seconds). Shared with test_mutation_replay.py."""
    try:
        proc = subprocess.run(
            [sys.executable, str(child)],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
            timeout=timeout,
        )
        return proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        raw = exc.stdout or b""
        return (raw.decode() if isinstance(raw, bytes) else raw), None


def replay(cases: Sequence[tuple[Path, Mutation]], work: Path) -> dict[str, str]:
    """Verdict of each ``(saved set, mutation)`` by the mutation's id (``<set>: <name>``)."""
    env = child_env(work)
    verdicts: dict[str, str] = {}
    pending = list(cases)
    serial = 0
    while pending:
        batch = pending[:BATCH]
        sets = work / "sets"
        paths = []
        for root, mutation in batch:
            serial += 1
            paths.append(str(write_mutated(root, mutation, sets / f"s{serial}")))
        out, code = run_child(CHILD, paths, env, work / "home", BATCH_SECONDS)
        shutil.rmtree(sets)
        done = {}
        detail = ""
        for line in out.splitlines():
            word, _, rest = line.partition(" ")
            if word == "DONE":
                n, _, verdict = rest.partition(" ")
                done[int(n)] = verdict
            elif word == "NONEMBER":
                detail = rest.partition(" ")[2]
        started = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("START")]
        for k, verdict in done.items():
            verdicts[case_id(*batch[k])] = verdict
        if code == 0:
            pending = pending[len(batch) :]
            continue
        last = started[-1] if started else 0
        if code is None:
            what = "hang"
        elif code < 0:
            what = f"signal {-code}"
        else:
            what = f"NONEMBER {detail}" if detail else f"exit {code}"
        verdicts[case_id(*batch[last])] = what
        pending = pending[last + 1 :]
    return verdicts


def case_id(root: Path, mutation: Mutation) -> str:
    """``<set directory name>: <file>: <label>``."""
    return f"{root.name}: {mutation.name}"


def is_failure(verdict: str) -> bool:
    """Whether a verdict breaks the rule (anything but a clean run or an EmberError)."""
    return not (verdict == "ok" or verdict.startswith("ember "))
