"""Test helper: compile PrimFuncs with build_c and the system compiler, load the library."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ember.codegen.c import build_c
from ember.runtime import include_dir, load_module
from ember.runtime.module import Module
from ember.support.toolchain import compile_shared
from ember.tir import PrimFunc


def compile_funcs(
    funcs: Sequence[PrimFunc],
    out_dir: Path,
    target: dict[str, object] | None = None,
    extra_sources: Sequence[str] = (),
) -> Module:
    """build_c + the system compiler + load_module, with the flags the artifacts record."""
    arts = build_c(funcs, target or {"max_file_bytes": 4096})
    out_dir.mkdir(parents=True, exist_ok=True)
    sources = []
    for art in arts:
        path = out_dir / art.file_name
        path.write_bytes(art.content)
        sources.append(path)
    for k, text in enumerate(extra_sources):
        path = out_dir / f"extra{k}.c"
        path.write_text(text)
        sources.append(path)
    flags = str(arts[0].metadata["cflags"]).split()
    lib = compile_shared(sources, out_dir / "kernels.so", include_dirs=[include_dir()], flags=flags)
    return load_module(str(lib))
