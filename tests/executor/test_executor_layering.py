"""The executors and formats are runtime-only: importing them loads no compiler layer."""

from __future__ import annotations

import subprocess
import sys

COMPILER_LAYERS = (
    "ember.ir",
    "ember.transform",
    "ember.tir",
    "ember.codegen",
    "ember.frontend",
    "ember.lowering",
    "ember.driver",
)


def test_importing_executor_loads_no_compiler_layer() -> None:
    code = (
        "import sys\n"
        "import ember.executor, ember.formats\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({COMPILER_LAYERS!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"compiler layers imported: {out.stdout.strip()}"
