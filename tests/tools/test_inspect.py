"""Inspectors: per (codegen, suffix) with fallbacks; text, JSON, libraries, objects, sources."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_artifact_samples import C_SOURCE, c_artifact, sample_set

from ember.errors import ArtifactError, RegistryError, SerializationError
from ember.runtime.artifact import Artifact, InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.elf import ElfFile
from ember.runtime.export import export_library
from ember.support.toolchain import compile_object
from ember.tools.inspectors import (
    INSPECTORS,
    artifact_table,
    find_inspector,
    inspect_artifact,
    register_inspector,
)
from ember.tools.inspectors.builtin import hex_dump, show_default
from ember.tools.inspectors.sources import (
    ArtifactSource,
    read_artifact_source,
    register_artifact_source,
    select_artifact,
)


def test_c_source_is_shown_as_is() -> None:
    assert inspect_artifact(c_artifact()) == C_SOURCE.decode()


def test_json_is_pretty_printed() -> None:
    art = Artifact("ext", "j", "a.json", b'{"b": [1, 2], "a": {"c": null}}')
    assert (
        inspect_artifact(art)
        == '{\n  "b": [\n    1,\n    2\n  ],\n  "a": {\n    "c": null\n  }\n}\n'
    )


def test_invalid_json_falls_back_to_text() -> None:
    out = inspect_artifact(Artifact("ext", "j", "a.json", b"{oops"))
    assert out.startswith("(not valid JSON") and "{oops" in out


def test_binary_default_is_a_hex_dump() -> None:
    data = bytes(range(256)) + bytes(44)
    out = inspect_artifact(Artifact("x", "y", "data.bin", data))
    assert out.startswith("00000000  00 01 02")
    assert "44 more bytes, 300 in total" in out
    assert hex_dump(b"AB") == "00000000  41 42" + " " * 44 + "|AB|\n"


def test_in_memory_artifact_is_described() -> None:
    art = InMemoryArtifact("py", "f.py", lambda: None, "a Python callable")  # type: ignore[arg-type,return-value]
    assert "a Python callable" in inspect_artifact(art)
    assert "(in memory)" in artifact_table([art])


def test_lookup_order_and_registration() -> None:
    art = Artifact("mycg", "y", "k.bin", b"\x00\x01")
    assert find_inspector(art) is show_default
    register_inspector("*", ".bin", lambda a: "any-bin\n")
    try:
        assert inspect_artifact(art) == "any-bin\n"
        register_inspector("mycg", ".bin", lambda a: "mycg-bin\n")
        assert inspect_artifact(art) == "mycg-bin\n"
        assert inspect_artifact(Artifact("other", "y", "k.bin", b"")) == "any-bin\n"
        with pytest.raises(RegistryError, match="already registered"):
            register_inspector("mycg", ".bin", lambda a: "")
    finally:
        INSPECTORS.unregister("*:.bin")
        INSPECTORS.unregister("mycg:.bin")


def test_codegen_fallback() -> None:
    register_inspector("mycg2", "*", lambda a: f"mycg2 {a.file_name}\n")
    try:
        assert inspect_artifact(Artifact("mycg2", "y", "k.weird", b"")) == "mycg2 k.weird\n"
        # A suffix match for any codegen wins over the codegen's catch-all.
        assert inspect_artifact(Artifact("mycg2", "y", "k.c", b"int a;")) == "int a;\n"
    finally:
        INSPECTORS.unregister("mycg2:*")


def test_table_columns() -> None:
    table = artifact_table(sample_set())
    lines = table.splitlines()
    assert lines[0].split() == ["codegen", "loader", "file", "size", "sha256"]
    assert lines[1].split()[:3] == ["c", "native", "lib0.c"]
    assert lines[1].split()[4] == c_artifact().sha256[:12]


@pytest.mark.cc
def test_library_lists_exported_functions(tmp_path: Path) -> None:
    lib = export_library(sample_set(), tmp_path / "lib.so")
    art = Artifact("library", "native", "lib.so", lib.read_bytes())
    out = inspect_artifact(art)
    assert "  add_one\n" in out and "  scale\n" in out
    assert "__ember_dev_mblob" not in out  # a data symbol, not a function


@pytest.mark.cc
@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump not installed")
def test_object_is_disassembled(tmp_path: Path) -> None:
    src = tmp_path / "k.c"
    src.write_text("int twice(int x) { return 2 * x; }\n")
    obj = compile_object(src, tmp_path / "k.o", openmp=False)
    out = inspect_artifact(Artifact("c", "native", "k.o", obj.read_bytes()))
    assert out.startswith("disassembly of c/k.o")
    assert "<twice>:" in out
    assert str(tmp_path) not in out


def test_elf_reader_refuses_garbage() -> None:
    with pytest.raises(SerializationError, match="not an ELF"):
        ElfFile(b"hello", "x")
    bad = bytearray(b"\x7fELF" + b"\x02\x01" + b"\0" * 58)
    bad[0x28:0x30] = (1 << 40).to_bytes(8, "little")  # section headers beyond the file
    bad[0x3A:0x3E] = (64).to_bytes(2, "little") + (3).to_bytes(2, "little")
    with pytest.raises(SerializationError, match="outside the file"):
        ElfFile(bytes(bad), "x")


def test_sources_directory(tmp_path: Path) -> None:
    root = sample_set().save(tmp_path / "out")
    source = read_artifact_source(root)
    assert source.kind == "saved artifact set"
    assert list(source.artifacts) == list(sample_set())
    assert select_artifact(source, "funcs.json").codegen_id == "ext"
    assert select_artifact(source, "c/lib0.c") == c_artifact()
    with pytest.raises(ArtifactError, match="no artifact named 'nope'; known: c/lib0.c"):
        select_artifact(source, "nope")


def test_select_ambiguous_name() -> None:
    arts = (Artifact("a", "x", "f.c", b""), Artifact("b", "x", "f.c", b""))
    with pytest.raises(ArtifactError, match="names 2 artifacts"):
        select_artifact(ArtifactSource("test", arts), "f.c")


@pytest.mark.cc
def test_sources_library(tmp_path: Path) -> None:
    lib = export_library(sample_set(), tmp_path / "model lib.so")
    source = read_artifact_source(lib)
    assert source.kind == "shared library with 1 embedded artifacts"
    assert [a.key for a in source.artifacts] == [
        ("library", "model_lib.so"),
        ("ext", "funcs.json"),
    ]


def test_sources_unknown_kind(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(ArtifactError, match="not one of the known kinds"):
        read_artifact_source(tmp_path / "notes.txt")
    with pytest.raises(ArtifactError, match="no such file"):
        read_artifact_source(tmp_path / "missing")


def test_register_artifact_source(tmp_path: Path) -> None:
    def read_txt(path: Path) -> ArtifactSource | None:
        if path.suffix != ".txt":
            return None
        return ArtifactSource("text file", (Artifact("txt", "x", "t.txt", path.read_bytes()),))

    register_artifact_source("txt_test", read_txt)
    try:
        (tmp_path / "n.txt").write_text("hello")
        assert read_artifact_source(tmp_path / "n.txt").kind == "text file"
    finally:
        from ember.tools.inspectors.sources import ARTIFACT_SOURCES

        ARTIFACT_SOURCES.unregister("txt_test")


def test_set_inspect_matches_table() -> None:
    arts = ArtifactSet(sample_set())
    assert arts.inspect() == artifact_table(arts)
