"""Artifact: one named piece of generated code, as plain data, plus its in-memory sibling.

A code generator returns :class:`Artifact` values instead of a ready-to-run Module. Each one
says who made it (``codegen_id``), who can load it (``loader``, e.g. ``"native"`` for C
sources and objects linked into the host library, ``"metadata"`` for the top-level module),
under which name it is stored (``file_name``, unique within its codegen) and its bytes.

:class:`InMemoryArtifact` covers what cannot be serialized (a JIT handle, a Python
callable): it loads itself and refuses to be saved or exported.

Example::

    art = Artifact("c", "native", "lib0.c", b"int x;", {"format": "c"})
    art.sha256          # hex digest of the content
    art.key             # ("c", "lib0.c")
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ember.errors import ArtifactError, EmberTypeError
from ember.runtime.object import Object, register_object

if TYPE_CHECKING:
    from ember.runtime.module import Module

#: The loader name of C sources and objects linked into the host shared library.
NATIVE_LOADER = "native"
#: The loader name of artifacts that build the top-level module.
METADATA_LOADER = "metadata"
#: The pseudo loader of :class:`InMemoryArtifact`: each loads itself.
IN_MEMORY_LOADER = "in_memory"

#: Metadata keys the driver sets on an external region's artifacts: the global function
#: their loader registers (the host stub calls it) and the kernel it implements; and the
#: file-name suffix of the constants a ``constant_updater`` hands to that loader.
SYMBOL_KEY = "symbol"
KERNEL_KEY = "kernel"
CONSTANTS_SUFFIX = ".constants"

#: Metadata values are small scalars.
MetadataValue = str | int | float | bool

MAX_NAME_CHARS = 255
MAX_FILE_NAME_CHARS = 1024
#: the longest component of a file name: what a Linux file system takes (NAME_MAX)
MAX_FILE_PART_CHARS = 255
MAX_METADATA_ENTRIES = 64
MAX_METADATA_STR_CHARS = 4096

_IDENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
_FILE_PART = re.compile(r"^[A-Za-z0-9_.+-]+$")


def check_identifier(value: object, what: str) -> str:
    """Return ``value`` if it is a safe identifier (a codegen id or loader name), else raise."""
    if not isinstance(value, str) or not _IDENT.match(value) or len(value) > MAX_NAME_CHARS:
        raise ArtifactError(
            f"invalid artifact {what} {value!r}: use 1-{MAX_NAME_CHARS} characters from "
            "letters, digits and '_.+-', not starting with '.', '+' or '-'"
        )
    return value


def check_file_name(value: object) -> str:
    """Return ``value`` if it is a safe relative file name, else raise ArtifactError.

    Safe means: forward slashes only, no absolute path, no empty, '.' or '..' component,
    characters from letters, digits and ``_.+-``, components of at most 255 characters.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_FILE_NAME_CHARS:
        raise ArtifactError(f"invalid artifact file name {value!r}: must be a non-empty string")
    hint = "use a relative name like 'lib0.c' or 'kernels/conv.o'"
    if "\\" in value or value.startswith("/"):
        raise ArtifactError(
            f"invalid artifact file name {value!r}: no backslash or absolute path; {hint}"
        )
    for part in value.split("/"):
        if part in ("", ".", "..") or not _FILE_PART.match(part):
            raise ArtifactError(
                f"invalid artifact file name {value!r}: bad component {part!r}; {hint}"
            )
        if len(part) > MAX_FILE_PART_CHARS:
            raise ArtifactError(
                f"invalid artifact file name {value[:64]!r}...: a component has {len(part)} "
                f"characters, at most {MAX_FILE_PART_CHARS} fit a file system; {hint}"
            )
    return value


class FrozenMetadata(dict[str, MetadataValue]):
    """A read-only dict (so object JSON and ``json`` see a plain mapping); sorted by key."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise EmberTypeError("artifact metadata is immutable; build a new Artifact instead")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self.items()))


def check_metadata(metadata: Mapping[str, Any] | None) -> FrozenMetadata:
    """Validate ``metadata`` (str keys, small scalar values) and freeze it in sorted order."""
    if metadata is None:
        return FrozenMetadata()
    if not isinstance(metadata, Mapping):
        raise ArtifactError(f"artifact metadata must be a mapping, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise ArtifactError(
            f"artifact metadata has {len(metadata)} entries; at most {MAX_METADATA_ENTRIES} "
            "are allowed (store large data as its own artifact)"
        )
    out: dict[str, MetadataValue] = {}
    for key in sorted(metadata, key=str):
        value = metadata[key]
        if not isinstance(key, str) or not key or len(key) > MAX_NAME_CHARS:
            raise ArtifactError(f"artifact metadata key {key!r} must be a short non-empty str")
        if isinstance(value, float) and not math.isfinite(value):
            raise ArtifactError(f"artifact metadata {key!r} is {value}; only finite floats")
        if isinstance(value, str) and len(value) > MAX_METADATA_STR_CHARS:
            raise ArtifactError(
                f"artifact metadata {key!r} is {len(value)} characters long; at most "
                f"{MAX_METADATA_STR_CHARS} (store large data as its own artifact)"
            )
        if not isinstance(value, str | int | float | bool):
            raise ArtifactError(
                f"artifact metadata {key!r} has type {type(value).__name__}; "
                "values must be str, int, float or bool"
            )
        out[key] = value
    return FrozenMetadata(out)


def file_suffix(file_name: str) -> str:
    """The extension of ``file_name``'s last component including the dot (``".c"``), or ``""``."""
    base = file_name.rsplit("/", 1)[-1]
    return "." + base.rsplit(".", 1)[1] if "." in base[1:] else ""


