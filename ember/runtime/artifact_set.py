"""ArtifactSet: the ordered output of a build, saved as a readable directory tree.

On disk a set is ``<dir>/manifest.json`` plus one file per artifact at
``<dir>/<codegen_id>/<file_name>``. The manifest (format version
:data:`ARTIFACT_SET_FORMAT_VERSION`) records every artifact's fields, size and sha256 in
set order; :meth:`ArtifactSet.load` verifies them all and refuses a mismatch.

Example::

    arts = ArtifactSet([Artifact("c", "native", "lib0.c", src)])
    arts.save(tmp / "out")
    assert ArtifactSet.load(tmp / "out") == arts
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.errors import ArtifactError, SerializationError
from ember.runtime.artifact import (
    METADATA_LOADER,
    NATIVE_LOADER,
    AnyArtifact,
    Artifact,
    InMemoryArtifact,
    check_file_name,
    check_identifier,
)
from ember.runtime.hooks import EXPORT_LIBRARY, LOAD_ARTIFACTS, call_hook
from ember.runtime.inspection import artifact_table

if TYPE_CHECKING:
    from ember.runtime.module import Module

#: The version of the manifest.json layout written by :meth:`ArtifactSet.save`.
ARTIFACT_SET_FORMAT_VERSION = 1
#: The ``format`` field of manifest.json.
ARTIFACT_SET_FORMAT = "ember.artifact_set"
MANIFEST_NAME = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, fixed separators, trailing newline."""
    return (json.dumps(value, sort_keys=True, indent=2, ensure_ascii=True) + "\n").encode()


