"""README.md, walked top to bottom as a new user would, in a fresh temporary directory.

Every fenced block runs in the order it appears, with the working directory a new temporary
directory holding only a small model saved as ``model.onnx`` and its inputs ``in.npz``:

* ``make demo`` runs through the checkout's Makefile (its install step skipped: the test
  runs inside the installed environment); ``make test`` is skipped, as it would recurse;
* every ``.venv/bin/ember ...`` line runs through ``sh`` as written (``.venv/bin`` is a shim
  for this interpreter), once with its optional ``[...]`` parts dropped and once with them;
* the Python block runs as a script in a fresh process (relative paths included);
* the benchmark lines (minutes to hours each) are checked to exist and, when they take
  flags, to answer ``--help``.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

pytestmark = [pytest.mark.cc, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Lines the walk never runs, with the reason.
SKIPPED = {"make test": "it runs this test"}


def _blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block, in README order."""
    return re.findall(r"```(\w*)\n(.*?)```", README.read_text(), flags=re.S)


def _model(path: Path) -> None:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[4, 4]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "readme",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1, 1])],
        initializer=[w],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _workdir(tmp: Path) -> dict[str, str]:
    """Fill ``tmp`` with the model, its inputs and a ``.venv/bin`` shim; return the env."""
    _model(tmp / "model.onnx")
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype("float32")
    np.savez(tmp / "in.npz", x=x)
    bin_dir = tmp / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, args in (("python", ""), ("ember", " -m ember")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)}{args} "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT)}


def _variants(line: str) -> list[str]:
    """The line without its optional [...] parts, and (if it has any) with their contents."""
    plain = re.sub(r"\[[^\]]*\]", "", line)
    full = re.sub(r"\[([^\]]*)\]", r"\1", line)
    return [plain] if plain == full else [plain, full]


def _shell_commands(block: str) -> list[str]:
    """The commands of a shell block, comments dropped, each optional variant its own."""
    commands = []
    for raw in block.splitlines():
        line = raw.split("#")[0].strip()
        if line:
            commands += _variants(line)
    return commands


def _run(command: str, cwd: Path, env: dict[str, str]) -> None:
    if command in SKIPPED:
        return
    if command.startswith("make "):
        target = command.split()[1]
        argv = ["make", "-f", str(ROOT / "Makefile"), target, "STAMP=", f"PY={sys.executable}"]
        out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    elif command.startswith(".venv/bin/python benchmarks/"):
        script = ROOT / shlex.split(command)[1]
        assert script.is_file(), f"{command}: {script} does not exist"
        if "argparse" not in script.read_text():
            return
        argv = [sys.executable, str(script), "--help"]
        out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    else:
        out = subprocess.run(
            ["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True
        )
    assert out.returncode == 0, f"README command {command!r} failed:\n{out.stdout}\n{out.stderr}"


def test_readme_walks_top_to_bottom(tmp_path: Path) -> None:
    env = _workdir(tmp_path)
    blocks = _blocks()
    assert _shell_commands(blocks[0][1])[:2] == ["make demo", "make test"]
    ran_python = False
    for lang, text in blocks:
        if lang == "python":
            script = tmp_path / "readme_snippet.py"
            script.write_text(text)
            _run(f".venv/bin/python {script.name}", tmp_path, env)
            ran_python = True
            continue
        for command in _shell_commands(text):
            _run(command, tmp_path, env)
    assert ran_python, "the README lost its Python snippet"
    assert (tmp_path / "model.so").exists() and (tmp_path / "model.tar").exists()
    assert np.load(tmp_path / "out.npz")


def test_readme_links_exist() -> None:
    prose = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)#]+)", prose):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), f"README links {target}, which does not exist"
    for name in re.findall(r"`(docs/[\w./]+\.md)`", prose):
        assert (ROOT / name).exists(), f"README names {name}, which does not exist"


def test_getting_started_python_block_runs(tmp_path: Path) -> None:
    (snippet,) = re.findall(
        r"```python\n(.*?)```", (ROOT / "docs" / "getting_started.md").read_text(), flags=re.S
    )
    env = _workdir(tmp_path)
    (tmp_path / "getting_started.py").write_text(snippet)
    _run(".venv/bin/python getting_started.py", tmp_path, env)
    assert (tmp_path / "model.so").exists() and (tmp_path / "model_artifacts").is_dir()
