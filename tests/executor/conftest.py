"""Fixtures: the test kernels compiled once per worker and loaded as a LibraryModule."""

from __future__ import annotations

from pathlib import Path

import pytest
from executor_kernels import build_kernels

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
