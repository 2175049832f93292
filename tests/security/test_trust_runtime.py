"""Artifact metadata never becomes a command, kernel names never reach libc, and cache
entries are loaded only while they match the hash recorded when they were built.

Before: manifest cflags ``-wrapper /bin/sh,-c,...`` ran a shell command in
export_library and load_artifacts; a graph naming ``exit`` called libc's exit; a truncated
cached library crashed with SIGBUS and a planted one loaded silently.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hostile_models import reference

from ember.config import config_from
from ember.errors import ArtifactError, EmberError, EmberValueError, ExecutorError
from ember.executor import GraphExecutorModule
from ember.runtime import cache_entry, load_artifacts, loading
from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.export import export_library
from ember.runtime.library_module import LibraryModule
from ember.runtime.libruntime import build as build_runtime

pytestmark = pytest.mark.cc

HOSTILE_FLAGS = [
    "-wrapper /bin/sh,-c,touch\\ {marker}",
    "-save-temps=obj -dumpdir {marker}",
    "-o {marker}",
    "@{marker}",
    "-fplugin={marker}",
    "-march=-wrapper",
    "-D'X=$(touch {marker})'",
    "-O2 'unbalanced",
]


def with_cflags(arts: ArtifactSet, cflags: str) -> ArtifactSet:
    """``arts`` with ``cflags`` set on every native artifact."""
    out = []
    for a in arts:
        if isinstance(a, Artifact) and a.loader == "native":
            a = Artifact(a.codegen_id, a.loader, a.file_name, a.content, {"cflags": cflags})
        out.append(a)
    return ArtifactSet(out)


@pytest.mark.parametrize("template", HOSTILE_FLAGS)
def test_metadata_flags_outside_the_allow_list_are_refused(
    template: str, small_artifacts: ArtifactSet, tmp_path: Path, private_cache: Path
) -> None:
    marker = tmp_path / "pwned"
    hostile = with_cflags(small_artifacts, template.format(marker=marker))
    with pytest.raises(ArtifactError, match="cflags"):
        load_artifacts(hostile)
    with pytest.raises(ArtifactError, match="cflags"):
        export_library(hostile, tmp_path / "lib.so")
    assert not marker.exists()
    assert not (tmp_path / "lib.so").exists()


def test_saved_manifest_flags_are_checked(
    small_artifacts: ArtifactSet, tmp_path: Path, private_cache: Path
) -> None:
    saved = small_artifacts.save(tmp_path / "set")
    manifest = saved / "manifest.json"
    text = manifest.read_text()
    marker = tmp_path / "pwned"
    assert '"cflags"' in text
    doc = json.loads(text)
    for entry in doc["artifacts"]:
        if entry.get("metadata", {}).get("cflags"):
            entry["metadata"]["cflags"] = f"-O3 -wrapper /bin/sh,-c,touch\\ {marker}"
    manifest.write_text(json.dumps(doc))
    with pytest.raises(ArtifactError, match="-wrapper"):  # even in a set the user trusts
        load_artifacts(ArtifactSet.load(saved), trust_native=True)
    assert not marker.exists()


def test_the_flags_the_c_back_end_emits_are_allowed(small_artifacts: ArtifactSet) -> None:
    emitted = {a.metadata.get("cflags") for a in small_artifacts.native()} - {None}
    assert emitted
    for text in emitted:
        loading.split_flags(str(text), "test")
    loading.split_flags("-O0 -march=native -mcpu=cortex-a72 -ffp-contract=fast -lmvec -DN=4", "t")


@pytest.mark.parametrize("name", ["abort", "exit", "free", "EmberAPISetLastError", "ember_x\0y"])
def test_kernel_names_resolve_only_inside_the_library(
    name: str, small_artifacts: ArtifactSet
) -> None:
    factory = load_artifacts(small_artifacts)
    (host,) = [m for m in factory.imports if isinstance(m, LibraryModule)]
    assert host._get_function(name) is None
    graph = json.loads(small_artifacts.get("graph_executor", "graph.json").content)
    kernel = next(n for n in graph["nodes"] if n["op"] == "tvm_op")
    kernel["attrs"]["func_name"] = name
    with pytest.raises(ExecutorError, match="lacks"):
        GraphExecutorModule(json.dumps(graph), host)


def test_generated_kernels_still_resolve(small_artifacts: ArtifactSet) -> None:
    factory = load_artifacts(small_artifacts)
    mod = factory["default"]()
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    mod["set_input"]("x", x)
    mod["run"]()
    np.testing.assert_allclose(mod["get_output"](0).numpy(), reference(x), rtol=1e-6)


def _cached_library(arts: ArtifactSet) -> Path:
    return loading.native_cache_path(arts.native())


@pytest.mark.parametrize("damage", ["truncate", "patch", "plant", "symlink", "record"])
def test_damaged_cache_entries_are_rebuilt(
    damage: str, small_artifacts: ArtifactSet, private_cache: Path, tmp_path: Path
) -> None:
    lib = loading.link_native_cached(small_artifacts.native())  # built, not opened
    good = lib.read_bytes()
    record = lib.with_name(lib.name + cache_entry.HASH_SUFFIX)
    assert record.read_text().strip() == cache_entry.file_sha256(lib)
    if damage == "truncate":
        lib.write_bytes(good[: len(good) // 3])
    elif damage == "patch":
        data = bytearray(good)
        data[len(data) // 2 : len(data) // 2 + 16] = b"\xcc" * 16  # int3: SIGTRAP if run
        lib.write_bytes(bytes(data))
    elif damage == "plant":
        lib.write_bytes(build_runtime().read_bytes())
        record.unlink()
    elif damage == "symlink":
        lib.unlink()
        os.symlink(build_runtime(), lib)
    else:
        record.write_text("0" * 64 + "\n")
    assert not cache_entry.verify_entry(lib)
    x = np.ones((2, 3), np.float32)
    mod = load_artifacts(small_artifacts)["default"]()
    mod["set_input"]("x", x)
    mod["run"]()
    np.testing.assert_allclose(mod["get_output"](0).numpy(), reference(x))
    assert not lib.is_symlink() and lib.read_bytes() == good
    assert cache_entry.verify_entry(lib)


def test_cache_location_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert config_from({"EMBER_CACHE_DIR": ""}).cache_dir.is_absolute()
    assert config_from({"EMBER_CACHE_DIR": ""}).cache_dir != Path.cwd()
    assert config_from({"HOME": "", "EMBER_CACHE_DIR": ""}).cache_dir != Path("/.cache/ember")
    with pytest.raises(EmberValueError, match="absolute"):
        config_from({"EMBER_CACHE_DIR": "relative/cache"})


def test_a_cache_path_that_is_a_file_is_a_clear_error(
    small_artifacts: ArtifactSet, private_cache: Path
) -> None:
    private_cache.write_text("not a directory")
    with pytest.raises(EmberValueError, match="not a directory"):
        load_artifacts(small_artifacts)


def test_cache_errors_are_ember_errors(private_cache: Path) -> None:
    private_cache.mkdir()
    (private_cache / "artifacts").write_text("x")
    with pytest.raises(EmberError):
        cache_entry.cache_subdir("artifacts")
