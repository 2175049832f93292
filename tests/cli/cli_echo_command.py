"""A tiny command module used by test_main.py to exercise register_command."""

from __future__ import annotations

import argparse

from ember.errors import EmberValueError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("word")


def run(args: argparse.Namespace) -> int:
    if args.word == "fail":
        raise EmberValueError("asked to fail")
    print(args.word)
    return 0
