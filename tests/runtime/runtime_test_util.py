"""Helpers for runtime tests: compile a C snippet against the runtime header and load it."""

from __future__ import annotations

from pathlib import Path

import ember.runtime as rt
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
