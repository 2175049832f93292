"""Packages: write (export + readable tree), load the library back, read the tree."""

from __future__ import annotations

import pytest
from test_artifact_samples import c_artifact

from ember.runtime.artifact_set import ArtifactSet
from ember.tools.package import load_package, package_artifacts, write_package


@pytest.mark.cc
def test_write_load_and_read_back(tmp_path) -> None:
    arts = ArtifactSet([c_artifact("tools-package")])
    path = write_package(arts, tmp_path / "m.tar", mod_name="net", target="c")
    assert package_artifacts(path) == arts
    module, meta = load_package(path, tmp_path)
    assert meta["mod_name"] == "net"
    assert "add_one" in module.function_names()
    again = write_package(arts, tmp_path / "again.tar", mod_name="net", target="c")
    assert again.read_bytes() == path.read_bytes()
