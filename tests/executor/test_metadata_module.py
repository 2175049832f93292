"""The metadata module: artifacts -> load_artifacts / export_library -> factory -> executor."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from executor_kernels import KERNELS_C, three_node_graph

import ember.executor  # noqa: F401  (registers the metadata loader)
from ember.errors import ExecutorError, ModuleLoadError
from ember.executor import GraphExecutor, MetadataModule, load_metadata_module
from ember.executor.metadata_module import LOADER_FUNC, make_metadata_artifacts
from ember.formats.metadata import ModelMetadata
from ember.formats.params import save_params
from ember.runtime import PythonModule, cpu, get_global_func, load_module
from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.export import export_library
from ember.runtime.loading import load_artifacts

W = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def artifact_set() -> ArtifactSet:
    native = Artifact("c", "native", "kernels.c", KERNELS_C.encode())
    return ArtifactSet([native, *make_metadata_artifacts(three_node_graph(), {"w": W})])


def check_model(top: object) -> None:
    assert isinstance(top, MetadataModule)
    gmod = GraphExecutor(top["default"](cpu(0)))
    x = np.array([[1, -1, 2], [-3, 4, 0.5]], np.float32)
    gmod.run(x=x)
    np.testing.assert_allclose(gmod.get_output(0).numpy(), np.maximum(np.maximum(x, 0) + W, 0))
    assert gmod.get_input_info() == {"shape": {"x": (2, 3)}, "dtype": {"x": "float32"}}


def test_loader_is_registered_globally() -> None:
    assert get_global_func(LOADER_FUNC) is not None


def test_artifacts_are_deterministic_and_complete() -> None:
    a = make_metadata_artifacts(three_node_graph(), {"w": W})
    b = make_metadata_artifacts(three_node_graph().to_json(), {"w": W.copy()})
    assert [x.file_name for x in a] == ["graph.json", "params.bin", "metadata.json"]
    assert all(x.loader == "metadata" for x in a)
    assert a == b
    md = json.loads(a[2].content)
    assert md["mod_name"] == "default" and md["executor"] == "graph"
    assert [p["name"] for p in md["inputs"]] == ["x"]
    assert [p["name"] for p in md["params"]] == ["w"]


def test_getters() -> None:
    top = load_metadata_module(
        make_metadata_artifacts(three_node_graph(), {"w": W}), PythonModule({})
    )
    assert top["list_params"]() == ["w"]
    np.testing.assert_array_equal(top["get_params"]()["w"].numpy(), W)
    assert json.loads(top["get_graph_json"]())["heads"] == [[4, 0, 0]]
    md = top["get_metadata"]()
    assert isinstance(md, ModelMetadata) and md.functions[0].constant_size_bytes == 24
    assert top.function_names() == sorted(
        ["default", "get_graph_json", "get_lib", "get_metadata", "get_params", "list_params"]
    )


def test_custom_mod_name() -> None:
    arts = make_metadata_artifacts(three_node_graph(), {"w": W}, mod_name="net")
    top = load_metadata_module(arts, PythonModule({}))
    assert "net" in top.function_names() and "default" not in top.function_names()


@pytest.mark.cc
def test_load_artifacts_end_to_end() -> None:
    check_model(load_artifacts(artifact_set(), cpu(0)))


@pytest.mark.cc
def test_export_library_and_load_module(tmp_path: Path) -> None:
    path = export_library(artifact_set(), tmp_path / "model.so")
    check_model(load_module(str(path)))


def replace(arts: list[Artifact], file_name: str, content: bytes) -> list[Artifact]:
    return [
        Artifact(a.codegen_id, a.loader, a.file_name, content) if a.file_name == file_name else a
        for a in arts
    ]


def test_refusals() -> None:
    host = PythonModule({})
    arts = make_metadata_artifacts(three_node_graph(), {"w": W})
    with pytest.raises(ModuleLoadError, match="lack 'graph.json'.*graph executor needs"):
        load_metadata_module(arts[1:], host)
    with pytest.raises(ModuleLoadError, match="lack 'metadata.json'"):
        load_metadata_module(arts[:2], host)
    with pytest.raises(ModuleLoadError, match="two metadata artifacts"):
        load_metadata_module([*arts, Artifact("other", "metadata", "graph.json", b"")], host)
    with pytest.raises(ModuleLoadError, match="not valid JSON"):
        load_metadata_module(replace(arts, "graph.json", b"{"), host)
    with pytest.raises(ModuleLoadError, match="list magic"):
        load_metadata_module(replace(arts, "params.bin", b"\0" * 32), host)
    md = json.loads(arts[2].content)
    md["executor"] = "aot"  # registered, but this host has no run function
    top = load_metadata_module(replace(arts, "metadata.json", json.dumps(md).encode()), host)
    with pytest.raises(ModuleLoadError, match="no run function 'default_run_model'"):
        top.create_executor(cpu(0))
    md = json.loads(arts[2].content)
    md["inputs"][0]["shape"] = [3, 2]
    with pytest.raises(ModuleLoadError, match="metadata.json says"):
        load_metadata_module(replace(arts, "metadata.json", json.dumps(md).encode()), host)
    with pytest.raises(ModuleLoadError, match="lacks the parameter"):
        load_metadata_module(replace(arts, "params.bin", save_params({})), host)


@pytest.mark.parametrize(
    "value", [np.zeros((3, 2), np.float32), np.zeros((2, 3), np.int8), np.array(["a"] * 6)]
)
def test_refuses_params_unlike_the_metadata(value: np.ndarray) -> None:
    # regression: an AOT executor copied a string parameter into its float32 array
    # (a ValueError from numpy) when metadata.json and graph.json both said float32
    host = PythonModule({})
    arts = make_metadata_artifacts(three_node_graph(), {"w": W})
    bad = replace(arts, "params.bin", save_params({"w": value.reshape(value.shape)}))
    with pytest.raises(
        ModuleLoadError, match=r"parameter 'w': metadata.json says \(2, 3\) float32"
    ):
        load_metadata_module(bad, host)


def test_params_inspector() -> None:
    from ember.tools.inspectors import inspect_artifact

    arts = make_metadata_artifacts(three_node_graph(), {"w": W})
    text = inspect_artifact(arts[1])
    assert "w" in text and "[2, 3]" in text and "float32" in text and "24 bytes" in text
    bad = Artifact("graph_executor", "metadata", "params.bin", b"junk")
    assert "unreadable params blob" in inspect_artifact(bad)


def test_other_executor_kinds_plug_in_through_the_factory_registry() -> None:
    from ember.executor.metadata_module import EXECUTOR_FACTORIES, register_executor_factory

    arts = make_metadata_artifacts(three_node_graph(), {"w": W})
    md = json.loads(arts[2].content)
    md["executor"] = "aot"
    extra = Artifact("graph_executor", "metadata", "run_model.bin", b"code")
    aot_arts = [arts[1], Artifact("g", "metadata", "metadata.json", json.dumps(md).encode()), extra]
    seen = []

    def factory(top: MetadataModule, dev: object, debug: bool) -> PythonModule:
        seen.append((top.files["run_model.bin"], dev, debug))
        return PythonModule({"run": lambda: None})

    previous = EXECUTOR_FACTORIES.find("aot")  # the real AOT executor may be registered
    register_executor_factory("aot", factory, override=True)
    try:
        top = load_metadata_module(aot_arts, PythonModule({}))
        assert top.graph is None and top["list_params"]() == ["w"]
        assert "run" in top["default"](cpu(0)).function_names()
        assert seen == [(b"code", cpu(0), False)]
        with pytest.raises(ExecutorError, match="no graph JSON"):
            top["get_graph_json"]()
    finally:
        if previous is None:
            EXECUTOR_FACTORIES.unregister("aot")
        else:
            register_executor_factory("aot", previous, override=True)
