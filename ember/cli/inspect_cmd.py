"""``ember inspect PATH [--show FILE|graph] [--json] [--memory-svg OUT.svg] [--html OUT.html]``:
list every artifact of a build output, show one, show the fused graph with the ONNX node
names of each kernel, draw the memory map, or write one self-contained HTML report.

PATH is a package tar from ``ember compile``, a directory written by ``ArtifactSet.save``,
a library written by ``export_library`` or any other kind a registered artifact source
recognizes. ``--json`` prints any view as JSON instead of text.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import ember.codegen.llvm.inspect  # noqa: F401 - registers the .ll and .s views
from ember.errors import ArtifactError, EmberValueError
from ember.executor.metadata_module import GRAPH_JSON_FILE
from ember.formats.graph_json import GraphJSON
from ember.formats.memory_map import MEMORY_MAP_FILE, MemoryMap
from ember.runtime.artifact import AnyArtifact, Artifact
from ember.runtime.inspection import INSPECTORS, inspector_key
from ember.support.files import write_file_atomic
from ember.tools.html_report import html_report
from ember.tools.inspectors import artifact_table, inspect_artifact
from ember.tools.inspectors.graph_view import find_graph, graph_memory_map, graph_text, kernel_rows
from ember.tools.inspectors.sources import ArtifactSource, read_artifact_source, select_artifact
from ember.tools.memory_svg import memory_map_svg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare PATH and --show."""
    parser.add_argument(
        "path",
        type=Path,
        help="a package tar from 'ember compile', a saved artifact directory or an exported "
        "library",
    )
    parser.add_argument(
        "--show",
        metavar="FILE",
        help="print one artifact (file_name or codegen_id/file_name) instead of the list; "
        "a view of one (lib0.ll, lib0.s for lib0.o) where its codegen registers it; 'graph' "
        "prints the fused graph with the ONNX nodes of each kernel",
    )
    parser.add_argument("--json", action="store_true", help="print the view as JSON")
    parser.add_argument(
        "--html",
        metavar="OUT.html",
        type=Path,
        help="write one self-contained HTML page: fused graph, memory map, kernel times",
    )
    parser.add_argument(
        "--profile",
        metavar="PROFILE.json",
        type=Path,
        help="with --html: per-kernel times from 'ember run --profile-json'",
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
    """List the artifacts at ``args.path``, or print the view the flags ask for."""
    source = read_artifact_source(args.path)
    if args.html is not None:
        return _write_html(args, source)
    if args.memory_svg is not None:
        svg = memory_map_svg(_memory_map(source))
        write_file_atomic(args.memory_svg, svg.encode())
        sys.stdout.write(f"wrote {args.memory_svg}\n")
        return 0
    if args.asm:
        views = {}
        for art in source.artifacts:
            view = INSPECTORS.find(inspector_key(art.codegen_id, ".s"))
            if view is not None:
                views[f"{art.codegen_id}/{art.file_name}"] = view(art)
        _out(args, views, "".join(views.values()))
        return 0
    if args.show == GRAPH_VIEW:
        graph = _graph(source)
        _out(
            args, {"graph": kernel_rows(graph), "outputs": _output_names(graph)}, graph_text(graph)
        )
        return 0
    if args.show:
        try:
            art = select_artifact(source, args.show)
        except ArtifactError:
            text = derived_view(source, args.show)
            if text is None:
                raise
            _out(args, {"name": args.show, "text": text}, text)
            return 0
        _out(args, _artifact_json(art), inspect_artifact(art))
        return 0
    listing: dict[str, Any] = {"path": str(args.path), "kind": source.kind}
    listing["artifacts"] = [_artifact_entry(a) for a in source.artifacts]
    _out(args, listing, f"{args.path}: {source.kind}\n" + artifact_table(source.artifacts))
    return 0


#: ``--show graph``: the fused graph view rather than an artifact.
GRAPH_VIEW = "graph"


def _out(args: argparse.Namespace, obj: Any, text: str) -> None:
    """Print ``obj`` as JSON under ``--json``, else ``text``."""
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True) + "\n" if args.json else text)


def _artifact_entry(art: AnyArtifact) -> dict[str, Any]:
    entry: dict[str, Any] = {"codegen_id": art.codegen_id, "file_name": art.file_name}
    entry["loader"] = art.loader
    if isinstance(art, Artifact):
        entry.update(size=len(art.content), sha256=art.sha256, metadata=dict(art.metadata))
    return entry


def _artifact_json(art: AnyArtifact) -> dict[str, Any]:
    """One artifact for ``--show --json``: its entry, and its content parsed when it is
    JSON, else the text view."""
    out = _artifact_entry(art)
    if isinstance(art, Artifact) and art.file_name.endswith(".json"):
        try:
            out["content"] = json.loads(art.content)
            return out
        except ValueError:
            pass
    out["text"] = inspect_artifact(art)
    return out


def _graph(source: ArtifactSource) -> GraphJSON:
    graph = find_graph(source.artifacts)
    if graph is None:
        raise ArtifactError(
            f"{GRAPH_JSON_FILE} is not among the artifacts ({source.kind}); the fused graph "
            "is shown for builds of the graph or AOT executor"
        )
    return graph


def _output_names(graph: GraphJSON) -> list[str]:
    return list(graph.output_names or (f"output{i}" for i in range(len(graph.heads))))


def _memory_map(source: ArtifactSource) -> MemoryMap:
    """The AOT memory map when the build has one, else the graph executor's workspace."""
    try:
        art = select_artifact(source, MEMORY_MAP_FILE)
    except ArtifactError:
        return graph_memory_map(_graph(source))
    if not isinstance(art, Artifact):
        raise ArtifactError(f"{MEMORY_MAP_FILE} is an in-memory artifact; nothing to draw")
    return MemoryMap.from_json(art.content)


def _write_html(args: argparse.Namespace, source: ArtifactSource) -> int:
    profile = None
    if args.profile is not None:
        try:
            profile = json.loads(args.profile.read_text())
        except (OSError, ValueError) as err:
            raise EmberValueError(
                f"--profile {args.profile}: not a readable profile JSON ({err}); write one "
                "with 'ember run MODEL --profile-json OUT.json'"
            ) from None
        if not isinstance(profile, dict):
            raise EmberValueError(f"--profile {args.profile}: expected a JSON object")
    page = html_report(str(args.path), source.kind, _graph(source), _memory_map(source), profile)
    write_file_atomic(args.html, page.encode())
    sys.stdout.write(f"wrote {args.html}\n")
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
