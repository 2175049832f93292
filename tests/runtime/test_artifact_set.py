"""ArtifactSet: order, lookup, equality, content hash, save/load as a verified directory tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ember.errors import ArtifactError, SerializationError
from ember.runtime.artifact import Artifact, InMemoryArtifact
from ember.runtime.artifact_set import (
    ARTIFACT_SET_FORMAT_VERSION,
    MANIFEST_NAME,
    ArtifactSet,
)


def sample() -> ArtifactSet:
    return ArtifactSet(
        [
            Artifact("c", "native", "lib0.c", b"int a;\n", {"format": "c"}),
            Artifact("ext", "json_loader", "graph.json", b'{"x": 1}', {"format": "json"}),
            Artifact("c", "native", "sub/lib1.c", b"int b;\n"),
            Artifact("exec", "metadata", "meta.json", b"{}"),
        ]
    )


def in_memory() -> InMemoryArtifact:
    return InMemoryArtifact(
        "llvmjit",
        "lib0.jit",
        lambda: None,
        "an LLVM JIT handle",
        "target 'llvm'",  # type: ignore[arg-type,return-value]
    )


def test_order_len_lookup() -> None:
    arts = sample()
    assert len(arts) == 4
    assert [a.file_name for a in arts] == ["lib0.c", "graph.json", "sub/lib1.c", "meta.json"]
    assert arts.get("ext", "graph.json").loader == "json_loader"
    assert ("c", "lib0.c") in arts
    with pytest.raises(ArtifactError, match="known .*c/lib0.c"):
        arts.get("c", "missing.c")


def test_duplicate_names_are_refused() -> None:
    art = Artifact("c", "native", "lib0.c", b"")
    with pytest.raises(ArtifactError, match="duplicate artifact c/lib0.c"):
        ArtifactSet([art, Artifact("c", "other", "lib0.c", b"x")])
    # The same file name under another codegen is fine.
    assert len(ArtifactSet([art, Artifact("d", "native", "lib0.c", b"")])) == 2


def test_non_artifacts_are_refused() -> None:
    with pytest.raises(ArtifactError, match="holds Artifact"):
        ArtifactSet([b"bytes"])  # type: ignore[list-item]


def test_grouping() -> None:
    arts = sample()
    assert list(arts.by_loader()) == ["json_loader", "metadata", "native"]
    assert [a.file_name for a in arts.native()] == ["lib0.c", "sub/lib1.c"]
    assert [a.file_name for a in arts.non_native()] == ["graph.json", "meta.json"]
    assert arts.has_metadata()


def test_equality_and_content_hash() -> None:
    assert sample() == sample()
    assert sample().content_hash() == sample().content_hash()
    changed = ArtifactSet([*list(sample())[:3], Artifact("exec", "metadata", "meta.json", b"[]")])
    assert changed != sample()
    assert changed.content_hash() != sample().content_hash()
    assert hash(sample()) == hash(sample())


def test_save_load_round_trip_and_layout(tmp_path: Path) -> None:
    root = sample().save(tmp_path / "out")
    assert (root / "c" / "lib0.c").read_bytes() == b"int a;\n"
    assert (root / "c" / "sub" / "lib1.c").read_bytes() == b"int b;\n"
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert manifest["version"] == ARTIFACT_SET_FORMAT_VERSION
    assert manifest["artifacts"][1]["sha256"] == sample().get("ext", "graph.json").sha256
    loaded = ArtifactSet.load(root)
    assert loaded == sample()
    assert [a.key for a in loaded] == [a.key for a in sample()]


def test_save_is_byte_identical(tmp_path: Path) -> None:
    a = sample().save(tmp_path / "a")
    b = sample().save(tmp_path / "b")
    files_a = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*"))
    for rel in files_a:
        if (a / rel).is_file():
            assert (a / rel).read_bytes() == (b / rel).read_bytes()


def test_save_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "junk").write_text("x")
    with pytest.raises(ArtifactError, match="not an empty directory"):
        sample().save(tmp_path)


def test_save_refuses_in_memory_artifacts(tmp_path: Path) -> None:
    arts = ArtifactSet([*sample(), in_memory()])
    with pytest.raises(ArtifactError, match=r"llvmjit/lib0.jit.*target 'llvm'"):
        arts.save(tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(ArtifactError, match="in memory"):
        arts.content_hash()


def test_load_refuses_a_modified_file(tmp_path: Path) -> None:
    root = sample().save(tmp_path / "out")
    (root / "ext" / "graph.json").write_bytes(b'{"x": 2}')
    with pytest.raises(ArtifactError, match=r"graph.json does not match"):
        ArtifactSet.load(root)


def test_load_refuses_a_bad_manifest(tmp_path: Path) -> None:
    root = sample().save(tmp_path / "out")
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest["version"] = ARTIFACT_SET_FORMAT_VERSION + 1
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(SerializationError, match="format version"):
        ArtifactSet.load(root)
    manifest["version"] = ARTIFACT_SET_FORMAT_VERSION
    manifest["artifacts"][0]["size"] = "7"
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(SerializationError, match=r"artifacts\[0\].size"):
        ArtifactSet.load(root)
    (root / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(SerializationError, match="not valid JSON"):
        ArtifactSet.load(root)


def test_load_refuses_path_escapes_in_the_manifest(tmp_path: Path) -> None:
    root = sample().save(tmp_path / "out")
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest["artifacts"][0]["file_name"] = "../../etc/passwd"
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="invalid artifact file name"):
        ArtifactSet.load(root)


def test_load_refuses_a_file_name_no_file_system_takes(tmp_path: Path) -> None:
    # regression: a 300-character name reached Path.is_file, an OSError (ENAMETOOLONG)
    root = sample().save(tmp_path / "out")
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    manifest["artifacts"][0]["file_name"] = "x" * 300
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="a component has 300 characters, at most 255"):
        ArtifactSet.load(root)


def test_load_without_manifest(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="manifest.json is missing"):
        ArtifactSet.load(tmp_path)


def test_inspect_table() -> None:
    table = sample().inspect()
    lines = table.splitlines()
    assert lines[0].split() == ["codegen", "loader", "file", "size", "sha256"]
    assert len(lines) == 5
    assert "graph.json" in lines[2] and sample().get("ext", "graph.json").sha256[:12] in lines[2]
