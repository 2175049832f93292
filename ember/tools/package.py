"""Packages written by ``ember compile``: export, load and inspect them.

The layout is the pure serialiser :mod:`ember.formats.package`; this module adds what
needs the runtime: exporting the library, saving the readable artifact tree, loading the
library back and reading the tree as an ArtifactSet. Example::

    write_package(artifacts, "model.tar", mod_name="default", target="c")
    factory, meta = load_package("model.tar", workdir)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ember.formats.package import (
    LIBRARY_NAME,
    artifact_files,
    read_package,
    write_package_files,
)
from ember.runtime.artifact_set import ArtifactSet
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
    """Write the package's library into ``workdir`` and load it; returns (module, package.json)."""
    meta, files = read_package(path)
    lib = Path(workdir) / LIBRARY_NAME
    lib.write_bytes(files[LIBRARY_NAME])
    return load_module(str(lib)), meta


def package_artifacts(path: str | os.PathLike[str]) -> ArtifactSet:
    """The ArtifactSet saved inside a package (for inspection)."""
    _, files = read_package(path)
    with tempfile.TemporaryDirectory(prefix="ember-package-") as tmp:
        for name, data in artifact_files(files).items():
            dest = Path(tmp) / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        return ArtifactSet.load(tmp)


__all__ = ["load_package", "package_artifacts", "read_package", "write_package"]
