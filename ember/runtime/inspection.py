"""The artifact inspector registry and the artifact table (the runtime owns both).

Inspectors turn one artifact into text a person can read. They are registered per
``(codegen_id, file suffix)`` in one Registry owned here, so that any layer (the executor's
``params.bin`` view, a code generator, a user) registers through the same public call
without importing the tools layer, where the built-in inspectors live
(:mod:`ember.tools.inspectors`). A lookup tries, in order: ``(codegen_id, suffix)``,
``("*", suffix)``, ``(codegen_id, "*")`` and ``("*", "*")``.

Example::

    @inspector("mycodegen", ".bin")
    def show_bin(art: AnyArtifact) -> str:
        return decode_my_format(art.content)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ember.runtime.artifact import AnyArtifact, Artifact, file_suffix
from ember.support.registry import Registry

#: An inspector renders one artifact as text.
Inspector = Callable[[AnyArtifact], str]

#: Registered inspectors, keyed ``"<codegen_id>:<suffix>"`` (``*`` matches any).
INSPECTORS: Registry[Inspector] = Registry("artifact inspector")

ANY = "*"


def inspector_key(codegen_id: str, suffix: str) -> str:
    """The registry key of ``(codegen_id, suffix)``."""
    return f"{codegen_id}:{suffix}"


def register_inspector(
    codegen_id: str, suffix: str, func: Inspector, override: bool = False
) -> Inspector:
    """Register ``func`` for artifacts of ``codegen_id`` (or ``"*"``) whose name ends in ``suffix``.

    ``suffix`` includes the dot (``".json"``) or is ``"*"`` for any file.
    """
    return INSPECTORS.register(inspector_key(codegen_id, suffix), func, override=override)


def inspector(
    codegen_id: str, suffix: str, override: bool = False
) -> Callable[[Inspector], Inspector]:
    """Decorator form of :func:`register_inspector`."""

    def wrap(func: Inspector) -> Inspector:
        return register_inspector(codegen_id, suffix, func, override=override)

    return wrap


def lookup_inspector(art: AnyArtifact) -> Inspector | None:
    """The most specific registered inspector for ``art`` (see the module docstring), or None."""
    suffix = file_suffix(art.file_name)
    for key in (
        inspector_key(art.codegen_id, suffix),
        inspector_key(ANY, suffix),
        inspector_key(art.codegen_id, ANY),
        inspector_key(ANY, ANY),
    ):
        found = INSPECTORS.find(key)
        if found is not None:
            return found
    return None


def _size(art: AnyArtifact) -> str:
    return str(len(art.content)) if isinstance(art, Artifact) else "-"


def _sha(art: AnyArtifact) -> str:
    return art.sha256[:12] if isinstance(art, Artifact) else "(in memory)"


def artifact_table(artifacts: Iterable[AnyArtifact]) -> str:
    """A fixed-width table: codegen, loader, file, size, sha256 prefix; one row per artifact."""
    header = ("codegen", "loader", "file", "size", "sha256")
    rows = [header] + [(a.codegen_id, a.loader, a.file_name, _size(a), _sha(a)) for a in artifacts]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(width) if i == 3 else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"
