"""Security tests reuse the C test helper of tests/codegen and the small models of
hostile_models; fixtures: built artifact sets and a private cache directory."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import ember.config as ember_config
from ember.runtime.artifact_set import ArtifactSet

_CODEGEN = Path(__file__).parent.parent / "codegen"
for _dir in (_CODEGEN, Path(__file__).parent):
    if str(_dir) not in sys.path:
        sys.path.insert(0, str(_dir))

from hostile_models import relu_add_model  # noqa: E402  (after the path is set)


@pytest.fixture(scope="session")
def small_artifacts() -> ArtifactSet:
    """The built ArtifactSet of :func:`relu_add_model` (graph executor, C target)."""
    from ember.testing import compile_onnx  # noqa: PLC0415  (onnx is optional)

    return compile_onnx(relu_add_model())


@pytest.fixture(scope="session")
def other_artifacts() -> ArtifactSet:
    """Another model of the same interface (relu(x) - 2x): a different library (weights
    alone would not do: a package keeps them outside its library)."""
    from ember.testing import compile_onnx  # noqa: PLC0415  (onnx is optional)

    return compile_onnx(relu_add_model(2.0, "Sub"))


@pytest.fixture
def private_cache(tmp_path: Path) -> Iterator[Path]:
    """Point ember's cache at a fresh directory for one test."""
    saved = list(ember_config._CONFIG)
    cache = tmp_path / "cache"
    ember_config._CONFIG[:] = [dataclasses.replace(ember_config.config(), cache_dir=cache)]
    try:
        yield cache
    finally:
        ember_config._CONFIG[:] = saved
