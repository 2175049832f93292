"""``ember inspect PATH [--show FILE]``: list every artifact of a build output and show one.

PATH is a directory written by ``ArtifactSet.save``, a library written by
``export_library`` or any other kind a registered artifact source recognizes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ember.tools.inspectors import artifact_table, inspect_artifact
from ember.tools.inspectors.sources import read_artifact_source, select_artifact


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare PATH and --show."""
    parser.add_argument("path", type=Path, help="a saved artifact directory or exported library")
    parser.add_argument(
        "--show",
        metavar="FILE",
        help="print one artifact (file_name or codegen_id/file_name) instead of the list",
    )


def run(args: argparse.Namespace) -> int:
    """List the artifacts at ``args.path``, or print the one named by ``--show``."""
    source = read_artifact_source(args.path)
    if args.show:
        sys.stdout.write(inspect_artifact(select_artifact(source, args.show)))
        return 0
    sys.stdout.write(f"{args.path}: {source.kind}\n")
    sys.stdout.write(artifact_table(source.artifacts))
    return 0
