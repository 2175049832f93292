"""Packages written by ``ember compile``: export, load and inspect them.

The layout is the pure serialiser :mod:`ember.formats.package`; this module adds what
needs the runtime: exporting the library (without the parameters, which the package keeps
once, in its artifact tree), saving the readable artifact tree, loading the library back
with the parameters read straight into aligned arrays, and reading the tree as an
ArtifactSet. Example::

    write_package(artifacts, "model.tar", mod_name="default", target="c")
    factory, meta = load_package("model.tar", workdir)
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ember.errors import ArtifactError, SerializationError
from ember.executor.metadata_module import METADATA_FILE, PARAMS_FILE, load_metadata_module
from ember.formats.dtypes import dtype_name
from ember.formats.metadata import ModelMetadata
from ember.formats.package import (
    ARTIFACTS_DIR,
    LIBRARY_NAME,
    PACKAGE_JSON,
    artifact_files,
    check_package_json,
    external_artifacts,
    package_index,
    read_member,
    read_package,
    write_package_files,
)
from ember.formats.params import read_params
from ember.runtime import ndarray
from ember.runtime.artifact import METADATA_LOADER, Artifact
from ember.runtime.artifact_set import MANIFEST_NAME, ArtifactSet
from ember.runtime.blob import read_library_blob
from ember.runtime.export import export_library
from ember.runtime.library_module import LibraryModule
from ember.runtime.loading import check_loaders, load_groups
from ember.runtime.module import Module

_CHUNK = 1 << 20


def is_external(art: object) -> bool:
    """Whether a package keeps ``art`` only in its tree: the parameters (``params.bin``)."""
    return (
        isinstance(art, Artifact) and art.loader == METADATA_LOADER and art.file_name == PARAMS_FILE
    )


def write_package(
    artifacts: ArtifactSet,
    path: str | os.PathLike[str],
    mod_name: str = "default",
    target: str = "",
) -> Path:
    """Export ``artifacts`` and write the package tar to ``path`` (each weight once)."""
    external = [a for a in artifacts if is_external(a)]
    embedded = ArtifactSet([a for a in artifacts if not is_external(a)])
    with tempfile.TemporaryDirectory(prefix="ember-package-") as tmp:
        library = export_library(embedded, Path(tmp) / LIBRARY_NAME).read_bytes()
        saved = artifacts.save(Path(tmp) / "artifacts")
        tree = {
            file.relative_to(saved).as_posix(): file.read_bytes()
            for file in sorted(saved.rglob("*"))
            if file.is_file()
        }
    names = [f"{a.codegen_id}/{a.file_name}" for a in external]
    return write_package_files(
        path,
        library,
        tree,
        mod_name=mod_name,
        target=target,
        external=names,
        interface=_interface(artifacts),
    )


def _interface(artifacts: ArtifactSet) -> dict[str, list[str]]:
    """The model's input and output names (the ONNX names), from its metadata.json."""
    for art in artifacts:
        if isinstance(art, Artifact) and art.file_name == METADATA_FILE:
            md = ModelMetadata.from_json(art.content)
            return {"inputs": [p.name for p in md.inputs], "outputs": [p.name for p in md.outputs]}
    return {}


