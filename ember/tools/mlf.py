"""Model Library Format: write a build as one tar, read it back, load it, run it without Python.

The layout is :mod:`ember.formats.mlf`. ``write_mlf`` stores every artifact where the
layout says, ember's C runtime, the model header and, for ``c``-interface AOT builds, a
``main.c`` + ``Makefile`` that build the model into a standalone program (``make test``
runs the shipped test vectors and prints PASS or FAIL with the time per run). The tar is
deterministic. ``read_mlf`` validates ``metadata.json`` against the schema, checks every
member's hash and that no member is unlisted, and rebuilds the ArtifactSet;
``load_module("model.tar")`` goes through the ``runtime.module.loadfile_tar`` loader
registered here (an ember package tar is recognised too). Nothing from the tar is run
but the C compiler on its sources.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ember.errors import ArtifactError, ModuleLoadError, SerializationError
from ember.formats.memory_map import MEMORY_MAP_FILE
from ember.formats.metadata import ModelMetadata
from ember.formats.mlf import METADATA_JSON, MLF_VERSION, check_metadata, host_path, other_path
from ember.formats.package import PACKAGE_JSON, package_index
from ember.runtime.artifact import NATIVE_LOADER, Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.device import cpu
from ember.runtime.library_module import LOADER_PREFIX
from ember.runtime.libruntime import include_dir, source_path
from ember.runtime.loading import load_artifacts
from ember.runtime.module import Module
from ember.runtime.registry import find_python_func, register_func
from ember.runtime.strings import check_no_strings
from ember.support.tarball import read_tar, write_tar
from ember.tools.cortexm.boards import board_files
from ember.tools.cortexm.rules import board_rules
from ember.tools.package import load_package
from ember.tools.standalone import main_c, makefile, readme

GRAPH_FILE = "graph.json"
PARAMS_FILE = "params.bin"


@dataclass(frozen=True)
class TestVectors:
    """Inputs and the outputs expected for them, with the tolerance to compare by."""

    __test__ = False  # not a pytest test class, whatever its name

    inputs: Mapping[str, np.ndarray]
    expected: Sequence[np.ndarray]
    rtol: float = 1e-5
    atol: float = 1e-6


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _metadata(artifacts: ArtifactSet) -> ModelMetadata:
    for art in artifacts:
        if isinstance(art, Artifact) and art.file_name == "metadata.json":
            return ModelMetadata.from_json(art.content)
    raise ArtifactError("the artifact set has no metadata.json; build it with ember.build")


def mlf_files(
    artifacts: ArtifactSet,
    target: str = "",
    ir_text: str = "",
    test_vectors: TestVectors | None = None,
) -> dict[str, bytes]:
    """Every member of the MLF tar of ``artifacts`` (name -> content)."""
    md = _metadata(artifacts)
    mod = md.mod_name
    files: dict[str, bytes] = {}
    listed: dict[str, dict[str, str]] = {}
    memory_map: Any = None
    for art in artifacts:
        if not isinstance(art, Artifact):
            raise ArtifactError(
                f"artifact {art.codegen_id}/{art.file_name} lives in memory only and cannot be "
                "written to a Model Library Format tar; build for a file-based target (c, llvm)"
            )
        if art.loader == NATIVE_LOADER:
            path = host_path(art.file_name)
        elif art.file_name == GRAPH_FILE:
            path = f"executor-config/graph/{mod}.graph"
        elif art.file_name == PARAMS_FILE:
            path = f"parameters/{mod}.params"
        else:
            path = other_path(art.codegen_id, art.file_name)
        if art.file_name == MEMORY_MAP_FILE:
            memory_map = json.loads(art.content)
        entry = {"codegen_id": art.codegen_id, "loader": art.loader, "artifact": art.file_name}
        if "cflags" in art.metadata:
            entry["cflags"] = str(art.metadata["cflags"])
        files[path] = art.content
        listed[path] = entry
        if art.file_name == f"ember_{mod}.h":
            files[f"include/{art.file_name}"] = art.content
    if ir_text:
        files[f"src/{mod}.ir"] = ir_text.encode()
    for header in sorted(Path(include_dir()).rglob("*.h")):
        files[f"runtime/include/{header.relative_to(include_dir()).as_posix()}"] = (
            header.read_bytes()
        )
    runtime_src = Path(source_path()).parent
    for src in sorted(runtime_src.iterdir()):
        if src.suffix in (".c", ".h") and src.name != "python_ffi.c":
            files[f"runtime/src/{src.name}"] = src.read_bytes()
    vectors = None
    if test_vectors is not None:
        files["test/inputs.bin"] = b"".join(
            np.ascontiguousarray(test_vectors.inputs[p.name], dtype=p.dtype).tobytes()
            for p in md.inputs
        )
        files["test/expected.bin"] = b"".join(
            np.ascontiguousarray(e, dtype=p.dtype).tobytes()
            for e, p in zip(test_vectors.expected, md.outputs, strict=True)
        )
        vectors = {
            "inputs": "test/inputs.bin",
            "expected": "test/expected.bin",
            "rtol": test_vectors.rtol,
            "atol": test_vectors.atol,
        }
    cflags = next((e["cflags"] for e in listed.values() if "cflags" in e), "-O2")
    if md.executor == "aot" and md.interface_api == "c":
        kernels = [
            a.content for a in artifacts if isinstance(a, Artifact) and a.loader == NATIVE_LOADER
        ]
        dtypes = [p.dtype for p in (*md.inputs, *md.outputs)]
        check_no_strings(kernels, dtypes, "Model Library Format (standalone program)")
        rtol = test_vectors.rtol if test_vectors else 1e-5
        atol = test_vectors.atol if test_vectors else 1e-6
        files["main.c"] = main_c(md, rtol, atol).encode()
        files["Makefile"] = (
            makefile(mod, cflags) + board_rules(cflags, vectors is not None)
        ).encode()
        files.update(board_files(md, cflags, rtol, atol, vectors is not None))
    files["README.md"] = readme(md, target).encode()
    for name, data in files.items():
        listed.setdefault(name, {"codegen_id": "mlf", "loader": "none"})["sha256"] = _sha(data)
    top = {
        "version": MLF_VERSION,
        "model_name": mod,
        "target": target,
        "executors": [md.executor],
        "interface_api": md.interface_api,
        "metadata": md.to_json_obj(),
        "memory_map": memory_map,
        "test_vectors": vectors,
        "files": dict(sorted(listed.items())),
    }
    files[METADATA_JSON] = (json.dumps(top, indent=1, sort_keys=True) + "\n").encode()
    return files


def write_mlf(
    artifacts: ArtifactSet,
    path: str | os.PathLike[str],
    target: str = "",
    ir_text: str = "",
    test_vectors: TestVectors | None = None,
) -> Path:
    """Write the Model Library Format tar of ``artifacts`` to ``path`` (deterministic)."""
    return write_tar(path, mlf_files(artifacts, target, ir_text, test_vectors))


def read_mlf(path: str | os.PathLike[str]) -> tuple[ArtifactSet, dict[str, Any]]:
    """The ArtifactSet stored in an MLF tar and its ``metadata.json``, after every check."""
    files = read_tar(path)
    if METADATA_JSON not in files:
        raise SerializationError(f"{path}: no {METADATA_JSON}; not a Model Library Format tar")
    top = check_metadata(files[METADATA_JSON])
    listed: dict[str, dict[str, str]] = top["files"]
    unlisted = sorted(set(files) - set(listed) - {METADATA_JSON})
    missing = sorted(set(listed) - set(files))
    if unlisted or missing:
        raise SerializationError(
            f"{path}: members and metadata.json disagree: unlisted {unlisted[:5]}, missing "
            f"{missing[:5]}"
        )
    artifacts = []
    for name in sorted(listed):
        entry = listed[name]
        if _sha(files[name]) != entry["sha256"]:
            raise SerializationError(f"{path}: member {name!r} does not match its sha256")
        if "artifact" in entry:
            meta = {"cflags": entry["cflags"]} if "cflags" in entry else {}
            artifacts.append(
                Artifact(entry["codegen_id"], entry["loader"], entry["artifact"], files[name], meta)
            )
    return ArtifactSet(artifacts), top


def load_mlf(path: str | os.PathLike[str]) -> Module:
    """The executor factory of an MLF tar (its C sources compiled and linked, as any build)."""
    artifacts, top = read_mlf(path)
    if "-mcpu=cortex-m" in top["target"]:
        raise ModuleLoadError(
            f"{path} was built for a microcontroller ({top['target']!r}) and does not load on "
            "this host; unpack it and run `make board-test` (docs/deploy.md), or build for 'c'"
        )
    return load_artifacts(artifacts, cpu(0))


def _load_tar(path: str) -> Module:
    """``runtime.module.loadfile_tar``: an MLF tar, or an ember package."""
    members = package_index(path)  # names only: a package's weights are not read twice
    if METADATA_JSON in members and PACKAGE_JSON not in members:
        return load_mlf(path)
    if PACKAGE_JSON in members:
        with tempfile.TemporaryDirectory(prefix="ember-load-") as tmp:
            module, _ = load_package(path, tmp)
        return module
    raise ModuleLoadError(
        f"{path}: neither a Model Library Format tar ({METADATA_JSON}) nor an ember package "
        f"({PACKAGE_JSON})"
    )


def register() -> None:
    """Register the tar loader (once)."""
    if find_python_func(LOADER_PREFIX + "tar") is None:
        register_func(LOADER_PREFIX + "tar", _load_tar)


register()
