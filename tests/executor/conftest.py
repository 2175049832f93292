"""Fixtures: the test kernels compiled once per worker and loaded as a LibraryModule."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The tests import the helper module executor_kernels by plain name; with
# --import-mode=importlib this folder is not on sys.path unless pyproject lists it.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from executor_kernels import build_kernels  # noqa: E402

from ember.runtime import load_module
from ember.runtime.module import Module


@pytest.fixture(scope="session")
def kernels_so(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of the compiled test kernels (one build per test worker)."""
    return build_kernels(tmp_path_factory.mktemp("kernels"))


@pytest.fixture(scope="session")
def kernel_lib(kernels_so: Path) -> Module:
    """The test kernels as a LibraryModule."""
    return load_module(str(kernels_so))