def load_package(
    path: str | os.PathLike[str], workdir: str | os.PathLike[str]
) -> tuple[Module, dict[str, Any]]:
    """Write the package's library into ``workdir`` and load it; returns (module, package.json).

    Only the small members are read into memory: the library is checked against the
    package's manifest before any of its code runs (a mod.so that is not the one of the
    tree is refused), and the parameters are read from the tar straight into the aligned
    arrays the executors run on (no second copy).
    """
    where = str(path)
    index = package_index(path)
    for required in (PACKAGE_JSON, LIBRARY_NAME):
        if required not in index:
            raise SerializationError(f"{where}: not an ember package (no {required})")
    with open(path, "rb") as f:
        meta = check_package_json(read_member(f, index, PACKAGE_JSON), where)
        library = read_member(f, index, LIBRARY_NAME)
        manifest = _manifest(f, index, where)
        embedded = _verify_library(meta, library, manifest, where)
        params = _read_external_params(f, index, meta, manifest, where)
    lib = Path(workdir) / LIBRARY_NAME
    fd = os.open(lib, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(library)
    del library
    groups = ArtifactSet(embedded).by_loader()
    check_loaders(groups)
    meta_arts = [a for a in groups.pop(METADATA_LOADER, []) if isinstance(a, Artifact)]
    host = load_groups(groups, LibraryModule(lib.absolute()))
    if not meta_arts:
        return host, meta
    return load_metadata_module(meta_arts, host, params), meta


def _manifest(
    f: BinaryIO, index: Mapping[str, tuple[int, int]], where: str
) -> list[dict[str, Any]]:
    name = f"{ARTIFACTS_DIR}/{MANIFEST_NAME}"
    if name not in index:
        raise ArtifactError(f"{where}: the package has no {name}; recompile the model")
    try:
        entries = json.loads(read_member(f, index, name))["artifacts"]
        return [
            {k: e[k] for k in ("codegen_id", "file_name", "loader", "sha256", "size")}
            for e in entries
        ]
    except (ValueError, KeyError, TypeError) as err:
        raise ArtifactError(f"{where}: {name} is not a valid manifest ({err})") from None


def _verify_library(
    meta: dict[str, Any], library: bytes, manifest: list[dict[str, Any]], where: str
) -> list[Artifact]:
    """mod.so's sha256 must be package.json's, and what it embeds exactly the manifest's
    non-native, non-external artifacts; returns the embedded artifacts."""
    digest = hashlib.sha256(library).hexdigest()
    recorded = meta.get("library_sha256")
    if recorded is not None and recorded != digest:
        raise ArtifactError(
            f"{where}: {LIBRARY_NAME} has sha256 {digest[:16]}..., but package.json records "
            f"{str(recorded)[:16]}...; the library is not the one this package was built with. "
            "Recompile the model with 'ember compile'"
        )
    embedded = read_library_blob(library, f"{where}:{LIBRARY_NAME}") or []
    external = set(external_artifacts(meta))
    expected = sorted(
        (e["codegen_id"], e["file_name"], e["sha256"])
        for e in manifest
        if e["loader"] != "native" and f"{e['codegen_id']}/{e['file_name']}" not in external
    )
    if _identity(embedded) != expected:
        raise ArtifactError(
            f"{where}: the artifacts embedded in {LIBRARY_NAME} differ from the package's "
            "artifacts/ tree; the library is not the one this tree describes. Recompile the "
            "model with 'ember compile'"
        )
    return embedded


def _read_external_params(
    f: BinaryIO,
    index: Mapping[str, tuple[int, int]],
    meta: dict[str, Any],
    manifest: list[dict[str, Any]],
    where: str,
) -> dict[str, np.ndarray] | None:
    """The parameters kept in the tree, checked against the manifest's sha256 (streamed),
    then read straight into 64-byte aligned arrays; None when the library embeds them."""
    names = [n for n in external_artifacts(meta) if n.endswith("/" + PARAMS_FILE)]
    if not names:
        return None
    name = names[0]
    member = f"{ARTIFACTS_DIR}/{name}"
    entry = next((e for e in manifest if f"{e['codegen_id']}/{e['file_name']}" == name), None)
    if member not in index or entry is None:
        raise ArtifactError(f"{where}: the package lacks {member}; recompile the model")
    offset, size = index[member]
    f.seek(offset)
    digest = hashlib.sha256()
    left = size
    while left:
        chunk = f.read(min(_CHUNK, left))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
    if left or digest.hexdigest() != entry["sha256"] or size != entry["size"]:
        raise ArtifactError(
            f"{where}: {member} does not match its manifest entry (size or sha256); the "
            "package is corrupt. Recompile the model with 'ember compile'"
        )
    f.seek(offset)
    return read_params(f, size, _aligned)


def _aligned(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A 64-byte aligned array (memory an executor can run on directly)."""
    array: np.ndarray = ndarray.empty(shape, dtype_name(dtype)).__array__(copy=False)
    return array


def _identity(arts: list[Any]) -> list[tuple[str, str, str]]:
    return sorted((a.codegen_id, a.file_name, a.sha256) for a in arts)


def verify_package_library(meta: dict[str, Any], files: dict[str, bytes], where: str) -> str:
    """Check that mod.so is the library of the package's artifact tree; say how it was checked.

    Its sha256 must be the one package.json records (when it records one), and the artifacts
    embedded in it must be exactly the non-native artifacts of the readable tree. A mismatch
    raises ArtifactError: the code that would run is not the code the tree shows.
    """
    tree = _tree_artifacts(files)
    manifest = [
        {
            "codegen_id": a.codegen_id,
            "file_name": a.file_name,
            "loader": a.loader,
            "sha256": a.sha256,
        }
        for a in tree
        if isinstance(a, Artifact)
    ]
    _verify_library(meta, files[LIBRARY_NAME], manifest, where)
    digest = hashlib.sha256(files[LIBRARY_NAME]).hexdigest()
    recorded = meta.get("library_sha256")
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
