"""Argument types and checks shared by the ``ember`` commands.

Each refuses a bad value with one line that names the flag and says what to pass; argparse
turns an ``ArgumentTypeError`` into ``ember CMD: error: ...`` and exit code 2, and a check
run later raises :class:`~ember.errors.UsageError`, which ``ember`` turns into the same::

    parser.add_argument("--repeat", type=int_range(1, 10**6), default=5)
    check_output_path(args.output, "-o")       # before a long compile, not after
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from ember.errors import UsageError


def int_range(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer {low}-{high}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse ``NAME:D1,D2,...`` (an input's full shape) or ``DIM:N`` (a symbolic dim)."""
    name, _, dims = text.rpartition(":")
    if not name or not dims:
        raise argparse.ArgumentTypeError(
            f"expected NAME:D1,D2,... (an input) or DIM:N (a symbolic dim), got {text!r}"
        )
    try:
        values = tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"dimensions must be integers in {text!r}, e.g. x:1,3,224,224"
        ) from None
    if any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"dimensions must be >= 0 in {text!r}")
    return name, values


def check_input_file(path: Path, flag: str, what: str) -> None:
    """UsageError unless ``path`` is an existing regular file."""
    if not path.exists():
        raise UsageError(f"{flag} {path}: no such file; pass {what}")
    if not path.is_file():
        raise UsageError(
            f"{flag} {path}: not a regular file (a directory, FIFO or device); pass {what}"
        )


def check_output_path(path: Path, flag: str) -> None:
    """UsageError unless ``path`` can be written: its directory exists and is writable."""
    if path.is_dir():
        raise UsageError(f"{flag} {path} is a directory; pass the path of a file to write")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: the directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: the directory {parent} is not writable")


def existing_file(text: str) -> Path:
    """An argparse type: the path of an existing regular file."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text}: no such regular file")
    return path


def existing_dir(text: str) -> str:
    """An argparse type: the path of an existing directory."""
    if not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no such directory; create it first")
    return text
