"""The package layout as a pure serialiser: bytes in, the same bytes out, every refusal."""

from __future__ import annotations

import json

import pytest

from ember.errors import SerializationError
from ember.formats.package import (
    LIBRARY_NAME,
    PACKAGE_JSON,
    artifact_files,
    read_package,
    write_package_files,
)
from ember.support.tarball import read_tar, write_tar

TREE = {"manifest.json": b"{}\n", "c/lib0.c": b"int x;\n"}


def test_round_trip(tmp_path) -> None:
    path = write_package_files(tmp_path / "m.tar", b"\x7fELF...", TREE, mod_name="net", target="c")
    meta, files = read_package(path)
    assert meta["mod_name"] == "net" and meta["target"] == "c"
    assert files[LIBRARY_NAME] == b"\x7fELF..."
    assert artifact_files(files) == TREE


def test_output_is_deterministic(tmp_path) -> None:
    a = write_package_files(tmp_path / "a.tar", b"lib", TREE)
    b = write_package_files(tmp_path / "b.tar", b"lib", dict(reversed(list(TREE.items()))))
    assert a.read_bytes() == b.read_bytes()


def test_refusals(tmp_path) -> None:
    with pytest.raises(SerializationError, match="not an ember package"):
        read_package(write_tar(tmp_path / "x.tar", {"a.txt": b"a"}))
    meta = {"format": "ember-package", "version": 99, "library": LIBRARY_NAME}
    bad = write_tar(tmp_path / "v.tar", {PACKAGE_JSON: json.dumps(meta).encode()})
    with pytest.raises(SerializationError, match="format version 99"):
        read_package(bad)
    files = read_tar(write_package_files(tmp_path / "ok.tar", b"lib", TREE))
    del files[LIBRARY_NAME]
    with pytest.raises(SerializationError, match=f"has no {LIBRARY_NAME}"):
        read_package(write_tar(tmp_path / "nolib.tar", files))