class ArtifactSet:
    """An ordered collection of artifacts, unique by ``(codegen_id, file_name)``."""

    def __init__(self, artifacts: Iterable[AnyArtifact] = ()) -> None:
        items = tuple(artifacts)
        index: dict[tuple[str, str], AnyArtifact] = {}
        for art in items:
            if not isinstance(art, Artifact | InMemoryArtifact):
                raise ArtifactError(
                    f"an ArtifactSet holds Artifact or InMemoryArtifact values, got "
                    f"{type(art).__name__}"
                )
            if art.key in index:
                raise ArtifactError(
                    f"duplicate artifact {art.codegen_id}/{art.file_name}: a file name must be "
                    "unique within its codegen; rename one of them"
                )
            index[art.key] = art
        self._artifacts = items
        self._index = index
        #: the directory :meth:`load` read this set from (None for a set built in this
        #: process); its native code is then someone's files, compiled only when trusted
        self.saved_at: Path | None = None

    # -- container protocol -------------------------------------------------------------
    def __iter__(self) -> Iterator[AnyArtifact]:
        return iter(self._artifacts)

    def __len__(self) -> int:
        return len(self._artifacts)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __getitem__(self, key: tuple[str, str]) -> AnyArtifact:
        try:
            return self._index[key]
        except (KeyError, TypeError):
            known = ", ".join(f"{c}/{f}" for c, f in self._index) or "none"
            raise ArtifactError(
                f"no artifact {key!r} in this set; known (codegen_id/file_name): {known}"
            ) from None

    def get(self, codegen_id: str, file_name: str) -> AnyArtifact:
        """The artifact named ``(codegen_id, file_name)``; a miss lists the known names."""
        return self[(codegen_id, file_name)]

    @property
    def artifacts(self) -> tuple[AnyArtifact, ...]:
        """The artifacts in set order."""
        return self._artifacts

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArtifactSet):
            return NotImplemented
        return self._artifacts == other._artifacts

    def __hash__(self) -> int:
        return hash(self._artifacts)

    def __repr__(self) -> str:
        return f"ArtifactSet({len(self)} artifacts: {', '.join(self.names())})"

    def names(self) -> list[str]:
        """``codegen_id/file_name`` of every artifact, in set order."""
        return [f"{a.codegen_id}/{a.file_name}" for a in self._artifacts]

    # -- grouping -------------------------------------------------------------------------
    def by_loader(self) -> dict[str, list[AnyArtifact]]:
        """Artifacts grouped by loader name; groups sorted by name, set order inside."""
        groups: dict[str, list[AnyArtifact]] = {}
        for art in self._artifacts:
            groups.setdefault(art.loader, []).append(art)
        return {name: groups[name] for name in sorted(groups)}

    def native(self) -> list[Artifact]:
        """The artifacts linked into the host library (loader ``native``)."""
        return [a for a in self._artifacts if isinstance(a, Artifact) and a.loader == NATIVE_LOADER]

    def non_native(self) -> list[Artifact]:
        """Every serializable artifact that is not ``native`` (including ``metadata``)."""
        return [a for a in self._artifacts if isinstance(a, Artifact) and a.loader != NATIVE_LOADER]

    def has_metadata(self) -> bool:
        """True when some artifact builds a top-level module (loader ``metadata``)."""
        return any(a.loader == METADATA_LOADER for a in self._artifacts)

    def check_exportable(self, action: str) -> list[Artifact]:
        """All artifacts as plain data, or an ArtifactError naming every in-memory one."""
        in_memory = [a for a in self._artifacts if isinstance(a, InMemoryArtifact)]
        if in_memory:
            errors = [str(a.not_exportable_error(action)) for a in in_memory]
            raise ArtifactError("; ".join(errors))
        return [a for a in self._artifacts if isinstance(a, Artifact)]

    # -- hashing and manifest -------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """The JSON-ready manifest: format, version and every artifact's fields."""
        arts = self.check_exportable("describe the set in a manifest")
        return {
            "format": ARTIFACT_SET_FORMAT,
            "version": ARTIFACT_SET_FORMAT_VERSION,
            "artifacts": [a.describe() for a in arts],
        }

    def content_hash(self) -> str:
        """Hex SHA-256 of the canonical manifest: equal sets have equal hashes."""
        return hashlib.sha256(canonical_json(self.manifest())).hexdigest()

    # -- directory tree -------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the set as ``<dir>/<codegen_id>/<file_name>`` plus ``manifest.json``.

        The directory must not exist or be empty. Output is byte-identical for equal sets.
        """
        arts = self.check_exportable("save the artifact set")
        root = Path(directory)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise ArtifactError(
                f"cannot save artifacts to {root}: it exists and is not an empty directory; "
                "pick a new path"
            )
        root.mkdir(parents=True, exist_ok=True)
        for art in arts:
            target = root / art.codegen_id / art.file_name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(art.content)
        (root / MANIFEST_NAME).write_bytes(canonical_json(self.manifest()))
        return root

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> ArtifactSet:
        """Read a directory written by :meth:`save`, verifying every size and sha256."""
        root = Path(directory)
        manifest_path = root / MANIFEST_NAME
        if not manifest_path.is_file():
            raise ArtifactError(
                f"{root} is not a saved artifact set: {MANIFEST_NAME} is missing "
                "(write one with ArtifactSet.save)"
            )
        if manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
            raise SerializationError(f"{manifest_path} is larger than {MAX_MANIFEST_BYTES} bytes")
        manifest = parse_manifest(manifest_path.read_bytes(), str(manifest_path))
        arts = []
        for entry in manifest["artifacts"]:
            # Validate the names before they touch the file system.
            codegen_id = check_identifier(entry["codegen_id"], "codegen_id")
            path = root / codegen_id / check_file_name(entry["file_name"])
            if not path.is_file():
                raise ArtifactError(f"{manifest_path} lists {path}, which is missing")
            art = Artifact(
                entry["codegen_id"],
                entry["loader"],
                entry["file_name"],
                path.read_bytes(),
                entry["metadata"],
            )
            if art.sha256 != entry["sha256"] or len(art.content) != entry["size"]:
                raise ArtifactError(
                    f"{path} does not match {manifest_path}: sha256 {art.sha256[:16]}... "
                    f"size {len(art.content)}, manifest says {str(entry['sha256'])[:16]}... "
                    f"size {entry['size']}; the file was modified or corrupted, re-save the set"
                )
            arts.append(art)
        loaded = cls(arts)
        loaded.saved_at = root
        return loaded

    # -- loading and export (hooks registered by loading.py, export.py), inspection --
    def export_library(self, path: str | os.PathLike[str]) -> Path:
        """Link the set into one shared library; see :func:`ember.runtime.export.export_library`."""
        exported: Path = call_hook(EXPORT_LIBRARY, self, path)
        return exported

    def load_module(self, device: Any = None, *, trust_native: bool = False) -> Module:
        """Run the code-loading process; see :func:`ember.runtime.loading.load_artifacts`."""
        loaded: Module = call_hook(LOAD_ARTIFACTS, self, device, trust_native)
        return loaded

    def inspect(self) -> str:
        """A table of every artifact: codegen, loader, file, size, sha256 prefix."""
        return artifact_table(self._artifacts)


_ENTRY_FIELDS = {
    "codegen_id": str,
    "loader": str,
    "file_name": str,
    "size": int,
    "sha256": str,
    "metadata": dict,
}


def parse_manifest(data: bytes, where: str) -> dict[str, Any]:
    """Parse and shape-check manifest bytes; errors name ``where`` and the bad field."""
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise SerializationError(f"{where} is not valid JSON: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != ARTIFACT_SET_FORMAT:
        raise SerializationError(f"{where} is not an {ARTIFACT_SET_FORMAT} manifest")
    version = manifest.get("version")
    if version != ARTIFACT_SET_FORMAT_VERSION:
        raise SerializationError(
            f"{where} has format version {version!r}; this ember reads version "
            f"{ARTIFACT_SET_FORMAT_VERSION} (re-save the set with this ember)"
        )
    entries = manifest.get("artifacts")
    if not isinstance(entries, list):
        raise SerializationError(f"{where}: 'artifacts' must be a list")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise SerializationError(f"{where}: artifacts[{i}] must be an object")
        for name, kind in _ENTRY_FIELDS.items():
            value = entry.get(name)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise SerializationError(
                    f"{where}: artifacts[{i}].{name} must be a {kind.__name__}, got {value!r}"
                )
    return manifest
