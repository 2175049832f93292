"""``ember inspect``: list a saved set or exported library, show one artifact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ember.cli.main import main
from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.export import export_library

C_SRC = b"#include <ember/runtime_api.h>\nEMBER_DLL int32_t seven(void) { return 7; }\n"


def sample() -> ArtifactSet:
    return ArtifactSet(
        [
            Artifact("c", "native", "lib0.c", C_SRC),
            Artifact("exec", "metadata", "graph.json", b'{"nodes":[1,2]}'),
        ]
    )


def test_list_saved_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sample().save(tmp_path / "out")
    assert main(["inspect", str(root)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{root}: saved artifact set"
    assert out[1].split() == ["codegen", "loader", "file", "size", "sha256"]
    assert out[2].split()[:4] == ["c", "native", "lib0.c", str(len(C_SRC))]
    assert out[3].split()[:3] == ["exec", "metadata", "graph.json"]


def test_show_json_and_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sample().save(tmp_path / "out")
    assert main(["inspect", str(root), "--show", "graph.json"]) == 0
    assert capsys.readouterr().out == '{\n  "nodes": [\n    1,\n    2\n  ]\n}\n'
    assert main(["inspect", str(root), "--show", "c/lib0.c"]) == 0
    assert capsys.readouterr().out == C_SRC.decode()


def test_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sample().save(tmp_path / "out")
    assert main(["inspect", str(root), "--show", "nope.c"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ember inspect: error: no artifact named 'nope.c'")
    (root / "exec" / "graph.json").write_bytes(b"{}")
    assert main(["inspect", str(root)]) == 1
    assert "does not match" in capsys.readouterr().err


@pytest.mark.cc
def test_exported_library_in_a_fresh_process(tmp_path: Path) -> None:
    lib = export_library(sample(), tmp_path / "model.so")
    run = [sys.executable, "-m", "ember", "inspect", str(lib)]
    listing = subprocess.run(run, capture_output=True, text=True, check=True).stdout
    assert "shared library with 1 embedded artifacts" in listing
    assert "model.so" in listing and "graph.json" in listing
    shown = subprocess.run([*run, "--show", "model.so"], capture_output=True, text=True, check=True)
    assert "  seven\n" in shown.stdout
    meta = subprocess.run(
        [*run, "--show", "graph.json"], capture_output=True, text=True, check=True
    )
    assert meta.stdout.startswith('{\n  "nodes"')


@pytest.mark.cc
def test_corrupt_library_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lib = export_library(sample(), tmp_path / "model.so")
    data = bytearray(lib.read_bytes())
    pos = data.find(b'{"nodes":[1,2]}')
    data[pos + 2] ^= 0x20
    lib.write_bytes(bytes(data))
    assert main(["inspect", str(lib)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ember inspect: error: artifact exec/graph.json")
    assert "does not match its recorded sha256" in err
