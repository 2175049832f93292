"""Artifact and InMemoryArtifact: validation, immutability, equality, the export refusal."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from ember.errors import ArtifactError
from ember.runtime.artifact import Artifact, InMemoryArtifact, file_suffix


def make(**kw: object) -> Artifact:
    fields: dict[str, object] = {
        "codegen_id": "c",
        "loader": "native",
        "file_name": "lib0.c",
        "content": b"int x;\n",
    }
    fields.update(kw)
    return Artifact(**fields)  # type: ignore[arg-type]


def test_fields_hash_and_key() -> None:
    art = make(metadata={"target": "c", "format": "c"})
    assert art.key == ("c", "lib0.c")
    assert art.sha256 == hashlib.sha256(b"int x;\n").hexdigest()
    assert list(art.metadata) == ["format", "target"]
    assert art.describe()["size"] == 7
    assert art.exportable


def test_immutable() -> None:
    art = make(metadata={"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        art.content = b"other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        art.metadata["a"] = 2  # type: ignore[index]


def test_equality_and_hash() -> None:
    assert make() == make(content=bytearray(b"int x;\n"))
    assert hash(make()) == hash(make())
    assert make() != make(content=b"int y;\n")
    assert make() != make(metadata={"k": "v"})
    assert make() != make(loader="other")


@pytest.mark.parametrize(
    "name",
    ["../x.c", "/abs/x.c", "a\\b.c", "", "a//b.c", "./x.c", "a/../b.c", "sp ace.c", "a/"],
)
def test_unsafe_file_names_are_refused(name: str) -> None:
    with pytest.raises(ArtifactError, match="file name"):
        make(file_name=name)


def test_nested_file_name_is_allowed() -> None:
    assert make(file_name="kernels/conv2d.c").file_name == "kernels/conv2d.c"


@pytest.mark.parametrize("field", ["codegen_id", "loader"])
@pytest.mark.parametrize("value", ["", "a/b", "..", "-x", 3])
def test_bad_identifiers(field: str, value: object) -> None:
    with pytest.raises(ArtifactError, match=field):
        make(**{field: value})


def test_in_memory_loader_name_is_reserved() -> None:
    with pytest.raises(ArtifactError, match="reserved"):
        make(loader="in_memory")


@pytest.mark.parametrize(
    "metadata, match",
    [
        ({"k": [1, 2]}, "values must be"),
        ({"k": float("nan")}, "finite"),
        ({"k": "x" * 5000}, "characters long"),
        ({i: 1 for i in range(65)}, "entries"),
        ({3: "v"}, "key"),
        ([("k", "v")], "mapping"),
    ],
)
def test_bad_metadata(metadata: object, match: str) -> None:
    with pytest.raises(ArtifactError, match=match):
        make(metadata=metadata)


def test_content_must_be_bytes() -> None:
    with pytest.raises(ArtifactError, match="encode"):
        make(content="text")


def test_file_suffix() -> None:
    assert file_suffix("a/b.tar.gz") == ".gz"
    assert file_suffix("lib0.c") == ".c"
    assert file_suffix("Makefile") == ""
    assert file_suffix("dir.d/.hidden") == ""


def test_in_memory_artifact() -> None:
    art = InMemoryArtifact(
        "llvmjit",
        "lib0.jit",
        lambda: None,
        "an LLVM JIT handle",
        "target 'llvm'",  # type: ignore[arg-type,return-value]
    )
    assert art.loader == "in_memory"
    assert not art.exportable
    assert art.metadata["description"] == "an LLVM JIT handle"
    err = art.not_exportable_error("export")
    assert "llvmjit/lib0.jit" in str(err)
    assert "target 'llvm'" in str(err)


def test_in_memory_artifact_needs_a_callable() -> None:
    with pytest.raises(ArtifactError, match="callable"):
        InMemoryArtifact("py", "f", "not callable", "x")  # type: ignore[arg-type]


def test_registered_object_and_json_round_trip() -> None:
    from ember.runtime.object import type_key_of
    from ember.runtime.object_json import load_json, save_json

    art = make(metadata={"format": "c", "n": 2, "ok": True})
    assert type_key_of(Artifact) == "ember.runtime.Artifact"
    assert art.type_key == "ember.runtime.Artifact"
    back = load_json(save_json(art))
    assert back == art
    assert back.sha256 == art.sha256
