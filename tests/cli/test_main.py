"""The ember command line: the command table, help, errors, python -m ember."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ember.cli.main import BUILTIN_COMMANDS, COMMANDS, build_parser, main, register_command


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().out
    assert "inspect" in out and "usage: ember" in out


def test_help_lists_commands_without_importing_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert BUILTIN_COMMANDS["inspect"][1] in capsys.readouterr().out


def test_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_registered_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    register_command("echo_test", "cli_echo_command", "echo a word")
    try:
        assert "echo_test" in build_parser().format_help()
        assert main(["echo_test", "hello"]) == 0
        assert capsys.readouterr().out == "hello\n"
        # An EmberError from the command becomes a one-line message and exit code 1.
        assert main(["echo_test", "fail"]) == 1
        assert capsys.readouterr().err == "ember echo_test: error: asked to fail\n"
    finally:
        COMMANDS.unregister("echo_test")


def test_python_dash_m_ember() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ember", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "inspect" in proc.stdout
