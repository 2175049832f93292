"""The AOT executor: a model's run is one native call into its generated run function.

A build with ``executor="aot"`` holds the kernels, the run function (every intermediate at
a fixed offset of one static workspace, see ``ember.lowering.aot``) and these metadata
artifacts: ``metadata.json`` (executor ``aot``; its one function names the run symbol and
carries the workspace size), ``params.bin``, ``graph.json`` (the same graph with the AOT
kernel names, used only for per-operator profiles) and ``memory_map.json``. Loading goes
through the ordinary process; ``factory["default"](dev)`` returns an
:class:`AotExecutorModule`, and :class:`AotExecutor` is its Python face, with the graph
executor's interface::

    factory = ember.load_artifacts(ember.build(mod, "c", params, executor="aot"), dev)
    aot = AotExecutor(factory["default"](dev))
    aot.set_input("x", x)
    aot.run()                       # one call: ember_default_run_model(x, y, constants, ws)
    y = aot.get_output(0).numpy()

The executor owns one array per input, output and constant and its workspace (64-byte
aligned); ``run`` passes them to the run function, which checks every argument and
reports a kernel's failure as an FFI error carrying the kernel's message.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import json
import threading
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from typing import Any

import numpy as np

from ember.errors import (
    EmberTypeError,
    EmberValueError,
    ExecutorError,
    ModuleLoadError,
    SerializationError,
)
from ember.executor.graph_executor import GraphExecutor
from ember.executor.graph_plan import prepare_call
from ember.executor.graph_runtime import GraphExecutorModule, find_kernel
from ember.executor.input_hint import mismatch_advice
from ember.executor.interface import hand_out, output_index, resolve_input
from ember.executor.locking import new_lock, synchronized
from ember.executor.metadata_module import (
    EXECUTOR_FACTORIES,
    METADATA_FILE,
    MetadataModule,
    make_metadata_artifacts,
    register_executor_factory,
)
from ember.executor.profile import ProfileReport
from ember.formats.dtypes import numpy_dtype
from ember.formats.graph_json import GraphJSON
from ember.formats.memory_map import MEMORY_MAP_FILE, MemoryMap
from ember.formats.metadata import (
    STORAGE_ALIGNMENT,
    FunctionInfo,
    ModelMetadata,
    ParameterInfo,
    graph_metadata,
)
from ember.formats.params import load_params as parse_params
from ember.runtime import c_api, ndarray
from ember.runtime.artifact import METADATA_LOADER, AnyArtifact, Artifact
from ember.runtime.device import Device
from ember.runtime.inspection import INSPECTORS, inspector_key, register_inspector
from ember.runtime.module import Module
from ember.runtime.ndarray import NDArray
from ember.runtime.packed_func import PackedFunc, as_packed_func
from ember.runtime.strings import StringArena
from ember.runtime.threads import governed_address

CODEGEN_ID = "aot_executor"

FUNCTIONS = (
    "get_input",
    "get_input_index",
    "get_input_info",
    "get_num_inputs",
    "get_num_outputs",
    "get_output",
    "get_output_index",
    "get_output_names",
    "load_params",
    "profile",
    "run",
    "set_input",
    "set_input_zero_copy",
)


def aot_metadata(
    graph: GraphJSON,
    params: Mapping[str, Any],
    mod_name: str,
    workspace_size: int,
    run_symbol: str,
    operators: tuple[FunctionInfo, ...] = (),
    interface_api: str = "packed",
) -> ModelMetadata:
    """The unified metadata of an AOT build: the run function first, then the operators."""
    arrays = {name: np.asarray(v) for name, v in params.items()}
    md = graph_metadata(graph, arrays, mod_name)
    run = dataclasses.replace(
        md.functions[0], function_name=run_symbol, workspace_size_bytes=workspace_size
    )
    return dataclasses.replace(
        md, executor="aot", functions=(run, *operators), interface_api=interface_api
    )


def make_aot_metadata_artifacts(
    md: ModelMetadata, graph: GraphJSON, params: Mapping[str, Any], memory_map: str
) -> list[Artifact]:
    """The metadata artifacts of an AOT build (graph, params, metadata, memory map)."""
    out = []
    for art in make_metadata_artifacts(graph, params, md.mod_name, codegen_id=CODEGEN_ID):
        if art.file_name == METADATA_FILE:
            art = Artifact(CODEGEN_ID, METADATA_LOADER, METADATA_FILE, md.to_json().encode())
        out.append(art)
    out.append(Artifact(CODEGEN_ID, METADATA_LOADER, MEMORY_MAP_FILE, memory_map.encode()))
    return out


class AotExecutorModule(Module):
    """Inputs, outputs and constants of one AOT-compiled model, and its run function."""

    type_key = "AotExecutor"

    def __init__(self, top: MetadataModule, device: Device) -> None:
        super().__init__()
        self._exec_lock = new_lock()  # one run at a time (docs/executor.md)
        self.top = top
        self.device = device
        md = top.metadata
        self.metadata = md
        if not md.functions:
            raise ModuleLoadError(
                "metadata.json of this AOT build lists no functions; the first one names the "
                "run function and its workspace size. The file is corrupt: rebuild the model "
                "with executor='aot'"
            )
        self.run_info = md.functions[0]
        try:
            self._run_fn: PackedFunc = find_kernel(top.host, self.run_info.function_name)
        except LookupError:
            raise ModuleLoadError(
                f"the model's library has no run function '{self.run_info.function_name}' "
                "that metadata.json names; rebuild the model with executor='aot'"
            ) from None
        self._infos: list[ParameterInfo] = [*md.inputs, *md.params]
        self._names = [p.name for p in self._infos]
        self._index = {name: i for i, name in enumerate(self._names)}
        self._param_names = {p.name for p in md.params}
        self._arrays = [ndarray.empty(p.shape, p.dtype, device) for p in self._infos]
        self._outputs = [ndarray.empty(p.shape, p.dtype, device) for p in md.outputs]
        self._output_names = tuple(p.name for p in md.outputs)
        self._unset = {p.name for p in md.inputs}
        # set_input's fast path: a numpy array of exactly this shape and numpy dtype (None
        # where the numpy dtype's name is not the input's, e.g. strings) is copied with no
        # conversion; the checks it skips (str(dtype) alone took 2 us) made set_input 4.1 us,
        # the fast path 1.4 (dense_autoencoder, 1 thread, thread CPU time, load 8.6)
        self._fast = [self._fast_entry(k) for k in range(len(self._infos))]
        self._args = [*self._arrays[: len(md.inputs)], *self._outputs]
        self._args += self._arrays[len(md.inputs) :]
        size = max(self.run_info.workspace_size_bytes, 1)
        self.workspace = ndarray.empty((size,), "uint8", device)
        self._args.append(self.workspace)
        self._profiler: GraphExecutorModule | None = None
        strings = any(p.dtype == "string" for p in [*self._infos, *md.outputs])
        self._arena = StringArena() if strings else None  # kernel-made strings, per run
        self.import_module(top.host)
        self._shared: set[int] = set()  # constants living in the factory's arrays
        self._call: tuple[Callable[..., int], tuple[Any, ...], tuple[Any, ...]] | None = None
        # the run's call when nothing is left to check (set by the first checked run; inputs
        # are never unset again); the lock's bound methods, cheaper than a with statement
        self._ready: Callable[[], int] | None = None
        self._acquire, self._release = self._exec_lock.acquire, self._exec_lock.release
        for p in md.params:
            self._share(self._index[p.name], np.asarray(top.params[p.name]))
        self._prepare()

    def _prepare(self) -> None:
        """Build the run function's packed arguments once (again after an array moved), so
        a run is one ctypes call with nothing converted."""
        self._call = prepare_call(self._run_fn, self._args, accelerated=True, governed=True)
        # the governed runs' site (threads.run_choice): the EmberGovernedCall kept alive
        self.run_site = ctypes.addressof(self._call[2][0]) if self._call is not None else 0
        self._ready = None

    def native_call(self) -> tuple[int, tuple[int, ...], tuple[Any, ...]] | None:
        """A governed run's C address (EmberBackendGovernedCall over the run function: the
        run governor decides whether the run uses the thread pool, as for :meth:`run`), its
        six packed-call arguments as integers (values, codes, count, return value, return
        code, resource) and the objects that must stay alive while they are used: what a C
        caller passes, e.g. to time a run from C with no Python (benchmarks/native_timer.py).
        None without a C entry. Valid until an input or constant moves to another array
        (set_input_zero_copy)."""
        entry = self._run_fn.c_entry()
        prepared = prepare_call(self._run_fn, self._args, governed=True)
        if entry is None or prepared is None:
            return None
        fn, args, keep = prepared
        ints = tuple(0 if a is None else int(a.value or 0) for a in args)
        return governed_address(), ints, (fn, *args, *keep)

    def lock(self) -> threading.RLock:
        """The executor's lock: hold it (``with mod.lock():``) around set_input/run/get_output
        to make the sequence atomic when threads share this executor."""
        return self._exec_lock

    def _get_function(self, name: str) -> PackedFunc | None:
        return as_packed_func(getattr(self, name)) if name in FUNCTIONS else None

    def function_names(self) -> list[str]:
        """The model-interface functions this module exposes."""
        return list(FUNCTIONS)

    # ------------------------------------------------------------------ inputs
    def get_num_inputs(self) -> int:
        """Number of inputs and constants (TVM's convention, as the graph executor)."""
        return len(self._names)

    def get_input_index(self, name: str) -> int:
        """Index of input ``name``, or -1."""
        return self._index.get(name, -1)

    def get_input_info(self) -> dict[str, dict[str, Any]]:
        """``{"shape": {...}, "dtype": {...}}`` of the inputs that are not constants."""
        inputs = self.metadata.inputs
        return {
            "shape": {p.name: p.shape for p in inputs},
            "dtype": {p.name: p.dtype for p in inputs},
        }

    def _resolve(self, key: int | str, what: str) -> int:
        return resolve_input(key, self._names, self._index, what)

    @synchronized
    def set_input(self, key: int | str, value: Any) -> None:
        """Copy ``value`` into input ``key`` after checking its shape and dtype exactly."""
        index = self._resolve(key, "set_input")
        fast = self._fast[index]
        if (
            fast is not None
            and type(value) is np.ndarray
            and value.shape == fast[0]
            and value.dtype == fast[1]
            and index not in self._shared
        ):
            np.copyto(fast[2], value)
            self._unset.discard(self._names[index])
            return
        info = self._infos[index]
        if info.dtype == "string":  # str objects -> records + blob (docs/strings.md)
            value = ndarray.array(value, dtype="string")
        if not isinstance(value, NDArray | np.ndarray | np.generic):
            try:
                value = np.asarray(value, dtype=numpy_dtype(info.dtype))
            except (TypeError, ValueError) as exc:
                raise EmberValueError(
                    f"set_input: cannot convert the value for input {info.name!r} to "
                    f"{info.dtype}: {exc}"
                ) from None
        shape = tuple(int(d) for d in getattr(value, "shape", ()))
        dtype = str(getattr(value, "dtype", "?"))
        if shape != info.shape or dtype != info.dtype:
            raise EmberValueError(
                f"set_input: input {info.name!r} expects shape {info.shape} and dtype "
                f"{info.dtype}, got shape {shape} and dtype {dtype}; "
                + mismatch_advice(info.name, info.shape, info.dtype, shape, dtype)
            )
        if index in self._shared:  # copy on write: the factory's array is never written
            self._shared.discard(index)
            self._rebind(index, ndarray.empty(info.shape, info.dtype, self.device))
        self._arrays[index].copyfrom(value)
        self._unset.discard(info.name)

    def _fast_entry(self, index: int) -> tuple[tuple[int, ...], np.dtype[Any], np.ndarray] | None:
        """(shape, numpy dtype, numpy view of the array) of input ``index`` for set_input's
        fast path; None where the numpy dtype's name is not the input's (strings)."""
        info = self._infos[index]
        if info.dtype == "string":
            return None
        dt = np.dtype(numpy_dtype(info.dtype))
        view = np.asarray(self._arrays[index], copy=False)
        return (info.shape, dt, view) if str(dt) == info.dtype else None

    def _share(self, index: int, value: np.ndarray) -> None:
        """Run on the factory's array itself when it fits (no copy), else copy it."""
        info = self._infos[index]
        fits = value.shape == info.shape and str(value.dtype) == info.dtype
        if fits and value.flags.c_contiguous and value.ctypes.data % STORAGE_ALIGNMENT == 0:
            self._rebind(index, ndarray.from_numpy_view(value, self.device))
            self._shared.add(index)
        else:
            self._arrays[index].copyfrom(np.ascontiguousarray(value))

    def _rebind(self, index: int, array: NDArray) -> None:
        old = self._arrays[index]
        self._arrays[index] = array
        self._fast[index] = self._fast_entry(index)
        self._args = [array if a is old else a for a in self._args]
        if self._call is not None:
            self._prepare()

    @synchronized
    def set_input_zero_copy(self, key: int | str, value: NDArray) -> None:
        """Let input ``key`` live in ``value`` itself (no copy; later writes to it are seen
        by the next run): an NDArray on the executor's device, 64-byte aligned, of the
        input's exact shape and dtype. The run function only reads its inputs."""
        index = self._resolve(key, "set_input_zero_copy")
        info = self._infos[index]
        if index >= len(self.metadata.inputs):
            raise EmberValueError(
                f"set_input_zero_copy: {info.name!r} is a constant; use set_input or load_params"
            )
        if not isinstance(value, NDArray):
            raise EmberTypeError(
                f"set_input_zero_copy: input {info.name!r} needs an NDArray, got "
                f"{type(value).__name__}; use ember.nd.array(x) or set_input (which copies)"
            )
        if value.shape != info.shape or value.dtype != info.dtype:
            raise EmberValueError(
                f"set_input_zero_copy: input {info.name!r} expects shape {info.shape} and dtype "
                f"{info.dtype}, got shape {value.shape} and dtype {value.dtype}; "
                + mismatch_advice(info.name, info.shape, info.dtype, value.shape, value.dtype)
            )
        if value.device != self.device or value.data_ptr % STORAGE_ALIGNMENT:
            raise EmberValueError(
                f"set_input_zero_copy: input {info.name!r} needs a {STORAGE_ALIGNMENT}-byte "
                f"aligned array on {self.device}; got one at {value.data_ptr:#x} on "
                f"{value.device} (ember.nd.empty/array allocate aligned memory)"
            )
        self._shared.discard(index)
        self._rebind(index, value)
        self._unset.discard(info.name)

    @synchronized
    def get_input(self, key: int | str) -> NDArray:
        """The executor's array of input ``key`` (a view: writing it changes the input)."""
        return self._arrays[self._resolve(key, "get_input")]

    @synchronized
    def load_params(self, params: Mapping[str, Any] | bytes | bytearray) -> None:
        """Set constants from a ``.params`` blob or a dict; unknown names are ignored."""
        values = parse_params(params) if isinstance(params, bytes | bytearray) else params
        for name in sorted(values):
            if name in self._index:
                self.set_input(name, values[name])

    # ------------------------------------------------------------------ outputs, run
    def get_num_outputs(self) -> int:
        """Number of outputs."""
        return len(self._outputs)

    def get_output_names(self) -> list[str]:
        """The output names, in output order (the ONNX names for an imported model)."""
        return list(self._output_names)

    def get_output_index(self, name: str) -> int:
        """Index of output ``name``, or -1."""
        names = self._output_names
        return names.index(name) if name in names else -1

    @synchronized
    def get_output(self, index: int | str, out: Any = None) -> Any:
        """Output ``index`` (or name) as a view of executor memory, or copied into ``out``."""
        k = output_index(index, len(self._outputs), self._output_names)
        array = self._outputs[k]
        if out is None:  # the view itself: no numpy copy made only to be dropped
            return array
        view = array.numpy() if array.dtype == "string" else np.asarray(array, copy=False)
        return hand_out(array, view, k, out)

    def run(self) -> None:
        """One call of the run function over the inputs, outputs and constants."""
        # once checked, a run is the lock and one call, without the decorator's frame or a
        # with statement: 0.1 us over the prepared call alone (with statement: 0.2 more);
        # dense_autoencoder and ds_cnn_kws, 1 thread, thread CPU time, load 3
        self._acquire()
        try:
            ready = self._ready
            if ready is None:
                self._run_checked()
            elif ready():
                c_api.check_call(-1)
        finally:
            self._release()

    def _run_checked(self) -> None:
        if self._unset:
            raise ExecutorError(
                f"run: input(s) {sorted(self._unset)} were never set; call set_input first"
            )
        call = self._call
        if call is not None and self._arena is None:  # nothing to check on the next runs
            self._ready = functools.partial(call[0], *call[1]) if call[1] else call[0]
        with self._arena.run() if self._arena is not None else nullcontext():
            if self._call is None:  # a run function without a C entry
                self._run_fn(*self._args)
                return
            fn, args, _ = self._call
            if fn(*args):
                c_api.check_call(-1)  # the original exception when a Python function failed

    @synchronized
    def profile(self, repeat: int = 10, clock: str = "wall") -> ProfileReport:
        """Per-operator times: the same kernels run one by one by a graph executor over the
        model's graph (its own memory, allocated on the first profile); ``clock`` as for
        the graph executor's profile."""
        if self._profiler is None:
            if self.top.graph is None:
                raise ExecutorError("profile: this AOT build has no graph.json to profile with")
            self._profiler = GraphExecutorModule(
                self.top.graph, self.top.host, self.device, dict(self.top.params)
            )
        for p in self.metadata.inputs:
            self._profiler.set_input(p.name, self._arrays[self._index[p.name]])
        return self._profiler.profile(repeat, clock)

    def __repr__(self) -> str:
        return f"AotExecutorModule({self.metadata.mod_name!r}, {self.run_info.function_name})"


class AotExecutor(GraphExecutor):
    """The Python face of an AOT executor module (the graph executor's interface)."""

    def __init__(self, module: Module) -> None:
        if not isinstance(module, Module) or "run" not in module.function_names():
            raise EmberTypeError(
                "AotExecutor wraps the module factory['default'](dev) returns for an AOT "
                f"build; got {type(module).__name__}"
            )
        super().__init__(module)
        if isinstance(module, AotExecutorModule):  # no packed-call layer on the hot path
            self._set_input, self._run = module.set_input, module.run
            self._get_output = module.get_output

    def set_input_zero_copy(self, key: int | str, value: NDArray) -> None:
        """Let input ``key`` use ``value``'s memory directly (no copy on later runs)."""
        if isinstance(self.module, AotExecutorModule):
            self.module.set_input_zero_copy(key, value)
        else:
            super().set_input_zero_copy(key, value)

    def __repr__(self) -> str:
        return f"AotExecutor({self.module!r})"


def _aot_factory(top: MetadataModule, device: Device, debug: bool) -> Module:
    if debug:
        raise ExecutorError("the AOT executor has no debug mode; use profile() for node times")
    return AotExecutorModule(top, device)


def show_aot_json(art: AnyArtifact) -> str:
    """Inspector for the AOT metadata files: the memory map as a table, others as JSON."""
    if not isinstance(art, Artifact):
        return f"{art.file_name}: in-memory artifact\n"
    try:
        if art.file_name == MEMORY_MAP_FILE:
            return MemoryMap.from_json(art.content).table()
        return json.dumps(json.loads(art.content), indent=1, sort_keys=True) + "\n"
    except (SerializationError, ValueError) as exc:
        return f"{art.file_name}: unreadable: {exc}\n"


def register() -> None:
    """Register the ``"aot"`` executor factory and the AOT files' inspector (once)."""
    if "aot" not in EXECUTOR_FACTORIES:
        register_executor_factory("aot", _aot_factory)
    if inspector_key(CODEGEN_ID, ".json") not in INSPECTORS:
        register_inspector(CODEGEN_ID, ".json", show_aot_json)
