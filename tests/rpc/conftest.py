"""Fixtures of the RPC tests: an exported model and a loopback server that stops by itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from rpc_util import Proc, export_model, start  # noqa: E402


@pytest.fixture(scope="session")
def graph_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small model built for the graph executor, exported as a shared library."""
    return export_model(tmp_path_factory.mktemp("rpc_models"), "graph")


@pytest.fixture(scope="session")
def aot_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small model built for the AOT executor, exported as a shared library."""
    return export_model(tmp_path_factory.mktemp("rpc_models_aot"), "aot")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Proc]:
    """An RPC server on 127.0.0.1 (a free port), its sessions under ``tmp_path/work``."""
    work = tmp_path / "work"
    work.mkdir()
    proc = start("server", "--host", "127.0.0.1", "--work-dir", str(work))
    yield proc
    proc.stop()
