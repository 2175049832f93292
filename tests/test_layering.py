"""Layering: the runtime side of ember never imports the compiler side; no import cycles.

Imports are parsed with ``ast`` at every level (module, ``if TYPE_CHECKING:``, and inside
function bodies) into a module graph of the whole package. The tests check the layer
order of every folder (the table in docs/architecture.md), that runtime/, formats/,
executor/ and tools/ form an acyclic graph without imports inside functions, and that any
other cycle is a known one.
"""

from __future__ import annotations

import ast
import fnmatch
import subprocess
import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
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
        "import time; t = time.process_time(); import ember.runtime; "
        "from ember.runtime import libruntime, c_api; "
        "print(libruntime.is_loaded(), c_api.is_loaded(), time.process_time() - t)"
    )
    # CPU time of this process, not wall time: other processes on a busy machine stretch
    # wall time 5-10x; a C build at import would show up in is_loaded() (and child time)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded, bound, seconds = out.stdout.split()
    assert loaded == "False" and bound == "False"
    assert float(seconds) < 3.0


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
            bad = _imported_layers(path) - RUNTIME_ALLOWED - {layer}
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


# ---- the import graph ------------------------------------------------------------------
@dataclass(frozen=True)
class ImportRef:
    """One import statement's target: who imports what, where, at which level."""

    source: str  # the importing module, e.g. "ember.runtime.module"
    target: str  # the imported module (an ember module, or the top name of another package)
    line: int
    scope: str  # "module", "type_checking" or "function"

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target} ({self.scope} level)"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: Iterable[str]) -> str:
    """The longest prefix of ``name`` that is an ember module (or its top-level name)."""
    known = set(modules)
    parts = name.split(".")
    while parts:
        if ".".join(parts) in known:
            return ".".join(parts)
        parts.pop()
    return name.split(".")[0]


