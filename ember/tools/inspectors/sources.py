"""Where inspectable artifacts come from: a saved directory, an exported library, a package.

Each source reader is registered by name and probes a path: it returns the artifacts it
found, or None when the path is not its kind. Readers are tried in name order; a new
container format (e.g. a Model Library Format tar) registers its own.

Example::

    register_artifact_source("mlf", read_mlf_tar)   # (Path) -> ArtifactSource | None
    source = read_artifact_source(Path("out/lib.so"))
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ArtifactError
from ember.formats.package import read_package as read_package_files
from ember.runtime.artifact import NATIVE_LOADER, AnyArtifact, Artifact
from ember.runtime.artifact_set import MANIFEST_NAME, ArtifactSet
from ember.runtime.blob import read_library_blob
from ember.runtime.elf import is_elf
from ember.support.registry import Registry
from ember.tools.package import package_artifacts, verify_package_library

#: The codegen_id under which an exported library lists its own native code.
LIBRARY_CODEGEN_ID = "library"
MAX_LIBRARY_BYTES = 1 << 34


@dataclass(frozen=True)
class ArtifactSource:
    """What a path holds: a one-line description and its artifacts in order."""

    kind: str
    artifacts: tuple[AnyArtifact, ...]


SourceReader = Callable[[Path], "ArtifactSource | None"]

#: Registered source readers, tried in name order by :func:`read_artifact_source`.
ARTIFACT_SOURCES: Registry[SourceReader] = Registry("artifact source")


def register_artifact_source(name: str, reader: SourceReader, override: bool = False) -> None:
    """Register ``reader``, which returns an ArtifactSource for paths of its kind, else None."""
    ARTIFACT_SOURCES.register(name, reader, override=override)


def read_saved_directory(path: Path) -> ArtifactSource | None:
    """A directory written by :meth:`ArtifactSet.save`."""
    if not (path.is_dir() and (path / MANIFEST_NAME).is_file()):
        return None
    arts = ArtifactSet.load(path)
    return ArtifactSource("saved artifact set", tuple(arts))


def _library_file_name(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.+-]", "_", path.name).lstrip(".")
    return name or "library.so"


def read_exported_library(path: Path) -> ArtifactSource | None:
    """A shared library: its own code as one native artifact, plus its embedded blob."""
    if not path.is_file():
        return None  # directories go elsewhere; a FIFO or device is never opened
    with path.open("rb") as f:
        if not is_elf(f.read(4)):
            return None
    if path.stat().st_size > MAX_LIBRARY_BYTES:
        raise ArtifactError(f"{path} is larger than {MAX_LIBRARY_BYTES} bytes; not inspecting")
    data = path.read_bytes()
    embedded = read_library_blob(data, str(path)) or []
    library = Artifact(LIBRARY_CODEGEN_ID, NATIVE_LOADER, _library_file_name(path), data)
    kind = f"shared library with {len(embedded)} embedded artifacts"
    return ArtifactSource(kind, (library, *embedded))


def read_package(path: Path) -> ArtifactSource | None:
    """A package tar written by ``ember compile`` (its saved artifact tree)."""
    if not (path.is_file() and tarfile.is_tarfile(path)):
        return None
    meta, files = read_package_files(path)
    try:
        verdict = verify_package_library(meta, files, str(path))
    except ArtifactError as err:
        verdict = f"MISMATCH: {err}"
    return ArtifactSource(f"ember package; {verdict}", tuple(package_artifacts(path)))


_BUILTIN_SOURCES: dict[str, SourceReader] = {
    "directory": read_saved_directory,
    "library": read_exported_library,
    "package": read_package,
}


def read_artifact_source(path: Path) -> ArtifactSource:
    """The artifacts at ``path``, from the first registered reader that recognizes it."""
    for name, reader in _BUILTIN_SOURCES.items():
        if name not in ARTIFACT_SOURCES:
            register_artifact_source(name, reader)
    if not path.exists():
        raise ArtifactError(f"cannot inspect {path}: no such file or directory")
    for name in ARTIFACT_SOURCES.names():
        found = ARTIFACT_SOURCES.get(name)(path)
        if found is not None:
            return found
    raise ArtifactError(
        f"cannot inspect {path}: it is not one of the known kinds "
        f"({', '.join(ARTIFACT_SOURCES.names())}); pass a directory written by "
        "ArtifactSet.save or a library written by export_library"
    )


def select_artifact(source: ArtifactSource, name: str) -> AnyArtifact:
    """The artifact named ``file_name`` or ``codegen_id/file_name``; misses list the names."""
    matches = [
        a for a in source.artifacts if name in (a.file_name, f"{a.codegen_id}/{a.file_name}")
    ]
    known = ", ".join(f"{a.codegen_id}/{a.file_name}" for a in source.artifacts) or "none"
    if not matches:
        raise ArtifactError(f"no artifact named {name!r}; known: {known}")
    if len(matches) > 1:
        raise ArtifactError(
            f"{name!r} names {len(matches)} artifacts; use codegen_id/file_name, one of: {known}"
        )
    return matches[0]
