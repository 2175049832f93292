"""Packages written by ``ember compile``: export, load and inspect them.

The layout is the pure serialiser :mod:`ember.formats.package`; this module adds what
needs the runtime: exporting the library, saving the readable artifact tree, loading the
library back and reading the tree as an ArtifactSet. Example::

    write_package(artifacts, "model.tar", mod_name="default", target="c")
    factory, meta = load_package("model.tar", workdir)
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

from ember.errors import ArtifactError
from ember.formats.package import (
    LIBRARY_NAME,
    artifact_files,
    read_package,
    write_package_files,
)
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.blob import read_library_blob
from ember.runtime.export import export_library
from ember.runtime.library_module import load_module
from ember.runtime.module import Module


def write_package(
    artifacts: ArtifactSet,
    path: str | os.PathLike[str],
    mod_name: str = "default",
    target: str = "",
) -> Path:
    """Export ``artifacts`` and write the package tar to ``path``."""
    with tempfile.TemporaryDirectory(prefix="ember-package-") as tmp:
        library = export_library(artifacts, Path(tmp) / LIBRARY_NAME).read_bytes()
        saved = artifacts.save(Path(tmp) / "artifacts")
        tree = {
            file.relative_to(saved).as_posix(): file.read_bytes()
            for file in sorted(saved.rglob("*"))
            if file.is_file()
        }
    return write_package_files(path, library, tree, mod_name=mod_name, target=target)


def load_package(
    path: str | os.PathLike[str], workdir: str | os.PathLike[str]
) -> tuple[Module, dict[str, Any]]:
    """Write the package's library into ``workdir`` and load it; returns (module, package.json).

    The library is checked against the package's artifact tree first
    (:func:`verify_package_library`): a mod.so that is not the one of the tree is refused
    before any of its code runs.
    """
    meta, files = read_package(path)
    verify_package_library(meta, files, str(path))
    lib = Path(workdir) / LIBRARY_NAME
    fd = os.open(lib, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(files[LIBRARY_NAME])
    return load_module(str(lib.absolute())), meta


def _identity(arts: list[Any]) -> list[tuple[str, str, str]]:
    return sorted((a.codegen_id, a.file_name, a.sha256) for a in arts)


def verify_package_library(meta: dict[str, Any], files: dict[str, bytes], where: str) -> str:
    """Check that mod.so is the library of the package's artifact tree; say how it was checked.

    Its sha256 must be the one package.json records (when it records one), and the artifacts
    embedded in it must be exactly the non-native artifacts of the readable tree. A mismatch
    raises ArtifactError: the code that would run is not the code the tree shows.
    """
    library = files[LIBRARY_NAME]
    digest = hashlib.sha256(library).hexdigest()
    recorded = meta.get("library_sha256")
    if recorded is not None and recorded != digest:
        raise ArtifactError(
            f"{where}: {LIBRARY_NAME} has sha256 {digest[:16]}..., but package.json records "
            f"{str(recorded)[:16]}...; the library is not the one this package was built with. "
            "Recompile the model with 'ember compile'"
        )
    embedded = read_library_blob(library, f"{where}:{LIBRARY_NAME}") or []
    tree = _tree_artifacts(files)
    if _identity(embedded) != _identity(tree.non_native()):
        raise ArtifactError(
            f"{where}: the artifacts embedded in {LIBRARY_NAME} differ from the package's "
            "artifacts/ tree; the library is not the one this tree describes. Recompile the "
            "model with 'ember compile'"
        )
    how = "sha256 recorded in package.json" if recorded is not None else "no sha256 recorded"
    return f"{LIBRARY_NAME} sha256 {digest[:16]}... matches the artifact tree ({how})"


def package_artifacts(path: str | os.PathLike[str]) -> ArtifactSet:
    """The ArtifactSet saved inside a package (for inspection)."""
    _, files = read_package(path)
    return _tree_artifacts(files)


def _tree_artifacts(files: dict[str, bytes]) -> ArtifactSet:
    with tempfile.TemporaryDirectory(prefix="ember-package-") as tmp:
        for name, data in artifact_files(files).items():
            dest = Path(tmp) / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        return ArtifactSet.load(tmp)


__all__ = [
    "load_package",
    "package_artifacts",
    "read_package",
    "verify_package_library",
    "write_package",
]