def parse_imports(
    source: str, name: str, is_package: bool, modules: Iterable[str]
) -> list[ImportRef]:
    """Every import in ``source`` (the module ``name``), resolved to module names."""
    known = set(modules)
    refs: list[ImportRef] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = node.module or ""
        if node.level:
            package = name.split(".") if is_package else name.split(".")[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join(package + ([base] if base else []))
        # ``from pkg import sub`` imports the module pkg.sub when there is one
        return [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                inner = "function"
            elif (
                isinstance(child, ast.If)
                and scope == "module"
                and "TYPE_CHECKING" in ast.unparse(child.test)
            ):
                inner = "type_checking"
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in targets(child):
                    refs.append(ImportRef(name, _resolve(target, known), child.lineno, inner))
            visit(child, inner)

    visit(ast.parse(source), "module")
    return refs


def all_imports() -> list[ImportRef]:
    """The imports of every module of the ember package."""
    refs = []
    for name, path in MODULES.items():
        refs += parse_imports(path.read_text(), name, path.name == "__init__.py", MODULES)
    return refs


def _graph(refs: Iterable[ImportRef], keep: str = "ember") -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for ref in refs:
        inside = ref.source.startswith(keep) and ref.target.startswith(keep)
        if inside and ref.target in MODULES and ref.source != ref.target:
            graph.setdefault(ref.source, set()).add(ref.target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One shortest cycle through the first module of ``component``, as ``a -> b -> a``."""
    start, members = component[0], set(component)
    parents: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, set()) & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return " -> ".join([*reversed(path), start])
            if nxt not in parents:
                parents[nxt] = node
                queue.append(nxt)
    return " -> ".join(component)


def test_cycle_finder_reports_a_path() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert strongly_connected(graph) == [["a", "b", "c"]]
    assert cycle_path(graph, ["a", "b", "c"]) == "a -> b -> c -> a"
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_import_parser_sees_every_level() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from ember.runtime import c_api\n"
        "if TYPE_CHECKING:\n    from ember.runtime.module import Module\n"
        "def f():\n    import ember.runtime.loading\n"
    )
    refs = parse_imports(source, "ember.runtime.x", False, MODULES)
    seen = {(r.target, r.scope) for r in refs}
    assert ("ember.runtime.c_api", "module") in seen
    assert ("ember.runtime.module", "type_checking") in seen
    assert ("ember.runtime.loading", "function") in seen


# ---- the runtime side: a DAG, no imports inside functions ------------------------------
ACYCLIC_LAYERS = ("runtime", "formats", "executor", "tools", "rpc")

#: Imports allowed inside function bodies on the runtime side: optional dependencies only,
#: by top-level package name, each with the reason. Keep this list short.
OPTIONAL_DEPENDENCIES: dict[str, str] = {}


def _in_layers(module: str, layers: Iterable[str]) -> bool:
    return any(module == f"ember.{ly}" or module.startswith(f"ember.{ly}.") for ly in layers)


def test_runtime_side_module_graph_is_acyclic() -> None:
    refs = [r for r in all_imports() if _in_layers(r.source, ACYCLIC_LAYERS)]
    graph = _graph(r for r in refs if _in_layers(r.target, ACYCLIC_LAYERS))
    cycles = [cycle_path(graph, c) for c in strongly_connected(graph)]
    assert not cycles, "import cycles (split a module or register from the higher one):\n" + (
        "\n".join(cycles)
    )


def test_runtime_side_imports_nothing_inside_functions() -> None:
    bad = [
        str(r)
        for r in all_imports()
        if _in_layers(r.source, ACYCLIC_LAYERS)
        and r.scope == "function"
        and r.target.split(".")[0] not in OPTIONAL_DEPENDENCIES
    ]
    assert not bad, (
        "imports inside function bodies (move them to the top of the module; an optional "
        "dependency goes into OPTIONAL_DEPENDENCIES with its reason):\n" + "\n".join(bad)
    )


# ---- the layer order of every folder (docs/architecture.md) ----------------------------
BASE = frozenset({"errors", "config", "support"})
COMPILER = frozenset({"ir", "frontend", "transform", "target", "tir", "ops", "lowering", "codegen"})
RUNTIME = frozenset({"runtime", "formats", "executor"})

#: folder (or top-level module) -> the ember layers its modules may import.
LAYERS: dict[str, frozenset[str]] = {
    "errors": frozenset(),
    "config": frozenset({"errors"}),
    "support": frozenset({"errors", "config"}),
    "runtime": BASE,
    "formats": BASE,
    "executor": BASE | {"runtime", "formats"},
    "tools": BASE | RUNTIME,
    "rpc": BASE | RUNTIME,
    "nd": BASE | {"runtime"},
    "ir": BASE,
    "frontend": BASE | {"ir"},
    "transform": BASE | {"ir"},
    "target": BASE,
    "tir": BASE,
    "ops": BASE | {"ir", "tir", "target"},
    "lowering": BASE | {"ir", "tir", "ops", "formats"},
    "codegen": BASE | {"tir", "target", "runtime"},
    # all compiler layers but no code generator, plus the runtime side whose data
    # (ArtifactSet, metadata artifacts) a build returns
    "driver": BASE | (COMPILER - {"codegen"}) | RUNTIME | {"tools"},
    "testing": BASE | COMPILER | RUNTIME | {"driver", "ember"},
    "cli": BASE | COMPILER | RUNTIME | {"driver", "tools", "ember", "rpc"},
    "examples": BASE | COMPILER | RUNTIME | {"driver", "tools", "testing", "ember"},
    # shipped external back ends: plug-ins over every compiler layer and the driver's
    # region helpers, registered through the public calls
    "backends": BASE | COMPILER | RUNTIME | {"driver"},
    # the public API; compiler names resolve lazily; tools.mlf registers the tar loader
    "ember": BASE | RUNTIME | {"nd", "tools"},
    "__main__": frozenset({"cli"}),
}

#: Imports of a layer narrower than the layer: codegen needs Artifact data and register_func,
#: the inspector registry for its views, and (llvmjit) what an in-memory artifact needs to
#: load itself into a module: the C API, Module and PackedFunc; llvm objects record the
#: digest of the runtime's tile kernels they call (libruntime.tiles_digest).
NARROW = {
    ("codegen", "runtime"): (
        "ember.runtime.artifact",
        "ember.runtime.artifact_set",
        "ember.runtime.registry",
        "ember.runtime.inspection",
        "ember.runtime.c_api",
        "ember.runtime.module",
        "ember.runtime.packed_func",
        "ember.runtime.libruntime",
    )
}

#: Violations of LAYERS on the compiler side today, "source module -> target layer". Other
#: engineers are refactoring these folders; remove an entry when its import is gone.
KNOWN_LAYER_VIOLATIONS = {
    # lower_group.py reads the Target (keys, CPU) to pick schedules; the table's lowering
    # row does not list target
    "ember.lowering.lower_group -> target",
    # the C metadata generator (AOT) writes ModelMetadata; the codegen row omits formats
    "ember.codegen.c.metadata -> formats",
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_every_folder_has_a_declared_layer() -> None:
    missing = sorted({_layer(m) for m in MODULES} - set(LAYERS))
    assert not missing, f"declare the allowed imports of {missing} in LAYERS (and the docs)"


def test_every_module_obeys_the_layer_order() -> None:
    found = set()
    for ref in all_imports():
        if not ref.target.startswith("ember"):
            continue
        src, dst = _layer(ref.source), _layer(ref.target)
        narrow = NARROW.get((src, dst))
        if src == dst or (dst in LAYERS.get(src, ()) and (narrow is None or ref.target in narrow)):
            continue
        found.add((f"{ref.source} -> {dst}", str(ref)))
    new = sorted(text for key, text in found if key not in KNOWN_LAYER_VIOLATIONS)
    assert not new, "imports against the layer order (docs/architecture.md):\n" + "\n".join(new)


# ---- cycles anywhere in the package ----------------------------------------------------
#: Import cycles on the compiler side today, each as the module patterns it may span. A
#: cycle found must lie inside one entry. Most are function-level imports that dodge a
#: cycle; the steering engineer removes an entry once its folder is untangled.
KNOWN_CYCLES: dict[str, tuple[str, ...]] = {
    # expr/stmt/buffer <-> printer, simplify, functor (function-level imports)
    "tir core": ("ember.tir.*",),
    # ir.op loads the built-in op families (ir.ops.*), which register through ir.op
    "ir ops": ("ember.ir.op", "ember.ir.ops", "ember.ir.ops.*"),
    # IRModule.__str__ uses the printer, which prints IRModules
    "ir printer": ("ember.ir.module", "ember.ir.printer"),
}


def _known_cycle(component: list[str]) -> bool:
    return any(
        all(any(fnmatch.fnmatchcase(m, p) for p in patterns) for m in component)
        for patterns in KNOWN_CYCLES.values()
    )


def test_package_import_cycles_are_known() -> None:
    graph = _graph(all_imports())
    new = [cycle_path(graph, c) for c in strongly_connected(graph) if not _known_cycle(c)]
    assert not new, "new import cycles (see KNOWN_CYCLES):\n" + "\n".join(new)


def test_tools_import_no_compiler_layer() -> None:
    code = (
        "import sys, ember.tools.inspectors.sources, ember.tools.package\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[1:2] and "
        f"m.split('.')[0] == 'ember' and m.split('.')[1] in {COMPILER_LAYERS!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"ember.tools loaded compiler modules: {out.stdout}"
