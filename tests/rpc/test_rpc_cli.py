"""``ember rpc ...``: argument handling and refusals (servers themselves: test_server.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from rpc_util import start

from ember.cli.main import main
from ember.cli.rpc_cmd import parse_address
from ember.errors import EmberValueError
from ember.rpc import connect_tracker


def test_non_loopback_without_token_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rpc", "server", "--host", "0.0.0.0", "--port", "0"]) == 1
    assert "needs a token" in capsys.readouterr().err
    assert main(["rpc", "tracker", "--host", "0.0.0.0", "--port", "0"]) == 1
    assert "needs --token-file" in capsys.readouterr().err


def test_status_of_a_missing_tracker_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rpc", "status", "--tracker", "127.0.0.1:1"]) == 1
    assert "tracker status" in capsys.readouterr().err


def test_addresses() -> None:
    assert parse_address("127.0.0.1:9190") == ("127.0.0.1", 9190)
    assert parse_address("[::1]:80") == ("::1", 80)
    with pytest.raises(EmberValueError, match="HOST:PORT"):
        parse_address("localhost")


def test_rpc_server_imports_no_compiler_layer() -> None:
    code = (
        "import sys; from ember.cli import rpc_cmd; import ember.rpc.worker; "
        "bad = [m for m in sys.modules if m.split('.')[:2][-1] in "
        "('ir', 'transform', 'tir', 'codegen', 'frontend', 'ops', 'target', 'driver') "
        "and m.startswith('ember.')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_tracker_command_serves_status(capsys: pytest.CaptureFixture[str]) -> None:
    proc = start("tracker", "--host", "127.0.0.1")
    try:
        assert connect_tracker("127.0.0.1", proc.port).status() == {"servers": [], "queue": {}}
        assert main(["rpc", "status", "--tracker", f"127.0.0.1:{proc.port}"]) == 0
        assert "queue: empty" in capsys.readouterr().out
    finally:
        assert proc.stop() == 0
