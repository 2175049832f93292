"""The compiled-model package written by ``ember compile`` (a deterministic tar).

Layout (format version :data:`PACKAGE_FORMAT_VERSION`)::

    package.json          {"format": "ember-package", "version": 2, "library": "mod.so",
                           "mod_name": ..., "target": ..., "library_sha256": ...,
                           "external_artifacts": ["graph_executor/params.bin"],
                           "inputs": ["x"], "outputs": ["probs"]}   (the ONNX names)
    mod.so                export_library of the build: native code + embedded artifacts,
                          except the external ones
    artifacts/...         the whole ArtifactSet saved as a readable tree (C sources,
                          graph.json, params.bin, metadata.json, manifest.json)

Each weight is stored once: the artifacts ``external_artifacts`` lists (the parameters) are
kept only in the tree and read from there when the package is loaded, straight into the
arrays the executor runs on (docs/artifacts.md says why). Version 1 packages (parameters
also embedded in mod.so) are still read. This module is the pure (de)serialiser of that
layout; exporting, loading and inspecting a package live in :mod:`ember.tools.package`.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ember.errors import SerializationError
from ember.support.tarball import read_tar, safe_member_name, write_tar

PACKAGE_FORMAT = "ember-package"
PACKAGE_FORMAT_VERSION = 2
#: package versions this ember reads
READABLE_VERSIONS = (1, 2)
PACKAGE_JSON = "package.json"
LIBRARY_NAME = "mod.so"
ARTIFACTS_DIR = "artifacts"


def write_package_files(
    path: str | os.PathLike[str],
    library: bytes,
    artifact_files: Mapping[str, bytes],
    mod_name: str = "default",
    target: str = "",
    external: Sequence[str] = (),
    interface: Mapping[str, list[str]] | None = None,
) -> Path:
    """Write the package tar: ``library`` as mod.so, ``artifact_files`` under artifacts/.

    ``artifact_files`` maps a path inside a saved ArtifactSet tree (``c/lib0.c``,
    ``manifest.json``) to its bytes; ``external`` names those of them (``codegen_id/
    file_name``) the library does not embed; ``interface`` the model's ``inputs`` and
    ``outputs`` names, recorded in package.json for people and tools.
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
        "external_artifacts": sorted(external),
        **dict(interface or {}),
    }
    files[PACKAGE_JSON] = (json.dumps(meta, sort_keys=True, indent=2) + "\n").encode()
    return write_tar(path, files)


def read_package(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Read and validate a package: its ``package.json`` and every file (in memory)."""
    files = read_tar(path)
    if PACKAGE_JSON not in files:
        raise SerializationError(f"{path}: not an ember package (no {PACKAGE_JSON})")
    meta = check_package_json(files[PACKAGE_JSON], str(path))
    if LIBRARY_NAME not in files:
        raise SerializationError(f"{path}: the package has no {LIBRARY_NAME}")
    return meta, files


def check_package_json(data: bytes, where: str) -> dict[str, Any]:
    """Parse and validate the bytes of a ``package.json``."""
    try:
        meta = json.loads(data)
    except ValueError as exc:
        raise SerializationError(f"{where}: {PACKAGE_JSON} is not valid JSON: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != PACKAGE_FORMAT:
        raise SerializationError(f"{where}: {PACKAGE_JSON} does not describe an ember package")
    if meta.get("version") not in READABLE_VERSIONS:
        raise SerializationError(
            f"{where}: package format version {meta.get('version')!r}; this ember reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))} (recompile the model with "
            "this ember)"
        )
    if meta.get("library") != LIBRARY_NAME:
        raise SerializationError(f"{where}: the package has no {LIBRARY_NAME}")
    external = meta.get("external_artifacts", [])
    if not isinstance(external, list) or not all(isinstance(e, str) for e in external):
        raise SerializationError(f"{where}: external_artifacts must be a list of names")
    return meta


def external_artifacts(meta: Mapping[str, Any]) -> list[str]:
    """The ``codegen_id/file_name`` of the artifacts kept only in the tree, not in mod.so."""
    return list(meta.get("external_artifacts", []))


def package_index(path: str | os.PathLike[str]) -> dict[str, tuple[int, int]]:
    """Every member of a package tar as name -> (data offset, size), reading no data.

    The same checks as reading the whole archive: safe relative names, regular files
    only, no duplicates, and sizes within the archive.
    """
    where = str(path)
    try:
        st = os.stat(path)
    except OSError as err:
        raise SerializationError(f"{where}: cannot read the archive: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise SerializationError(f"{where}: not a regular file; pass a package tar")
    size = st.st_size
    out: dict[str, tuple[int, int]] = {}
    try:
        with tarfile.open(path, mode="r:") as tar:
            for member in tar:
                name = safe_member_name(member.name, where)
                if member.isdir():
                    continue
                if not member.isreg() or member.issparse() or name in out:
                    raise SerializationError(
                        f"{where}: entry {name!r} is not a plain regular file, or repeated"
                    )
                if member.offset_data + member.size > size:
                    raise SerializationError(f"{where}: entry {name!r} is truncated")
                out[name] = (member.offset_data, member.size)
    except SerializationError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise SerializationError(f"{where}: not a readable tar archive: {exc}") from None
    return out


def read_member(file: BinaryIO, index: Mapping[str, tuple[int, int]], name: str) -> bytes:
    """The bytes of member ``name`` of an open package (see :func:`package_index`)."""
    offset, size = index[name]
    file.seek(offset)
    data = file.read(size)
    if len(data) != size:
        raise SerializationError(f"entry {name!r} of the package is truncated")
    return data


def artifact_files(files: Mapping[str, bytes]) -> dict[str, bytes]:
    """The saved ArtifactSet tree inside a package's files: path below artifacts/ -> bytes."""
    prefix = ARTIFACTS_DIR + "/"
    return {name[len(prefix) :]: data for name, data in files.items() if name.startswith(prefix)}
