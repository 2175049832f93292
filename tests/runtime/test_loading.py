"""The code-loading process: loader checks first, native link, sorted loaders, metadata top."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_artifact_samples import (
    c_artifact,
    json_artifact,
    load_test_json,
    load_test_metadata,
    metadata_artifact,
    run_all,
    sample_set,
)

from ember.errors import ArtifactError, EmberValueError, ModuleLoadError, ToolchainError
from ember.runtime import loading
from ember.runtime.artifact import Artifact, InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.library_module import LibraryModule
from ember.runtime.libruntime import include_dir
from ember.runtime.loading import load_artifacts, loader_func_name
from ember.runtime.module import Module, PythonModule
from ember.runtime.registry import find_python_func, register_func, remove_global_func
from ember.support.toolchain import compile_object


class Recorder:
    """Registers loaders for a test, records their calls, restores the registry after."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self._saved: dict[str, Any] = {}

    def register(self, name: str, func: Any) -> None:
        if name not in self._saved:
            self._saved[name] = find_python_func(name)
        register_func(name, func, override=True)

    def json_loader(self, loader: str) -> None:
        """Register loadbinary_<loader>: a PythonModule with one function per JSON entry."""

        def load(arts: list[Artifact]) -> Module:
            self.calls.append((loader, [a.file_name for a in arts]))
            funcs: dict[str, Any] = {}
            for art in arts:
                for name, factor in json.loads(art.content)["functions"].items():
                    funcs[name] = lambda x, f=factor: x * f
            return PythonModule(funcs, type_key=loader)

        self.register(loader_func_name(loader), load)

    def metadata_loader(self) -> None:
        def load(arts: list[Artifact], host: Module) -> Module:
            self.calls.append(("metadata", [a.file_name for a in arts]))
            entry = json.loads(arts[0].content)["entry"]
            top = PythonModule({"run": lambda x: host[entry](x)}, type_key="metadata")
            top.import_module(host)
            return top

        self.register(loader_func_name("metadata"), load)

    def restore(self) -> None:
        for name, previous in self._saved.items():
            if previous is None:
                remove_global_func(name)
            else:
                register_func(name, previous, override=True)


@pytest.fixture
def rec() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.restore()


def funcs_json(**factors: int) -> bytes:
    return json.dumps({"functions": factors}).encode()


def test_loaders_run_sorted_by_name_and_import_into_the_host(rec: Recorder) -> None:
    rec.json_loader("zz_loader")
    rec.json_loader("aa_loader")
    arts = ArtifactSet(
        [
            Artifact("z", "zz_loader", "z1.json", funcs_json(z1=1)),
            Artifact("a", "aa_loader", "a1.json", funcs_json(a1=2)),
            Artifact("z", "zz_loader", "z2.json", funcs_json(z2=3)),
        ]
    )
    host = load_artifacts(arts)
    assert rec.calls == [("aa_loader", ["a1.json"]), ("zz_loader", ["z1.json", "z2.json"])]
    assert host.type_key == loading.HOST_TYPE_KEY
    assert [m.type_key for m in host.imports] == ["aa_loader", "zz_loader"]
    assert host["z2"](5) == 15 and host["a1"](5) == 10


def test_metadata_builds_the_top_module_last(rec: Recorder) -> None:
    rec.json_loader("test_json")
    rec.metadata_loader()
    arts = ArtifactSet(
        [
            Artifact("exec", "metadata", "graph.json", b'{"entry": "double_it"}'),
            json_artifact(),
        ]
    )
    top = load_artifacts(arts, "cpu")
    assert rec.calls == [("test_json", ["funcs.json"]), ("metadata", ["graph.json"])]
    assert top.type_key == "metadata"
    (host,) = top.imports
    assert host.type_key == loading.HOST_TYPE_KEY
    assert [m.type_key for m in host.imports] == ["test_json"]
    assert top["run"](21) == 42


