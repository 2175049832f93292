"""Layering: the runtime side of ember never imports the compiler side."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ember

COMPILER_LAYERS = ("ir", "transform", "tir", "codegen", "frontend", "ops", "target", "driver")
RUNTIME_SIDE = ("runtime", "executor", "formats", "rpc")
RUNTIME_ALLOWED = {"runtime", "support", "errors", "config", "formats", "executor"}
PACKAGE = Path(ember.__file__).resolve().parent


def _existing(packages):
    return [p for p in packages if (PACKAGE / p).is_dir() or (PACKAGE / f"{p}.py").exists()]


def test_runtime_side_imports_without_compiler_modules():
    targets = _existing(RUNTIME_SIDE)
    code = "\n".join(
        [
            "import sys",
            *(f"import ember.{t}" for t in targets),
            f"bad = sorted(m for m in sys.modules if m.split('.')[1:2] and "
            f"m.split('.')[0] == 'ember' and m.split('.')[1] in {COMPILER_LAYERS!r})",
            "print(','.join(bad))",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"runtime side loaded compiler modules: {out.stdout}"


def test_runtime_import_compiles_nothing_and_is_quick():
    code = (
        "import time; t = time.perf_counter(); import ember.runtime; "
        "from ember.runtime import libruntime, c_api; "
        "print(libruntime.is_loaded(), c_api.is_loaded(), time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, bound, seconds = out.stdout.split()
    assert loaded == "False" and bound == "False"
    assert float(seconds) < 2.0


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    layers = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "ember":
                names = [f"ember.{a.name}" for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "ember" and len(parts) > 1:
                layers.add(parts[1])
    return layers


def test_runtime_side_import_statements_hold_the_layer_order():
    violations = []
    for layer in _existing(RUNTIME_SIDE):
        root = PACKAGE / layer
        files = sorted(root.rglob("*.py")) if root.is_dir() else [PACKAGE / f"{layer}.py"]
        for path in files:
            bad = _imported_layers(path) - RUNTIME_ALLOWED
            if bad:
                violations.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)


def test_support_and_config_are_leaves():
    leaves = [
        PACKAGE / "errors.py",
        PACKAGE / "config.py",
        *sorted((PACKAGE / "support").rglob("*.py")),
    ]
    violations = []
    for path in leaves:
        bad = _imported_layers(path) - {"support", "errors", "config"}
        if bad:
            violations.append(f"{path.relative_to(PACKAGE)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)
