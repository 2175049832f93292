"""Fixtures: compile generated C into a shared library and load it as a runtime Module."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

# The tests import the helper module codegen_build by plain name; with
# --import-mode=importlib this folder is not on sys.path unless we put it there.
if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from codegen_build import compile_funcs  # noqa: E402

from ember.runtime.module import Module  # noqa: E402
from ember.tir import PrimFunc  # noqa: E402

BuildFn = Callable[..., Module]


@pytest.fixture
def build(tmp_path: Path) -> BuildFn:
    """Compile PrimFuncs into a fresh library under tmp_path and load it."""

    def run(
        funcs: Sequence[PrimFunc],
        target: dict[str, object] | None = None,
        extra_sources: Sequence[str] = (),
    ) -> Module:
        return compile_funcs(funcs, tmp_path / "lib", target, extra_sources)

    return run
