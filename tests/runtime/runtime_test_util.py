"""Helpers for runtime tests: compile a C snippet against the runtime header and load it."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ember.runtime as rt
from ember.config import ThreadCountWarning
from ember.runtime.threads import pool_policy
from ember.support.toolchain import compile_shared

PRELUDE = """
#include <ember/runtime_api.h>
#include <stdio.h>
#include <string.h>
#define EMBER_ARGS EmberValue* args, int32_t* codes, int32_t n, EmberValue* ret, \\
    int32_t* ret_code, void* resource
"""


def build_library(tmp_path: Path, source: str, name: str = "lib") -> rt.LibraryModule:
    """Compile ``PRELUDE + source`` into tmp_path and load it as a LibraryModule."""
    src = tmp_path / f"{name}.c"
    src.write_text(PRELUDE + source)
    out = compile_shared([src], tmp_path / f"{name}.so", include_dirs=[rt.include_dir()])
    module = rt.load_module(out)
    assert isinstance(module, rt.LibraryModule)
    return module


def _set_threads(count: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ThreadCountWarning)
        rt.set_num_threads(count)


@contextmanager
def pool_under_test(policy: str, threads: int | None = 2) -> Iterator[None]:
    """The pool with ``policy`` and nothing learnt, at ``threads`` (None: unchanged; more
    than the cores does not warn); afterwards the adaptive policy, nothing learnt, and the
    thread count from before."""
    before = rt.get_num_threads()
    if threads is not None:
        _set_threads(threads)
    pool_policy(policy, reset=True)
    try:
        yield
    finally:
        pool_policy("adaptive", reset=True)
        _set_threads(before)
