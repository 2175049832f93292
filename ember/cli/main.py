"""The ``ember`` command line: ``ember <command> ...`` with commands from one small table.

A command lives in its own module with ``add_arguments(parser)`` and ``run(args) -> int``.
Only the chosen command's module is imported, so ``ember inspect`` never loads the compiler.
Add a command with one line in :data:`BUILTIN_COMMANDS` or at run time with
:func:`register_command`::

    register_command("bench", "ember.cli.bench_cmd", "time a model against onnxruntime")
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import NoReturn, cast

from ember import __version__
from ember.errors import EmberError, UsageError
from ember.support.advice import entry_point
from ember.support.registry import Registry

#: Exit codes: success, a failure on valid input, refused input (argparse's code).
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, one-line help and the module implementing it."""

    name: str
    module: str
    help: str

    def load(self) -> ModuleType:
        """Import the implementing module (which defines add_arguments and run)."""
        return importlib.import_module(self.module)


#: The built-in commands: name -> (module, one-line help). Other layers add a line here.
BUILTIN_COMMANDS: dict[str, tuple[str, str]] = {
    "compile": ("ember.cli.compile_cmd", "compile an ONNX model into a package"),
    "inspect": ("ember.cli.inspect_cmd", "list or show what a package (.tar) or library holds"),
    "run": ("ember.cli.run_cmd", "run a compiled package on inputs, time and profile it"),
    "rpc": ("ember.cli.rpc_cmd", "RPC: serve sessions, run a tracker, print its status"),
}

#: Every command known to :func:`main`.
COMMANDS: Registry[Command] = Registry("ember command")


def register_command(name: str, module: str, help: str, override: bool = False) -> Command:
    """Add a subcommand implemented by ``module`` (which defines ``add_arguments`` and ``run``)."""
    return COMMANDS.register(name, Command(name, module, help), override=override)


def _commands() -> list[Command]:
    for name, (module, help_text) in BUILTIN_COMMANDS.items():
        if name not in COMMANDS:
            register_command(name, module, help_text)
    return [COMMANDS.get(name) for name in COMMANDS.names()]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2, no usage dump."""

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see PROG --help)`` and exit with :data:`EXIT_USAGE`."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser(chosen: str | None = None, every: bool = False) -> argparse.ArgumentParser:
    """The argument parser; only the ``chosen`` command's arguments are loaded (all: ``every``)."""
    parser = Parser(
        prog="ember", description="ember: compile, run and inspect deep-learning models"
    )
    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in _commands():
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        if every or command.name == chosen:
            add_arguments = cast(
                Callable[[argparse.ArgumentParser], None], command.load().add_arguments
            )
            add_arguments(child)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``ember`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = args_list[0] if args_list and args_list[0] in _command_names() else None
    parser = build_parser(chosen)
    args = parser.parse_args(args_list)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    command = COMMANDS.get(args.command)
    run = cast(Callable[[argparse.Namespace], int], command.load().run)
    try:
        with entry_point("cli"):
            return run(args)
    except UsageError as err:
        print(f"ember {command.name}: error: {_one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except EmberError as err:
        print(f"ember {command.name}: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as err:  # the system refused (address in use, disk full, permissions)
        print(f"ember {command.name}: error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"ember {command.name}: interrupted", file=sys.stderr)
        return 130


def _one_line(err: Exception) -> str:
    """The error's message on one line (the lines of a multi-line message joined by '; ')."""
    lines = [line for line in str(err).splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else type(err).__name__
    return "; ".join(lines)


def _command_names() -> list[str]:
    return [c.name for c in _commands()]
