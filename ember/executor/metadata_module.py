"""The top-level ``metadata`` module: a loaded model's factory (TVM's GraphExecutorFactory).

Step 4 of the loading process (:mod:`ember.runtime.loading`) hands the artifacts whose
loader is ``"metadata"`` and the host module to the global function
``runtime.module.loadbinary_metadata`` (:func:`load_metadata_module`). The artifacts are
three files of one codegen:

* ``graph.json``    - the graph (:mod:`ember.formats.graph_json`);
* ``params.bin``    - the parameters (:mod:`ember.formats.params`), optional;
* ``metadata.json`` - the model metadata (:mod:`ember.formats.metadata`): ``mod_name``,
  executor kind, inputs/outputs/params with shapes and dtypes, function infos.

Only ``metadata.json`` is always required; its ``executor`` kind picks the factory from
:data:`EXECUTOR_FACTORIES` (``"graph"`` built in, needing ``graph.json``; the AOT executor
registers ``"aot"``); other files are kept in ``MetadataModule.files`` for that factory.
The returned :class:`MetadataModule` imports the host module and exposes, as packed
functions: ``<mod_name>`` (``"default"``) taking a device and returning a new executor
module, ``get_graph_json``, ``get_params`` (name -> NDArray), ``list_params``,
``get_metadata`` (a :class:`~ember.formats.metadata.ModelMetadata`), ``get_lib``::

    mod = load_artifacts(artifact_set, ember.cpu(0))
    gmod = GraphExecutor(mod["default"](ember.cpu(0)))

:func:`make_metadata_artifacts` is the writing side: what a build emits for these files.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ember.errors import ExecutorError, ModuleLoadError, RegistryError, SerializationError
from ember.executor.graph_runtime import GraphExecutorModule
from ember.formats.dtypes import dtype_name
from ember.formats.graph_json import GraphJSON, load_graph_json
from ember.formats.metadata import ModelMetadata, ParameterInfo, graph_metadata
from ember.formats.params import load_params, save_params
from ember.runtime import ndarray
from ember.runtime.artifact import METADATA_LOADER, AnyArtifact, Artifact
from ember.runtime.device import Device, cpu
from ember.runtime.device import device as to_device
from ember.runtime.inspection import INSPECTORS, register_inspector
from ember.runtime.module import Module
from ember.runtime.packed_func import PackedFunc, as_packed_func
from ember.runtime.registry import find_python_func, register_func
from ember.support.registry import Registry

LOADER_FUNC = "runtime.module.loadbinary_metadata"
GRAPH_JSON_FILE = "graph.json"
PARAMS_FILE = "params.bin"
METADATA_FILE = "metadata.json"
CODEGEN_ID = "graph_executor"


#: Builds an executor module for a loaded model: ``factory(top, device, debug) -> Module``.
ExecutorFactory = Callable[["MetadataModule", Device, bool], Module]

#: Executor factories by ``metadata.json`` executor kind. ``"graph"`` is built in; the AOT
#: executor registers ``"aot"`` the same way::
#:
#:     register_executor_factory("aot", lambda top, dev, debug: AotExecutorModule(top, dev))
EXECUTOR_FACTORIES: Registry[ExecutorFactory] = Registry("executor kind")


def register_executor_factory(kind: str, factory: ExecutorFactory, override: bool = False) -> None:
    """Make models whose metadata names executor ``kind`` loadable through ``factory``."""
    EXECUTOR_FACTORIES.register(kind, factory, override=override)


class MetadataModule(Module):
    """The top-level module of a loaded model: its executor factory and its data."""

    type_key = "metadata"

    def __init__(
        self,
        metadata: ModelMetadata,
        params: Mapping[str, np.ndarray],
        host: Module,
        graph: GraphJSON | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        super().__init__()
        self.metadata = metadata
        self.params = dict(params)
        self.host = host
        self.graph = graph
        self.files = dict(files or {})
        self.import_module(host)
        self._funcs: dict[str, Any] = {
            metadata.mod_name: self.create_executor,
            "get_graph_json": self.get_graph_json,
            "get_params": self.get_params,
            "list_params": self.list_params,
            "get_metadata": self.get_metadata,
            "get_lib": self.get_lib,
        }

    def _get_function(self, name: str) -> PackedFunc | None:
        func = self._funcs.get(name)
        return as_packed_func(func) if func is not None else None

    def function_names(self) -> list[str]:
        """The factory function (named by ``mod_name``) and the getters."""
        return sorted(self._funcs)

    def create_executor(self, device: Device | Any = None, debug: bool = False) -> Module:
        """A new executor module on ``device`` (default: the CPU) with the parameters loaded."""
        dev = to_device(device) if device is not None else cpu(0)
        factory = EXECUTOR_FACTORIES.get(self.metadata.executor)
        return factory(self, dev, debug)

    def get_graph_json(self) -> str:
        """The graph JSON text (graph-executor models only)."""
        if self.graph is None:
            raise ExecutorError(
                f"model {self.metadata.mod_name!r} uses the {self.metadata.executor!r} "
                "executor and has no graph JSON"
            )
        return self.graph.to_json()

    def get_params(self) -> dict[str, ndarray.NDArray]:
        """The parameters as fresh NDArrays, by name."""
        return {name: ndarray.array(value) for name, value in sorted(self.params.items())}

    def list_params(self) -> list[str]:
        """The parameter names, sorted."""
        return sorted(self.params)

    def get_metadata(self) -> ModelMetadata:
        """The model metadata."""
        return self.metadata

    def get_lib(self) -> Module:
        """The host module holding the kernels."""
        return self.host

    def __repr__(self) -> str:
        return f"MetadataModule({self.metadata.mod_name!r}, executor={self.metadata.executor!r})"


def _graph_executor_factory(top: MetadataModule, device: Device, debug: bool) -> Module:
    """The built-in ``"graph"`` executor factory."""
    assert top.graph is not None  # load_metadata_module requires graph.json for "graph"
    module = GraphExecutorModule(top.graph, top.host, device, None, debug=debug)
    module.share_params(top.params)  # one copy of the weights however many executors
    return module


def _by_file(artifacts: Sequence[Artifact]) -> dict[str, Artifact]:
    found: dict[str, Artifact] = {}
    for art in artifacts:
        if art.file_name in found:
            raise ModuleLoadError(
                f"two metadata artifacts are named {art.file_name!r} (codegens "
                f"{found[art.file_name].codegen_id!r} and {art.codegen_id!r}); a model has one "
                f"of each of {GRAPH_JSON_FILE}, {PARAMS_FILE}, {METADATA_FILE}"
            )
        found[art.file_name] = art
    if METADATA_FILE not in found:
        raise ModuleLoadError(
            f"the metadata artifacts lack {METADATA_FILE!r} (have: {sorted(found)}); rebuild "
            "the model so that its artifact set is complete"
        )
    return found


def _check_consistent(
    graph: GraphJSON | None, params: Mapping[str, np.ndarray], md: ModelMetadata
) -> None:
    """Metadata, graph and params must describe the same model."""
    missing = sorted(p.name for p in md.params if p.name not in params)
    if missing:
        raise ModuleLoadError(f"params.bin lacks the parameter(s) {missing} metadata.json lists")
    for info in md.params:
        value = np.asarray(params[info.name])
        shape, dtype = tuple(value.shape), _dtype_name(value.dtype)
        if shape != info.shape or dtype != info.dtype:
            raise ModuleLoadError(
                f"parameter {info.name!r}: metadata.json says {info.shape} {info.dtype}, "
                f"params.bin holds {shape} {dtype}; the files do not describe the same model "
                "(rebuild it)"
            )
    if graph is None:
        return
    args = {graph.nodes[n].name: graph.node_row_ptr[n] for n in graph.arg_nodes}
    declared: list[ParameterInfo] = [*md.inputs, *md.params]
    for info in declared:
        eid = args.get(info.name)
        if eid is None:
            raise ModuleLoadError(
                f"metadata.json names input {info.name!r}, which graph.json does not have; "
                f"graph inputs: {sorted(args)}"
            )
        if graph.shape[eid] != info.shape or graph.dltype[eid] != info.dtype:
            raise ModuleLoadError(
                f"input {info.name!r}: metadata.json says {info.shape} {info.dtype}, graph.json "
                f"says {graph.shape[eid]} {graph.dltype[eid]}"
            )
    if len(md.outputs) != len(graph.heads):
        raise ModuleLoadError(
            f"metadata.json lists {len(md.outputs)} outputs, graph.json has {len(graph.heads)}"
        )


def _dtype_name(dtype: np.dtype) -> str:
    try:
        return dtype_name(dtype)
    except SerializationError:
        return str(dtype)


def load_metadata_module(
    artifacts: Sequence[Artifact], host: Module, params: Mapping[str, np.ndarray] | None = None
) -> MetadataModule:
    """``runtime.module.loadbinary_metadata``: the metadata artifacts + host -> top module.

    ``params`` are parameters read elsewhere (a package keeps them beside the library, read
    straight into aligned arrays); they replace a ``params.bin`` artifact."""
    files = _by_file(list(artifacts))
    try:
        metadata = ModelMetadata.from_json(files[METADATA_FILE].content)
    except SerializationError as exc:
        raise ModuleLoadError(f"cannot load the model's {METADATA_FILE}: {exc}") from exc
    if metadata.executor not in EXECUTOR_FACTORIES:
        raise ModuleLoadError(
            f"{METADATA_FILE} asks for the {metadata.executor!r} executor, which is not "
            f"registered; known: {', '.join(EXECUTOR_FACTORIES.names())}. Import the package "
            "that provides it (register_executor_factory)"
        )
    if metadata.executor == "graph" and GRAPH_JSON_FILE not in files:
        raise ModuleLoadError(
            f"the metadata artifacts lack {GRAPH_JSON_FILE!r} (have: {sorted(files)}), which "
            "the graph executor needs; rebuild the model so that its artifact set is complete"
        )
    try:
        graph = (
            load_graph_json(files[GRAPH_JSON_FILE].content) if GRAPH_JSON_FILE in files else None
        )
        if params is None:
            params = load_params(files[PARAMS_FILE].content) if PARAMS_FILE in files else {}
    except SerializationError as exc:
        raise ModuleLoadError(f"cannot load the model's metadata artifacts: {exc}") from exc
    _check_consistent(graph, params, metadata)
    contents = {name: art.content for name, art in files.items()}
    return MetadataModule(metadata, params, host, graph, contents)


def make_metadata_artifacts(
    graph: GraphJSON | str,
    params: Mapping[str, Any],
    mod_name: str = "default",
    codegen_id: str = CODEGEN_ID,
) -> list[Artifact]:
    """The three ``metadata`` artifacts of a graph-executor build (graph, params, metadata)."""
    g = graph if isinstance(graph, GraphJSON) else load_graph_json(graph)
    arrays = {
        name: np.asarray(v.numpy() if hasattr(v, "numpy") else v) for name, v in params.items()
    }
    metadata = graph_metadata(g, arrays, mod_name)
    return [
        Artifact(codegen_id, METADATA_LOADER, GRAPH_JSON_FILE, g.to_json().encode()),
        Artifact(codegen_id, METADATA_LOADER, PARAMS_FILE, save_params(arrays)),
        Artifact(codegen_id, METADATA_LOADER, METADATA_FILE, metadata.to_json().encode()),
    ]


def show_params(art: AnyArtifact) -> str:
    """Inspector for ``params.bin``: one line per parameter (name, shape, dtype, bytes)."""
    if not isinstance(art, Artifact):
        return f"{art.file_name}: in-memory artifact\n"
    try:
        params = load_params(art.content)
    except SerializationError as exc:
        return f"{art.file_name}: unreadable params blob: {exc}\n"
    rows = [("name", "shape", "dtype", "bytes")]
    rows += [(n, str(list(a.shape)), str(a.dtype), str(a.nbytes)) for n, a in params.items()]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    total = sum(a.nbytes for a in params.values())
    return "\n".join([*lines, f"{len(params)} parameter(s), {total} bytes"]) + "\n"


def register() -> None:
    """Register the metadata loader, the "graph" executor factory and the params inspector.

    Each goes through its public registration call; calling this again does nothing.
    """
    # another thread may win a race; one registration is enough
    if find_python_func(LOADER_FUNC) is None:
        with contextlib.suppress(RegistryError):
            register_func(LOADER_FUNC, load_metadata_module)
    if "graph" not in EXECUTOR_FACTORIES:
        with contextlib.suppress(RegistryError):
            register_executor_factory("graph", _graph_executor_factory)
    if INSPECTORS.find(f"{CODEGEN_ID}:.bin") is None:
        with contextlib.suppress(RegistryError):
            register_inspector(CODEGEN_ID, ".bin", show_params)
