"""export_library: one deterministic shared library holding native code and the blob."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_artifact_samples import (
    c_artifact,
    json_artifact,
    load_test_json,
    load_test_metadata,
    run_all,
    sample_set,
)

from ember.errors import ArtifactError, ModuleLoadError, SerializationError
from ember.runtime.artifact import Artifact, InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.blob import BLOB_FORMAT_VERSION, BLOB_MAGIC, BLOB_SYMBOL, read_library_blob
from ember.runtime.elf import ElfFile
from ember.runtime.export import blob_assembly, export_library
from ember.runtime.library_module import LibraryModule, load_module
from ember.runtime.libruntime import include_dir
from ember.runtime.loading import load_artifacts, loader_func_name
from ember.runtime.registry import find_python_func, register_func, remove_global_func
from ember.support.toolchain import compile_shared
from ember.tools.inspectors.builtin import exported_functions

META = Artifact("exec", "metadata", "graph.json", b'{"entry": "add_one"}')


def full_set() -> ArtifactSet:
    return ArtifactSet([*sample_set(), META])


def test_blob_assembly_quotes_the_path() -> None:
    asm = blob_assembly(Path('/tmp/we"ird/b.bin'))
    assert f".globl {BLOB_SYMBOL}" in asm
    assert '.incbin "/tmp/we\\"ird/b.bin"' in asm


@pytest.mark.cc
def test_export_holds_native_code_and_every_other_artifact(tmp_path: Path) -> None:
    lib = export_library(full_set(), tmp_path / "lib.so")
    data = lib.read_bytes()
    assert {"add_one", "scale"} <= set(exported_functions(data, "lib.so"))
    assert read_library_blob(data, "lib.so") == [json_artifact(), META]


@pytest.mark.cc
def test_export_is_byte_identical(tmp_path: Path) -> None:
    a = full_set().export_library(tmp_path / "a" / "lib.so")
    b = export_library(full_set(), tmp_path / "b" / "other-name.so")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.cc
def test_export_without_native_artifacts(tmp_path: Path) -> None:
    lib = export_library(ArtifactSet([json_artifact()]), tmp_path / "lib.so")
    assert read_library_blob(lib.read_bytes(), "lib.so") == [json_artifact()]


@pytest.mark.cc
def test_large_blob_is_embedded_intact(tmp_path: Path) -> None:
    big = Artifact("ext", "test_json", "weights.bin", bytes(range(256)) * 40000)
    lib = export_library(ArtifactSet([big]), tmp_path / "lib.so")
    assert read_library_blob(lib.read_bytes(), "lib.so") == [big]


def test_export_refuses_in_memory_artifacts(tmp_path: Path) -> None:
    jit = InMemoryArtifact("llvmjit", "lib0.jit", lambda: None, "JIT handle", "target 'llvm'")  # type: ignore[arg-type,return-value]
    with pytest.raises(
        ArtifactError, match=r"llvmjit/lib0.jit.*target 'llvm' instead|target 'llvm'"
    ):
        export_library(ArtifactSet([*sample_set(), jit]), tmp_path / "lib.so")
    assert not (tmp_path / "lib.so").exists()


def test_export_of_a_module_without_a_set(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="not loaded from an ArtifactSet"):
        export_library(object(), tmp_path / "lib.so")


@pytest.mark.cc
def test_corrupt_and_truncated_libraries_are_refused(tmp_path: Path) -> None:
    data = export_library(full_set(), tmp_path / "lib.so").read_bytes()
    with pytest.raises(SerializationError, match="truncated or corrupt|outside"):
        read_library_blob(data[: len(data) // 2], "lib.so")
    with pytest.raises(SerializationError, match="not an ELF"):
        read_library_blob(b"\0" * 100, "lib.so")
    blob = ElfFile(data, "lib.so").symbol_bytes(BLOB_SYMBOL)
    assert blob is not None and blob.startswith(BLOB_MAGIC)
    start = data.find(blob)
    wrong_version = bytearray(data)
    wrong_version[start + 8] = BLOB_FORMAT_VERSION + 1
    with pytest.raises(SerializationError, match="format version"):
        read_library_blob(bytes(wrong_version), "lib.so")
    oversized = bytearray(data)
    oversized[start + 24 : start + 32] = (1 << 40).to_bytes(8, "little")
    with pytest.raises(SerializationError, match="claims"):
        read_library_blob(bytes(oversized), "lib.so")
    flipped = bytearray(data)
    pos = data.find(b'"entry"', start)
    flipped[pos] ^= 0x01
    with pytest.raises(ArtifactError, match="recorded sha256"):
        read_library_blob(bytes(flipped), "lib.so")


FRESH_PROCESS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import ember.runtime.export  # registers the blob-aware shared-library loader
from ember.runtime import load_module, register_func
from test_artifact_samples import load_test_json, load_test_metadata, run_all
register_func("runtime.module.loadbinary_test_json", load_test_json)
register_func("runtime.module.loadbinary_metadata", load_test_metadata, override=True)
print(json.dumps(run_all(load_module(sys.argv[2]))))
"""


