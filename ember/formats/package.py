"""The compiled-model package written by ``ember compile`` (a deterministic tar).

Layout (format version :data:`PACKAGE_FORMAT_VERSION`)::

    package.json          {"format": "ember-package", "version": 1, "library": "mod.so",
                           "mod_name": ..., "target": ...}
    mod.so                export_library of the build: native code + embedded artifacts
    artifacts/...         the same ArtifactSet saved as a readable tree (C sources,
                          graph.json, params.bin, metadata.json, manifest.json)

The library alone is enough to run; ``artifacts/`` is there to be read by people and tools.
A future Model Library Format package will sit beside this one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ember.errors import SerializationError
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.export import export_library
from ember.support.tarball import read_tar, write_tar

PACKAGE_FORMAT = "ember-package"
PACKAGE_FORMAT_VERSION = 1
PACKAGE_JSON = "package.json"
LIBRARY_NAME = "mod.so"
ARTIFACTS_DIR = "artifacts"


def write_package(
    artifacts: ArtifactSet,
    path: str | os.PathLike[str],
    mod_name: str = "default",
    target: str = "",
) -> Path:
    """Export ``artifacts`` and write the package tar to ``path``."""
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="ember-package-") as tmp:
        lib = export_library(artifacts, Path(tmp) / LIBRARY_NAME)
        files[LIBRARY_NAME] = lib.read_bytes()
        saved = Path(tmp) / ARTIFACTS_DIR
        artifacts.save(saved)
        for file in sorted(saved.rglob("*")):
            if file.is_file():
                files[f"{ARTIFACTS_DIR}/{file.relative_to(saved).as_posix()}"] = file.read_bytes()
    meta = {
        "format": PACKAGE_FORMAT,
        "version": PACKAGE_FORMAT_VERSION,
        "library": LIBRARY_NAME,
        "mod_name": mod_name,
        "target": target,
    }
    files[PACKAGE_JSON] = (json.dumps(meta, sort_keys=True, indent=2) + "\n").encode()
    return write_tar(path, files)


def read_package(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Read and validate a package: its ``package.json`` and every file (in memory)."""
    files = read_tar(path)
    if PACKAGE_JSON not in files:
        raise SerializationError(f"{path}: not an ember package (no {PACKAGE_JSON})")
    try:
        meta = json.loads(files[PACKAGE_JSON])
    except ValueError as exc:
        raise SerializationError(f"{path}: {PACKAGE_JSON} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != PACKAGE_FORMAT:
        raise SerializationError(f"{path}: {PACKAGE_JSON} does not describe an ember package")
    if meta.get("version") != PACKAGE_FORMAT_VERSION:
        raise SerializationError(
            f"{path}: package format version {meta.get('version')!r}; this ember reads "
            f"version {PACKAGE_FORMAT_VERSION} (recompile the model with this ember)"
        )
    if meta.get("library") != LIBRARY_NAME or LIBRARY_NAME not in files:
        raise SerializationError(f"{path}: the package has no {LIBRARY_NAME}")
    return meta, files


def load_package(path: str | os.PathLike[str], workdir: str | os.PathLike[str]) -> Any:
    """Write the package's library into ``workdir`` and load it (the top-level module)."""
    from ember.runtime.library_module import load_module

    meta, files = read_package(path)
    lib = Path(workdir) / LIBRARY_NAME
    lib.write_bytes(files[LIBRARY_NAME])
    return load_module(str(lib)), meta


def package_artifacts(path: str | os.PathLike[str]) -> ArtifactSet:
    """The ArtifactSet saved inside a package (for inspection)."""
    _, files = read_package(path)
    with tempfile.TemporaryDirectory(prefix="ember-package-") as tmp:
        prefix = ARTIFACTS_DIR + "/"
        for name, data in files.items():
            if name.startswith(prefix):
                dest = Path(tmp) / name[len(prefix) :]
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
        return ArtifactSet.load(tmp)
