"""docs/cli.md is generated from the parser and every error class is in troubleshooting.md."""

from __future__ import annotations

import inspect
from pathlib import Path

import ember.errors
from ember.cli.docgen import cli_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_cli_md_matches_the_parser() -> None:
    assert (DOCS / "cli.md").read_text() == cli_markdown(), (
        "docs/cli.md is stale: run `python -m ember.cli.docgen docs/cli.md`"
    )


def test_cli_md_lists_every_flag() -> None:
    text = cli_markdown()
    for flag in ("--input-shape", "--list-targets", "--max-seconds", "--inputs", "--version"):
        assert f"`{flag}" in text


def test_troubleshooting_names_every_error_class() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    classes = [
        name
        for name, value in vars(ember.errors).items()
        if inspect.isclass(value) and issubclass(value, ember.errors.EmberError)
    ]
    assert len(classes) > 10
    missing = [name for name in classes if f"### `{name}`" not in text]
    assert not missing, f"docs/troubleshooting.md has no section for {missing}"