def test_in_memory_artifacts_load_themselves(rec: Recorder) -> None:
    rec.json_loader("test_json")
    made: list[str] = []

    def make() -> Module:
        made.append("jit")
        return PythonModule({"jitted": lambda: "hi"}, type_key="jit")

    arts = ArtifactSet([InMemoryArtifact("llvmjit", "lib0.jit", make, "JIT"), json_artifact()])
    host = load_artifacts(arts)
    assert made == ["jit"]
    # "in_memory" sorts before "test_json", so the JIT module is imported first.
    assert [m.type_key for m in host.imports] == ["jit", "test_json"]
    assert host["jitted"]() == "hi"


def test_all_missing_loaders_are_reported_before_compiling(
    rec: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec.json_loader("present_loader")
    calls: list[Any] = []
    monkeypatch.setattr(loading, "compile_shared", lambda *a, **k: calls.append(a))
    arts = ArtifactSet(
        [
            c_artifact("missing-loader"),
            Artifact("x", "absent_one", "x.bin", b""),
            Artifact("y", "absent_two", "y.bin", b""),
            Artifact("p", "present_loader", "p.json", funcs_json()),
        ]
    )
    with pytest.raises(ModuleLoadError) as exc:
        load_artifacts(arts)
    msg = str(exc.value)
    assert "2 loader(s) not registered" in msg
    assert "'runtime.module.loadbinary_absent_one' (needed by x/x.bin)" in msg
    assert "'runtime.module.loadbinary_absent_two' (needed by y/y.bin)" in msg
    assert "runtime.module.loadbinary_present_loader" in msg.split("Registered loaders:")[1]
    assert calls == []


def test_a_loader_must_return_a_module(rec: Recorder) -> None:
    rec.register(loader_func_name("bad_loader"), lambda arts: "not a module")
    with pytest.raises(ModuleLoadError, match="returned str, expected a Module"):
        load_artifacts(ArtifactSet([Artifact("b", "bad_loader", "b.bin", b"")]))


def test_only_the_host_cpu_is_supported() -> None:
    with pytest.raises(EmberValueError, match="not supported yet"):
        load_artifacts(ArtifactSet([]), "opencl")


def test_native_flags_and_unknown_suffix(tmp_path: Path) -> None:
    arts = [
        Artifact("c", "native", "a.c", b"", {"cflags": "-DA=1 -O3"}),
        Artifact("c", "native", "b.c", b"", {"cflags": "-O3 -DB"}),
    ]
    assert loading.native_flags(arts) == [*loading.NATIVE_FLAGS, "-DA=1", "-O3", "-DB"]
    with pytest.raises(Exception, match="suffix '.bin'"):
        loading.write_native_sources([Artifact("c", "native", "x.bin", b"")], tmp_path)
    assert sample_set().native() == [c_artifact()]


@pytest.fixture
def test_loaders(rec: Recorder) -> Recorder:
    rec.register(loader_func_name("test_json"), load_test_json)
    rec.register(loader_func_name("metadata"), load_test_metadata)
    return rec


@pytest.mark.cc
def test_native_artifacts_are_linked_into_the_host(test_loaders: Recorder) -> None:
    arts = ArtifactSet([*sample_set("native-host"), metadata_artifact()])
    top = load_artifacts(arts, "cpu")
    (host,) = top.imports
    assert isinstance(host, LibraryModule)
    assert {"add_one", "scale"} <= set(host.function_names())
    assert run_all(top) == {
        "add_one": 42,
        "scale": 7.0,
        "double_it": 42,
        "triple_it": -9,
        "run": 2,
        "tree": ["test_metadata", [["library", [["test_json", []]]]]],
    }
    with pytest.raises(Exception, match="expected one int argument"):
        host["add_one"]("not an int")
    assert top.artifact_set is arts  # type: ignore[attr-defined]


@pytest.mark.cc
def test_linking_is_cached_by_content(
    test_loaders: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = loading.compile_shared
    calls: list[Any] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(loading, "compile_shared", counting)
    arts = sample_set(f"cache-{uuid.uuid4().hex}")
    assert load_artifacts(arts)["add_one"](1) == 2
    assert len(calls) == 1
    assert load_artifacts(ArtifactSet(list(arts)))["add_one"](2) == 3
    assert len(calls) == 1
    # Other flags are another library.
    flagged = ArtifactSet(
        [Artifact("c", "native", "lib0.c", arts.get("c", "lib0.c").content, {"cflags": "-DX"})]
    )
    assert load_artifacts(flagged)["add_one"](3) == 4
    assert len(calls) == 2


@pytest.mark.cc
def test_a_failing_native_build_names_the_command(test_loaders: Recorder) -> None:
    arts = ArtifactSet(
        [Artifact("c", "native", "broken.c", f"int x = ;/*{uuid.uuid4()}*/".encode())]
    )
    with pytest.raises(ToolchainError, match="broken.c"):
        load_artifacts(arts)


@pytest.mark.cc
def test_objects_and_headers_link_with_sources(tmp_path: Path) -> None:
    nonce = uuid.uuid4().hex
    src = tmp_path / "obj.c"
    src.write_text(
        "#include <ember/runtime_api.h>\n"
        "EMBER_DLL int32_t from_object(EmberValue* a, int32_t* t, int32_t n, EmberValue* r,\n"
        "                              int32_t* rt, void* h) {\n"
        "  (void)a; (void)t; (void)n; (void)h;\n"
        f"  r->v_int64 = 5; *rt = EMBER_INT; return 0; /*{nonce}*/\n"
        "}\n"
    )
    obj = compile_object(src, tmp_path / "obj.o", include_dirs=[include_dir()])
    header = b"#define SEVEN 7\n"
    source = (
        b'#include <ember/runtime_api.h>\n#include "consts.h"\n'
        b"EMBER_DLL int32_t from_header(EmberValue* a, int32_t* t, int32_t n, EmberValue* r,\n"
        b"                              int32_t* rt, void* h) {\n"
        b"  (void)a; (void)t; (void)n; (void)h; r->v_int64 = SEVEN; *rt = EMBER_INT; return 0;\n"
        b"}\n"
    )
    arts = ArtifactSet(
        [
            Artifact("c", "native", "consts.h", header),
            Artifact("c", "native", "main.c", source),
            Artifact("prebuilt", "native", "obj.o", obj.read_bytes()),
        ]
    )
    host = load_artifacts(arts)
    assert host["from_header"]() == 7
    assert host["from_object"]() == 5


def test_artifact_set_load_module_is_load_artifacts(rec: Recorder) -> None:
    rec.json_loader("test_json")
    host = ArtifactSet([json_artifact()]).load_module("cpu")
    assert host["double_it"](4) == 8
    assert [m.type_key for m in host.imports] == ["test_json"]


def test_loading_imports_no_compiler_layer() -> None:
    code = (
        "import sys, ember.runtime.loading, ember.runtime.export, ember.cli.main\n"
        "import ember.tools.inspectors.sources\n"
        "bad = [m for m in sys.modules if m.split('.')[:2] in "
        "(['ember', 'ir'], ['ember', 'tir'], ['ember', 'codegen'], ['ember', 'transform'], "
        "['ember', 'frontend'])]\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.cc
def test_a_saved_set_runs_its_native_code_only_when_trusted(
    test_loaders: Recorder, tmp_path: Path
) -> None:
    """Regression: loading a saved set compiled its C as written, so whoever could write the
    directory (and rehash its manifest) ran code in the loading process. A set read from disk
    now needs trust_native=True; one built in the process, or without native code, does not."""
    arts = sample_set("trust")
    root = arts.save(tmp_path / "set")
    assert ArtifactSet.load(root).saved_at == root and arts.saved_at is None
    refused = "saved artifact set with native code \\(c/lib0.c\\).*trust_native=True"
    with pytest.raises(ArtifactError, match=refused):
        load_artifacts(root)
    with pytest.raises(ArtifactError, match=refused):
        ArtifactSet.load(root).load_module("cpu")
    assert load_artifacts(root, trust_native=True)["add_one"](1) == 2
    assert ArtifactSet.load(root).load_module("cpu", trust_native=True)["add_one"](2) == 3
    assert load_artifacts(arts)["add_one"](3) == 4
    plain = ArtifactSet([json_artifact()]).save(tmp_path / "plain")
    assert load_artifacts(plain)["double_it"](2) == 4
