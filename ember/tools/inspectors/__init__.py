"""Artifact inspectors: turn any artifact into text a person can read.

Inspectors are registered per ``(codegen_id, file suffix)`` in one Registry. A lookup
tries, in order: ``(codegen_id, suffix)``, ``("*", suffix)``, ``(codegen_id, "*")`` and
``("*", "*")``, so a new codegen adds its own view without touching the others.

Example::

    @inspector("mycodegen", ".bin")
    def show_bin(art: AnyArtifact) -> str:
        return decode_my_format(art.content)

    print(inspect_artifact(art))
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


def _key(codegen_id: str, suffix: str) -> str:
    return f"{codegen_id}:{suffix}"


def register_inspector(
    codegen_id: str, suffix: str, func: Inspector, override: bool = False
) -> Inspector:
    """Register ``func`` for artifacts of ``codegen_id`` (or ``"*"``) whose name ends in ``suffix``.

    ``suffix`` includes the dot (``".json"``) or is ``"*"`` for any file.
    """
    return INSPECTORS.register(_key(codegen_id, suffix), func, override=override)


def inspector(
    codegen_id: str, suffix: str, override: bool = False
) -> Callable[[Inspector], Inspector]:
    """Decorator form of :func:`register_inspector`."""

    def wrap(func: Inspector) -> Inspector:
        return register_inspector(codegen_id, suffix, func, override=override)

    return wrap


def find_inspector(art: AnyArtifact) -> Inspector:
    """The most specific inspector for ``art`` (see the module docstring for the order)."""
    _ensure_builtins()
    suffix = file_suffix(art.file_name)
    for key in (
        _key(art.codegen_id, suffix),
        _key(ANY, suffix),
        _key(art.codegen_id, ANY),
        _key(ANY, ANY),
    ):
        found = INSPECTORS.find(key)
        if found is not None:
            return found
    return INSPECTORS.get(_key(ANY, ANY))


def inspect_artifact(art: AnyArtifact) -> str:
    """Render one artifact for a person: source as is, JSON pretty-printed, binaries summarized."""
    return find_inspector(art)(art)


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


_BUILTINS_REGISTERED = False


def _ensure_builtins() -> None:
    """Register the built-in inspectors on first use (through the public call)."""
    global _BUILTINS_REGISTERED
    if not _BUILTINS_REGISTERED:
        _BUILTINS_REGISTERED = True
        from ember.tools.inspectors.builtin import register_builtin_inspectors

        register_builtin_inspectors()


__all__ = [
    "INSPECTORS",
    "Inspector",
    "artifact_table",
    "find_inspector",
    "inspect_artifact",
    "inspector",
    "register_inspector",
]
