"""The compiled-model package written by ``ember compile`` (a deterministic tar).

Layout (format version :data:`PACKAGE_FORMAT_VERSION`)::

    package.json          {"format": "ember-package", "version": 1, "library": "mod.so",
                           "mod_name": ..., "target": ...}
    mod.so                export_library of the build: native code + embedded artifacts
    artifacts/...         the same ArtifactSet saved as a readable tree (C sources,
                          graph.json, params.bin, metadata.json, manifest.json)

The library alone is enough to run; ``artifacts/`` is there to be read by people and tools.
This module is the pure (de)serialiser of that layout (bytes in, bytes out); exporting,
loading and inspecting a package live in :mod:`ember.tools.package`. A future Model
Library Format package will sit beside this one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ember.errors import SerializationError
from ember.support.tarball import read_tar, write_tar

PACKAGE_FORMAT = "ember-package"
PACKAGE_FORMAT_VERSION = 1
PACKAGE_JSON = "package.json"
LIBRARY_NAME = "mod.so"
ARTIFACTS_DIR = "artifacts"


def write_package_files(
    path: str | os.PathLike[str],
    library: bytes,
    artifact_files: Mapping[str, bytes],
    mod_name: str = "default",
    target: str = "",
) -> Path:
    """Write the package tar: ``library`` as mod.so, ``artifact_files`` under artifacts/.

    ``artifact_files`` maps a path inside a saved ArtifactSet tree (``c/lib0.c``,
    ``manifest.json``) to its bytes.
    """
    files = {LIBRARY_NAME: library}
    for name in sorted(artifact_files):
        files[f"{ARTIFACTS_DIR}/{name}"] = artifact_files[name]
    meta = {
        "format": PACKAGE_FORMAT,
        "version": PACKAGE_FORMAT_VERSION,
        "library": LIBRARY_NAME,
        "mod_name": mod_name,
        "target": target,
        # binds the readable tree to the library: ember inspect and ember run check it
        "library_sha256": hashlib.sha256(library).hexdigest(),
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


def artifact_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The saved ArtifactSet tree inside a package's files: path below artifacts/ -> bytes."""
    prefix = ARTIFACTS_DIR + "/"
    return {name[len(prefix) :]: data for name, data in files.items() if name.startswith(prefix)}