@register_object("ember.runtime.Artifact")
@dataclass(frozen=True, eq=False)
class Artifact(Object):
    """An immutable named piece of generated code: who made it, who loads it, its bytes."""

    codegen_id: str
    loader: str
    file_name: str
    content: bytes
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_identifier(self.codegen_id, "codegen_id")
        check_identifier(self.loader, "loader")
        if self.loader == IN_MEMORY_LOADER:
            raise ArtifactError(
                f"artifact {self.codegen_id}/{self.file_name}: loader '{IN_MEMORY_LOADER}' is "
                "reserved for InMemoryArtifact; pick another loader name"
            )
        check_file_name(self.file_name)
        content = self.content
        if isinstance(content, bytearray | memoryview):
            content = bytes(content)
        if not isinstance(content, bytes):
            raise ArtifactError(
                f"artifact {self.codegen_id}/{self.file_name}: content must be bytes, got "
                f"{type(content).__name__} (encode text with .encode('utf-8'))"
            )
        object.__setattr__(self, "content", content)
        object.__setattr__(self, "metadata", check_metadata(self.metadata))
        object.__setattr__(self, "_sha256", hashlib.sha256(content).hexdigest())

    @property
    def sha256(self) -> str:
        """The hex SHA-256 digest of :attr:`content`."""
        digest: str = self.__dict__["_sha256"]
        return digest

    @property
    def key(self) -> tuple[str, str]:
        """The ``(codegen_id, file_name)`` pair that names this artifact within a set."""
        return (self.codegen_id, self.file_name)

    @property
    def exportable(self) -> bool:
        """Plain-data artifacts can always be saved and exported."""
        return True

    def describe(self) -> dict[str, Any]:
        """The JSON-ready fields of this artifact without its content (used by manifests)."""
        return {
            "codegen_id": self.codegen_id,
            "loader": self.loader,
            "file_name": self.file_name,
            "size": len(self.content),
            "sha256": self.sha256,
            "metadata": dict(self.metadata),
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Artifact):
            return NotImplemented
        return (
            self.key == other.key
            and self.loader == other.loader
            and self.sha256 == other.sha256
            and self.content == other.content
            and self.metadata == other.metadata
        )

    def __hash__(self) -> int:
        return hash((self.codegen_id, self.loader, self.file_name, self.sha256))

    def __repr__(self) -> str:
        return (
            f"Artifact({self.codegen_id!r}, {self.loader!r}, {self.file_name!r}, "
            f"<{len(self.content)} bytes sha256={self.sha256[:12]}>)"
        )


@dataclass(frozen=True, eq=False)
class InMemoryArtifact:
    """Generated code that only exists in this process (a JIT handle, a Python callable).

    It is its own loader: ``load()`` returns the Module. A set holding one cannot be saved
    or exported; ``alternative`` names the exportable way to get the same code
    (e.g. ``"target 'llvm' instead of 'llvmjit'"``).
    """

    codegen_id: str
    file_name: str
    load: Callable[[], Module]
    description: str
    alternative: str = ""

    def __post_init__(self) -> None:
        check_identifier(self.codegen_id, "codegen_id")
        check_file_name(self.file_name)
        if not callable(self.load):
            raise ArtifactError(
                f"in-memory artifact {self.codegen_id}/{self.file_name}: load must be a "
                f"callable returning a Module, got {type(self.load).__name__}"
            )

    @property
    def loader(self) -> str:
        """Always :data:`IN_MEMORY_LOADER`: the artifact loads itself."""
        return IN_MEMORY_LOADER

    @property
    def key(self) -> tuple[str, str]:
        """The ``(codegen_id, file_name)`` pair that names this artifact within a set."""
        return (self.codegen_id, self.file_name)

    @property
    def exportable(self) -> bool:
        """In-memory artifacts can never be saved or exported."""
        return False

    @property
    def metadata(self) -> Mapping[str, MetadataValue]:
        """In-memory artifacts carry only their description."""
        return FrozenMetadata({"description": self.description})

    def not_exportable_error(self, action: str) -> ArtifactError:
        """The error raised when ``action`` (e.g. ``"export"``) meets this artifact."""
        fix = (
            f"use {self.alternative} to get exportable code"
            if self.alternative
            else "rebuild with a target whose code generator emits serializable artifacts"
        )
        return ArtifactError(
            f"cannot {action}: artifact {self.codegen_id}/{self.file_name} "
            f"({self.description}) exists only in memory; {fix}"
        )

    def __repr__(self) -> str:
        return f"InMemoryArtifact({self.codegen_id!r}, {self.file_name!r}, {self.description!r})"


#: Anything an ArtifactSet holds.
AnyArtifact = Artifact | InMemoryArtifact
