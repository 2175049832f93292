"""Slow tier: a few hundred seeded mutations of a model, a package and an exported library,
each handled in a child process (tests/security/fuzz_child.py).

Asserted for every input: the child is not killed by a signal, does not hang (time limit),
raises nothing but EmberError, and writes no file outside its cache and temporary
directories (its temporary directory is empty afterwards).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hostile_models import relu_add_model
from set_replay import run_child

from ember.runtime.artifact_set import ArtifactSet
from ember.tools.package import write_package

pytestmark = [pytest.mark.slow, pytest.mark.cc]

CHILD = Path(__file__).with_name("fuzz_child.py")
ROOT = Path(__file__).resolve().parents[2]
SEED = 20261125
BATCH = 20
BATCH_SECONDS = 240


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One seeded mutation: flipped bytes, a truncation, an insertion or a copied chunk."""
    buf = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:
        for _ in range(rng.randint(1, 8)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        del buf[rng.randrange(len(buf)) :]
    elif kind == 2:
        pos = rng.randrange(len(buf))
        buf[pos:pos] = rng.randbytes(rng.randint(1, 64))
    elif kind == 3:
        start = rng.randrange(len(buf))
        chunk = buf[start : start + rng.randint(1, 512)]
        pos = rng.randrange(len(buf))
        buf[pos : pos + len(chunk)] = chunk
    else:  # a run of 0xff or 0x00 (sizes and counts become huge or zero)
        pos = rng.randrange(len(buf))
        buf[pos : pos + 8] = bytes([rng.choice([0, 0xFF])]) * 8
    return bytes(buf)


def make_inputs(work: Path, arts: ArtifactSet, count: int) -> list[str]:
    """Write ``count`` mutations of each seed input; return the child's ``KIND PATH`` lines."""
    rng = random.Random(SEED)
    seeds = work / "seeds"
    seeds.mkdir()
    model = relu_add_model().SerializeToString()  # type: ignore[attr-defined]
    package = write_package(arts, seeds / "model.tar").read_bytes()
    library = arts.export_library(seeds / "lib.so").read_bytes()
    inputs = work / "inputs"
    inputs.mkdir()
    lines = []
    for kinds, suffix, data in (
        (("model",), ".onnx", model),
        (("inspect", "run"), ".tar", package),
        (("inspect",), ".so", library),
    ):
        for k in range(count):
            path = inputs / f"m{k}{suffix}"
            path.write_bytes(mutate(data, rng))
            lines += [f"{kind} {path}" for kind in kinds]
    return lines


def replay(lines: list[str], work: Path) -> list[str]:
    """Feed ``lines`` to child processes in batches; return one failure text per bad input."""
    env = dict(os.environ)
    env.update(
        EMBER_CACHE_DIR=str(work / "cache"),
        TMPDIR=str(work / "tmp"),
        HOME=str(work / "home"),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    failures: list[str] = []
    pending = list(lines)
    while pending:
        batch = pending[:BATCH]
        out, code = run_child(CHILD, batch, env, work / "home", BATCH_SECONDS)
        started = [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("START")]
        if code == 0:
            pending = pending[len(batch) :]
            continue
        last = started[-1] if started else 0
        what = "hang" if code is None else f"signal {-code}" if code < 0 else f"exit {code}"
        detail = [ln for ln in out.splitlines() if ln.startswith("NONEMBER")]
        failures.append(f"{batch[last]}: {what} {' '.join(detail)}")
        pending = pending[last + 1 :]
    return failures


def test_seeded_mutations_are_refused_cleanly(small_artifacts: ArtifactSet, tmp_path: Path) -> None:
    work = tmp_path
    for name in ("cache", "tmp", "home"):
        (work / name).mkdir()
    lines = make_inputs(work, small_artifacts, count=int(os.environ.get("EMBER_FUZZ_COUNT", 80)))
    assert len(lines) >= 300
    failures = replay(lines, work)
    assert not failures, "\n".join(failures)
    assert sorted(p.name for p in work.iterdir()) == ["cache", "home", "inputs", "seeds", "tmp"]
    assert list((work / "tmp").iterdir()) == []
    assert list((work / "home").iterdir()) == []
