"""Late-bound runtime operations: ArtifactSet and Module call what export/loading register."""

from __future__ import annotations

import pytest

from ember.errors import RegistryError
from ember.runtime import export, loading
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.hooks import (
    EXPORT_LIBRARY,
    LOAD_ARTIFACTS,
    RUNTIME_HOOKS,
    call_hook,
    register_hook,
)
from ember.runtime.module import PythonModule


def test_export_and_loading_register_their_hooks() -> None:
    assert RUNTIME_HOOKS.get(EXPORT_LIBRARY) is export.export_library
    assert RUNTIME_HOOKS.get(LOAD_ARTIFACTS) is loading.load_artifacts


def test_methods_delegate_to_the_registered_hooks(tmp_path) -> None:
    calls = []

    def fake_export(source, path):
        calls.append(("export", source, path))
        return path

    def fake_load(artifact_set, device, trust_native=False):
        calls.append(("load", artifact_set, device))
        return PythonModule({})

    arts = ArtifactSet([])
    mod = PythonModule({})
    register_hook(EXPORT_LIBRARY, fake_export, override=True)
    register_hook(LOAD_ARTIFACTS, fake_load, override=True)
    try:
        assert arts.export_library(tmp_path / "a.so") == tmp_path / "a.so"
        assert mod.export_library(tmp_path / "b.so") == tmp_path / "b.so"
        assert isinstance(arts.load_module("cpu"), PythonModule)
    finally:
        register_hook(EXPORT_LIBRARY, export.export_library, override=True)
        register_hook(LOAD_ARTIFACTS, loading.load_artifacts, override=True)
    assert [c[0] for c in calls] == ["export", "export", "load"]
    assert calls[1][1] is mod and calls[2][2] == "cpu"


def test_a_missing_hook_names_the_known_ones() -> None:
    with pytest.raises(RegistryError, match="unknown runtime hook 'nope'.*export_library"):
        call_hook("nope")
    with pytest.raises(RegistryError, match="already registered"):
        register_hook(EXPORT_LIBRARY, export.export_library)
