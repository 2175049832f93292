"""Loading a benchmark script (``benchmarks/<script>.py``) by path in a test."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).parents[2] / "benchmarks"


def load_bench_script(script: str, name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``benchmarks/<script>.py`` loaded by path as module ``name`` (registered in
    sys.modules for the test only: dataclasses look their module up; the script puts its
    folder on sys.path for its helpers)."""
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{script}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
