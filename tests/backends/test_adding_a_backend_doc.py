"""docs/adding_a_backend.md: its Python block runs as written (in a fresh process, so the
kind it registers does not leak into other tests)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.cc
PAGE = ROOT / "docs" / "adding_a_backend.md"


def test_python_block_runs_as_written(tmp_path: Path):
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1
    code = blocks[0]
    assert len(code.strip().splitlines()) <= 70  # "about fifty lines" of back end + use
    script = tmp_path / "mylib_backend.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
