"""Test helper: build PrimFuncs with the LLVM back end and load them, the C tests' way.

``compile_funcs(funcs, out_dir, target=None, extra_sources=(), kind="llvm")`` mirrors
``tests/codegen/codegen_build.compile_funcs``: C back-end option dicts are read for the
options both back ends share, extra C sources become C artifacts that the loading
process links with the LLVM object (``llvm``), or are refused (``llvmjit``).
``load_c_tests(path, name, **patches)`` loads one of the C back end's test modules as a
private copy whose module-level names (``compile_funcs``, ``assert_matches_onnxruntime``
...) are replaced, so its tests run against LLVM unchanged.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import ember
import ember.codegen.llvm  # noqa: F401 - registers the llvm and llvmjit kinds
import ember.driver
from ember.codegen.llvm import build_llvm, build_llvmjit
from ember.driver import pipeline
from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.loading import load_artifacts
from ember.runtime.module import Module
from ember.target import Target
from ember.tir import PrimFunc

TESTS = Path(__file__).resolve().parents[2]
SHARED = ("num_threads", "export_unpacked", "opt_level")


def llvm_target(kind: str = "llvm", options: dict[str, object] | None = None) -> Target:
    """A Target of ``kind`` with the options of a C option dict that LLVM shares."""
    attrs = {k.replace("_", "-"): v for k, v in (options or {}).items() if k in SHARED}
    return Target.create(kind).with_attrs(attrs)


def compile_funcs(
    funcs: Sequence[PrimFunc],
    out_dir: Path | None = None,
    target: dict[str, object] | None = None,
    extra_sources: Sequence[str] = (),
    kind: str = "llvm",
) -> Module:
    """Build with LLVM (plus extra C sources as C artifacts) and load through the runtime."""
    tgt = llvm_target(kind, target)
    arts: list[Any] = list(build_llvm(funcs, tgt) if kind == "llvm" else build_llvmjit(funcs, tgt))
    for k, text in enumerate(extra_sources):
        arts.append(Artifact("c", "native", f"extra{k}.c", text.encode(), {"cflags": "-O2"}))
    del out_dir
    return load_artifacts(ArtifactSet(arts))


def load_c_tests(path: Path, name: str, **patches: Any) -> dict[str, Any]:
    """The ``test_*`` functions (and ``pytestmark``) of a private copy of a test module."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for key, value in patches.items():
        setattr(module, key, value)
    return {k: v for k, v in vars(module).items() if k.startswith("test_") or _is_fixture(v)}


def c_suite(module: str, skip: set[str] | frozenset[str] = frozenset()) -> dict[str, Any]:
    """The tests and fixtures of ``tests/codegen/<module>.py``, built with LLVM."""
    tests = load_c_tests(
        TESTS / "codegen" / f"{module}.py", f"llvm_copy_{module}", compile_funcs=compile_funcs
    )
    return {k: v for k, v in tests.items() if k not in skip}


#: the kinds the compiled end-to-end suites run for here (``c`` runs in tests/e2e).
E2E_KINDS = ("llvm", "llvmjit")


def kind_fixture(kinds: Sequence[str]) -> Any:
    """An autouse fixture over ``kinds``: every ``ember.build`` of a test compiles for the
    kind instead of the default (or an explicit) ``c``."""

    @pytest.fixture(params=list(kinds), autouse=True)
    def compiled_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
        kind: str = request.param
        original = pipeline.build

        def build(mod: Any, target: Any = "c", *args: Any, **kwargs: Any) -> Any:
            if str(target).split()[0] == "c":
                target = kind + str(target)[1:]
            return original(mod, target, *args, **kwargs)

        # ember.build may be resolved lazily from ember.driver: patch it first, so that
        # the value restored afterwards is the real function, not this wrapper
        monkeypatch.setattr(ember, "build", build)
        monkeypatch.setattr(ember.driver, "build", build)
        return kind

    return compiled_kind


def e2e_suite(
    module: str,
    kinds: Sequence[str] = E2E_KINDS,
    skip: set[str] | frozenset[str] = frozenset(),
    folder: str = "e2e",
    only: set[str] | None = None,
) -> dict[str, Any]:
    """The tests of ``tests/<folder>/<module>.py`` (all but ``skip``, or ``only`` these),
    each run for every kind of ``kinds``."""
    tag = "_".join(kinds)
    tests = load_c_tests(TESTS / folder / f"{module}.py", f"llvm_copy_{module}_{tag}")
    found = {
        k: v
        for k, v in tests.items()
        if k not in skip and (only is None or k in only or not k.startswith("test_"))
    }
    found["compiled_kind"] = kind_fixture(kinds)
    return found


def _is_fixture(value: object) -> bool:
    return type(value).__name__ == "FixtureFunctionDefinition" or hasattr(
        value, "_pytestfixturefunction"
    )


def with_kind(kind: str) -> Callable[..., Module]:
    """``compile_funcs`` bound to one target kind."""

    def run(
        funcs: Sequence[PrimFunc],
        out_dir: Path | None = None,
        target: Any = None,
        extra_sources: Sequence[str] = (),
    ) -> Module:
        return compile_funcs(funcs, out_dir, target, extra_sources, kind)

    return run


#: tests of the C back end's suites that read C source text, not results
C_SOURCE_TESTS = frozenset(
    {
        "test_half_source_reads_bits_and_float32_source_is_unchanged",
        "test_half_vector_dtypes_are_clear_errors",
        "test_vector_code_of_sub_byte_types_is_refused",
    }
)


def c_copy(module: str, kind: str) -> dict[str, Any]:
    """The result tests of ``tests/codegen/<module>.py`` built for ``kind`` (``llvm`` or
    ``llvmjit``); one kind per test module, so its module-scoped fixtures stay apart."""
    tests = load_c_tests(
        TESTS / "codegen" / f"{module}.py",
        f"llvm_copy_{module}_{kind}",
        compile_funcs=with_kind(kind),
    )
    return {k: v for k, v in tests.items() if k not in C_SOURCE_TESTS}
