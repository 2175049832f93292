"""``ember inspect PATH [--show FILE] [--memory-svg OUT.svg]``: list every artifact of a
build output, show one, or draw an AOT build's memory map.

PATH is a directory written by ``ArtifactSet.save``, a library written by
``export_library`` or any other kind a registered artifact source recognizes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import ember.codegen.llvm.inspect  # noqa: F401 - registers the .ll and .s views
from ember.errors import ArtifactError
from ember.formats.memory_map import MEMORY_MAP_FILE, MemoryMap
from ember.runtime.artifact import Artifact
from ember.runtime.inspection import INSPECTORS, inspector_key
from ember.support.files import write_file_atomic
from ember.tools.inspectors import artifact_table, inspect_artifact
from ember.tools.inspectors.sources import ArtifactSource, read_artifact_source, select_artifact
from ember.tools.memory_svg import memory_map_svg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare PATH and --show."""
    parser.add_argument("path", type=Path, help="a saved artifact directory or exported library")
    parser.add_argument(
        "--show",
        metavar="FILE",
        help="print one artifact (file_name or codegen_id/file_name) instead of the list; "
        "a view of one (lib0.ll, lib0.s for lib0.o) where its codegen registers it",
    )
    parser.add_argument(
        "--asm", action="store_true", help="print the assembly of every artifact that has one"
    )
    parser.add_argument(
        "--memory-svg",
        metavar="OUT.svg",
        type=Path,
        help="write the AOT memory map (memory_map.json) as an SVG timeline",
    )


def run(args: argparse.Namespace) -> int:
    """List the artifacts at ``args.path``, or print the one named by ``--show``."""
    source = read_artifact_source(args.path)
    if args.memory_svg is not None:
        art = select_artifact(source, MEMORY_MAP_FILE)
        if not isinstance(art, Artifact):
            raise ArtifactError(f"{MEMORY_MAP_FILE} is an in-memory artifact; nothing to draw")
        svg = memory_map_svg(MemoryMap.from_json(art.content))
        write_file_atomic(args.memory_svg, svg.encode())
        sys.stdout.write(f"wrote {args.memory_svg}\n")
        return 0
    if args.asm:
        for art in source.artifacts:
            view = INSPECTORS.find(inspector_key(art.codegen_id, ".s"))
            if view is not None:
                sys.stdout.write(view(art))
        return 0
    if args.show:
        try:
            art = select_artifact(source, args.show)
        except ArtifactError:
            text = derived_view(source, args.show)
            if text is None:
                raise
            sys.stdout.write(text)
            return 0
        sys.stdout.write(inspect_artifact(art))
        return 0
    sys.stdout.write(f"{args.path}: {source.kind}\n")
    sys.stdout.write(artifact_table(source.artifacts))
    return 0


def derived_view(source: ArtifactSource, name: str) -> str | None:
    """``lib0.ll`` -> the ``.ll`` view its codegen registers for the artifact ``lib0.*``."""
    stem, dot, suffix = name.rpartition(".")
    if not dot:
        return None
    for art in source.artifacts:
        full = f"{art.codegen_id}/{art.file_name}"
        if stem in (art.file_name.rpartition(".")[0], full.rpartition(".")[0]):
            view = INSPECTORS.find(inspector_key(art.codegen_id, "." + suffix))
            if view is not None:
                return view(art)
    return None
