"""``ember.export_model_library_format``: a build (or a Lowered) as a Model Library Format tar."""

from __future__ import annotations

import os
from pathlib import Path

from ember.driver.lowered import Lowered
from ember.runtime.artifact_set import ArtifactSet
from ember.tools.mlf import TestVectors, write_mlf


def export_model_library_format(
    build: Lowered | ArtifactSet,
    path: str | os.PathLike[str],
    target: str = "",
    test_vectors: TestVectors | None = None,
) -> Path:
    """Write ``build`` as an MLF tar: from a ``Lowered``, with its IR text and target; from
    an ArtifactSet, without the IR text (pass ``target`` for the README and metadata)."""
    if isinstance(build, Lowered):
        return write_mlf(
            build.compile(), path, target or str(build.target), build.as_text(), test_vectors
        )
    return write_mlf(build, path, target, "", test_vectors)
