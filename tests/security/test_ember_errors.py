"""Every error a user can cause is an EmberError, and one executor is safe to share.

Before: an unbalanced quote in CC, a cache path that is a file, ``--seed -1``, ``-o`` at a
directory, ``get_output(out=<read-only>)``, ``nd.empty`` of 2**60 bytes and deeply nested
JSON raised builtin exceptions; one executor run from 8 threads gave 1,413 wrong results
of 1,600.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hostile_models import reference

from ember import nd
from ember.cli.main import main
from ember.errors import EmberError
from ember.executor import GraphExecutor
from ember.formats.graph_json import load_graph_json
from ember.runtime import cpu, load_artifacts
from ember.runtime.artifact_set import ArtifactSet
from ember.support.toolchain import compile_shared, compiler
from ember.target import Target

DEEP = "[" * 100_000 + "]" * 100_000


def _manifest_deep(tmp: Path) -> object:
    (tmp / "manifest.json").write_text(DEEP)
    return ArtifactSet.load(tmp)


def _compile_to_directory(tmp: Path) -> object:
    src = tmp / "a.c"
    src.write_text("int f(void) { return 0; }\n")
    return compile_shared([src], tmp)


CASES: dict[str, Callable[[Path], object]] = {
    "unbalanced quote in CC": lambda tmp: compiler("cc 'x"),
    "unbalanced quote in a target": lambda tmp: Target.create("c -mcpu='x"),
    "nd.empty of 2**60 bytes": lambda tmp: nd.empty((2**58,), "float32"),
    "nd.empty with a negative dim": lambda tmp: nd.empty((-1, 2), "float32"),
    "deeply nested graph.json": lambda tmp: load_graph_json(DEEP),
    "deeply nested manifest": _manifest_deep,
    "graph.json of bad bytes": lambda tmp: load_graph_json(b"\xff\xfe\x00"),
    "compile_shared to a directory": _compile_to_directory,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_user_errors_are_ember_errors(case: str, tmp_path: Path) -> None:
    with pytest.raises(EmberError):
        CASES[case](tmp_path)


@pytest.mark.parametrize(
    ("argv", "code"),
    [  # refused flag values exit 2 (ember.errors.UsageError), other failures 1
        (["run", "{pkg}", "--seed", "-1"], 2),
        (["run", "{pkg}", "--repeat", "0"], 2),
        (["run", "{pkg}", "--outputs", "{tmp}"], 2),
        (["run", "{tmp}"], 2),
        (["run", "{tmp}/missing.tar"], 2),
        (["compile", "{tmp}/missing.onnx"], 2),
        (["compile", "{pkg}", "-o", "{tmp}"], 2),
        (["inspect", "{tmp}/missing"], 1),
    ],
)
def test_cli_errors_exit_with_a_message(
    argv: list[str], code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pkg = tmp_path / "model.tar"
    pkg.write_bytes(b"not a tar")
    args = [a.format(pkg=pkg, tmp=tmp_path) for a in argv]
    try:
        assert main(args) == code
    except SystemExit as exc:  # refused by the argument parser
        assert exc.code == code
    err = capsys.readouterr().err
    assert "error:" in err and "Traceback" not in err


@pytest.fixture
def executor(small_artifacts: ArtifactSet) -> GraphExecutor:
    """A graph executor of the small model."""
    return GraphExecutor(load_artifacts(small_artifacts)["default"](cpu(0)))


@pytest.mark.cc
def test_get_output_into_a_read_only_array(executor: GraphExecutor) -> None:
    executor.set_input("x", np.ones((2, 3), np.float32))
    executor.run()
    frozen = np.zeros((2, 3), np.float32)
    frozen.flags.writeable = False
    with pytest.raises(EmberError, match="read-only"):
        executor.get_output(0, out=frozen)


def _hammer(executor: GraphExecutor, use_lock: bool) -> list[tuple[int, np.ndarray]]:
    results: list[tuple[int, np.ndarray]] = []
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        x = np.full((2, 3), float(k) - 3.5, np.float32)
        try:
            for _ in range(50):
                out = np.empty((2, 3), np.float32)
                if use_lock:
                    with executor.module.lock():
                        executor.set_input("x", x)
                        executor.run()
                        executor.get_output(0, out=out)
                else:
                    executor.set_input("x", x)
                    executor.run()
                    executor.get_output(0, out=out)
                results.append((k, out))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    return results


@pytest.mark.cc
def test_one_executor_shared_by_eight_threads(executor: GraphExecutor) -> None:
    expected = {k: reference(np.full((2, 3), float(k) - 3.5, np.float32)) for k in range(8)}
    locked = _hammer(executor, use_lock=True)
    assert len(locked) == 400
    for k, out in locked:
        np.testing.assert_array_equal(out, expected[k])
    # without holding the lock every call is still atomic: each result is some thread's
    valid = [e.tobytes() for e in expected.values()]
    assert all(out.tobytes() in valid for _, out in _hammer(executor, use_lock=False))
