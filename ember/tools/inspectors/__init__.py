"""Artifact inspectors: turn any artifact into text a person can read.

The registry belongs to the runtime (:mod:`ember.runtime.inspection`, re-exported here):
inspectors are registered per ``(codegen_id, file suffix)``, and a lookup tries, in order,
``(codegen_id, suffix)``, ``("*", suffix)``, ``(codegen_id, "*")`` and ``("*", "*")``,
so a new codegen adds its own view without touching the others. This package adds the
built-in inspectors (:mod:`.builtin`, registered on first use through the public call)
and the readers of inspectable paths (:mod:`.sources`).

Example::

    @inspector("mycodegen", ".bin")
    def show_bin(art: AnyArtifact) -> str:
        return decode_my_format(art.content)

    print(inspect_artifact(art))
"""

from __future__ import annotations

from ember.runtime.artifact import AnyArtifact
from ember.runtime.inspection import (
    ANY,
    INSPECTORS,
    Inspector,
    artifact_table,
    inspector,
    inspector_key,
    lookup_inspector,
    register_inspector,
)
from ember.tools.inspectors.builtin import register_builtin_inspectors

_BUILTINS_REGISTERED = False


def _ensure_builtins() -> None:
    """Register the built-in inspectors on first use (a user's earlier registration wins)."""
    global _BUILTINS_REGISTERED
    if not _BUILTINS_REGISTERED:
        _BUILTINS_REGISTERED = True
        register_builtin_inspectors()


def find_inspector(art: AnyArtifact) -> Inspector:
    """The most specific inspector for ``art`` (see the module docstring for the order)."""
    _ensure_builtins()
    found = lookup_inspector(art)
    if found is not None:
        return found
    return INSPECTORS.get(inspector_key(ANY, ANY))


def inspect_artifact(art: AnyArtifact) -> str:
    """Render one artifact for a person: source as is, JSON pretty-printed, binaries summarized."""
    return find_inspector(art)(art)


__all__ = [
    "ANY",
    "INSPECTORS",
    "Inspector",
    "artifact_table",
    "find_inspector",
    "inspect_artifact",
    "inspector",
    "register_inspector",
]