def run_fresh(lib: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_SCRIPT, str(Path(__file__).parent), str(lib)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


@pytest.fixture
def test_loaders() -> Iterator[None]:
    names = [loader_func_name("test_json"), loader_func_name("metadata")]
    saved = {name: find_python_func(name) for name in names}
    register_func(names[0], load_test_json, override=True)
    register_func(names[1], load_test_metadata, override=True)
    yield
    for name, previous in saved.items():
        if previous is None:
            remove_global_func(name)
        else:
            register_func(name, previous, override=True)


@pytest.mark.cc
def test_round_trip_in_a_fresh_process_matches_loading_in_memory(
    tmp_path: Path, test_loaders: None
) -> None:
    arts = full_set()
    in_memory = run_all(load_artifacts(arts))
    lib = export_library(arts, tmp_path / "lib.so")
    fresh = run_fresh(lib)
    # The host is the exported library itself instead of the cached native link;
    # everything else, the tree included, is the same.
    assert fresh == json.loads(json.dumps(in_memory))
    assert fresh["tree"] == ["test_metadata", [["library", [["test_json", []]]]]]
    assert fresh["add_one"] == 42 and fresh["run"] == 2


@pytest.mark.cc
def test_a_loaded_module_exports_the_same_library(tmp_path: Path, test_loaders: None) -> None:
    top = load_artifacts(full_set())
    a = export_library(top, tmp_path / "a.so")
    b = export_library(full_set(), tmp_path / "b.so")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.cc
def test_load_module_in_process_and_refusals(tmp_path: Path, test_loaders: None) -> None:
    lib = export_library(full_set(), tmp_path / "lib.so")
    top = load_module(lib)
    assert top.type_key == "test_metadata" and top["run"](9) == 10
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(lib.read_bytes()[:2000])
    with pytest.raises(SerializationError, match="truncated or corrupt"):
        load_module(truncated)


@pytest.mark.cc
def test_load_module_reports_missing_loaders(tmp_path: Path) -> None:
    arts = ArtifactSet([Artifact("odd", "no_such_loader_xyz", "a.bin", b"")])
    lib = export_library(arts, tmp_path / "lib.so")
    with pytest.raises(ModuleLoadError, match="loadbinary_no_such_loader_xyz"):
        load_module(lib)


@pytest.mark.cc
def test_plain_shared_library_still_loads(tmp_path: Path) -> None:
    src = tmp_path / "plain.c"
    src.write_bytes(c_artifact().content)
    lib = compile_shared([src], tmp_path / "plain.so", include_dirs=[include_dir()])
    mod = load_module(lib)
    assert isinstance(mod, LibraryModule) and mod["add_one"](1) == 2
