"""Fixtures of the LLVM back end's tests: ``build`` compiles PrimFuncs with LLVM.

The folder is put on sys.path so tests import ``llvm_build`` by plain name, and the C
back end's test folder too, so its private copies find ``codegen_build``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

for folder in (Path(__file__).parent, Path(__file__).parent.parent):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from llvm_build import compile_funcs  # noqa: E402

import ember.codegen.llvm  # noqa: E402,F401 - registers the llvm and llvmjit kinds
from ember.runtime.module import Module  # noqa: E402
from ember.tir import PrimFunc  # noqa: E402

BuildFn = Callable[..., Module]


@pytest.fixture
def build() -> BuildFn:
    """Compile PrimFuncs with the LLVM back end and load them as a runtime Module."""

    def run(
        funcs: Sequence[PrimFunc],
        target: dict[str, object] | None = None,
        extra_sources: Sequence[str] = (),
    ) -> Module:
        return compile_funcs(funcs, None, target, extra_sources)

    return run
