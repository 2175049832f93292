"""GraphExecutorModule: the graph executor engine as a runtime Module (TVM's C++ GraphExecutor).

Built from graph JSON, the host module holding the kernels, a device and parameters. It
owns a :class:`~ember.executor.graph_plan.GraphPlan` (storage, views, prebuilt calls) and
implements the model interface: ``set_input`` / ``get_input`` / ``run`` / ``get_output``,
input lookup by name or index, parameter loading and per-node profiling. As a Module it
exposes the same operations as packed functions by name (:data:`FUNCTIONS`), so
``mod["set_input"]("x", arr); mod["run"](); mod["get_output"](0)`` works as in TVM, and
it imports the host module (``lib``) that holds the kernels.

Conventions kept from TVM: inputs are the graph's ``arg_nodes`` (model inputs *and*
parameters) in order, so ``get_num_inputs`` counts both and an index refers to that order;
``get_input_info`` lists only the inputs that are not parameters; ``get_input_index`` of an
unknown name is -1; ``load_params`` ignores names the graph does not use; ``get_output``
returns a view of the executor's memory that the next ``run`` overwrites (pass ``out`` to
copy). Ember is stricter in two ways: ``set_input`` checks shape and dtype before any
memory is touched, and ``run`` refuses to start while an input has never been set.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import numpy as np

from ember.errors import EmberTypeError, EmberValueError, ExecutorError
from ember.executor.graph_plan import GraphPlan
from ember.executor.input_hint import mismatch_advice
from ember.executor.interface import hand_out, output_index, output_names, resolve_input
from ember.executor.locking import new_lock, synchronized
from ember.executor.profile import ProfileReport, make_report, node_sources
from ember.formats.graph_json import GraphJSON, OpAttrs, load_graph_json
from ember.formats.metadata import STORAGE_ALIGNMENT
from ember.formats.params import load_params as parse_params
from ember.runtime import ndarray
from ember.runtime.device import Device, cpu
from ember.runtime.device import device as to_device
from ember.runtime.module import Module
from ember.runtime.ndarray import NDArray
from ember.runtime.packed_func import PackedFunc, as_packed_func


def find_kernel(lib: Any, func_name: str) -> PackedFunc:
    """The kernel ``func_name`` from ``lib`` or its imports; LookupError when none has it.

    A native kernel resolves only to a function defined in a loaded library itself: never
    to libc's ``exit`` or the runtime's API (see :class:`~ember.runtime.LibraryModule`).
    """
    if not isinstance(func_name, str):
        raise LookupError(repr(func_name))
    try:
        func = lib.get_function(func_name, query_imports=True)
    except (AttributeError, LookupError):
        func = None
    if func is None:
        raise LookupError(func_name)
    return as_packed_func(func)


#: The packed functions a graph executor module exposes.
FUNCTIONS = (
    "get_graph_json",
    "get_input",
    "get_input_index",
    "get_input_info",
    "get_num_inputs",
    "get_num_outputs",
    "get_output",
    "get_output_index",
    "get_output_names",
    "debug_get_output",
    "load_params",
    "profile",
    "run",
    "set_input",
    "set_input_zero_copy",
)


class GraphExecutorModule(Module):
    """The graph executor engine: storage, inputs, outputs, run loop and profiling."""

    type_key = "GraphExecutor"

    def __init__(
        self,
        graph: str | bytes | GraphJSON,
        lib: Any,
        device: Device | Any = None,
        params: Mapping[str, Any] | bytes | None = None,
        debug: bool = False,
    ) -> None:
        super().__init__()
        self._exec_lock = new_lock()  # one run at a time (docs/executor.md)
        self.graph = graph if isinstance(graph, GraphJSON) else load_graph_json(graph)
        self.lib = lib
        self.device = to_device(device) if device is not None else cpu(0)
        self.debug = debug
        if self.graph.device_index is not None:
            others = sorted(set(self.graph.device_index) - {self.device.device_type})
            if others:
                raise ExecutorError(
                    f"the graph places entries on device type(s) {others} besides "
                    f"{self.device}; heterogeneous execution is not supported yet"
                )
        self.plan = GraphPlan(self.graph, lambda name: find_kernel(lib, name), self.device)
        g = self.graph
        self._input_names = g.input_names()
        self._input_index = {name: i for i, name in enumerate(self._input_names)}
        self._input_eids = [g.node_row_ptr[nid] for nid in g.arg_nodes]
        self._output_eids = g.output_entry_ids()
        self._output_names = output_names(g.output_names, len(self._output_eids))
        self._param_names: set[str] = set()
        self._shared: set[int] = set()  # parameter entries living in a factory's arrays
        self._unset: set[str] = set(self._input_names)
        self._timings = [0] * len(self.plan.calls)
        self._timed_runs = 0
        if isinstance(lib, Module):
            self.import_module(lib)
        if params is not None:
            self.load_params(params)

    # ------------------------------------------------------------------ Module
    def lock(self) -> threading.RLock:
        """The executor's lock: hold it (``with mod.lock():``) around set_input/run/get_output
        to make the sequence atomic when threads share this executor."""
        return self._exec_lock

    def _get_function(self, name: str) -> PackedFunc | None:
        if name not in FUNCTIONS:
            return None
        return as_packed_func(getattr(self, name))

    def function_names(self) -> list[str]:
        """The model-interface functions this module exposes."""
        return list(FUNCTIONS)

    def get_graph_json(self) -> str:
        """The graph JSON text this executor runs."""
        return self.graph.to_json()

    # ------------------------------------------------------------------ inputs
    def get_num_inputs(self) -> int:
        """Number of argument nodes (model inputs and parameters)."""
        return len(self._input_names)

    def get_input_index(self, name: str) -> int:
        """Index of the input called ``name``, or -1 if the graph has none (TVM's convention)."""
        return self._input_index.get(name, -1)

    def get_input_info(self) -> dict[str, dict[str, Any]]:
        """``{"shape": {name: shape}, "dtype": {name: dtype}}`` of inputs that are not params."""
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}
        for name, eid in zip(self._input_names, self._input_eids, strict=True):
            if name not in self._param_names:
                shapes[name] = self.graph.shape[eid]
                dtypes[name] = self.graph.dltype[eid]
        return {"shape": shapes, "dtype": dtypes}

    def _resolve_input(self, key: int | str, what: str) -> int:
        return resolve_input(key, self._input_names, self._input_index, what)

    @synchronized
    def set_input(self, key: int | str, value: Any) -> None:
        """Copy ``value`` (numpy array, NDArray, array-like) into input ``key`` after checks."""
        index = self._resolve_input(key, "set_input")
        name = self._input_names[index]
        eid = self._input_eids[index]
        self._own(eid)
        view = self.plan.arrays[eid]
        if type(value) is np.ndarray and value.shape == view.shape and value.dtype == view.dtype:
            np.copyto(view, value)  # the common case, checked in full above
            self._unset.discard(name)
            return
        target = self.plan.entries[eid]
        value = ndarray.array(value, dtype="string") if view.dtype.kind == "V" else value  # str
        given_dtype = getattr(value, "dtype", None)
        if isinstance(value, NDArray | np.ndarray | np.generic):
            source: Any = value
        else:
            try:
                source = np.asarray(value, dtype=view.dtype)
            except (TypeError, ValueError) as exc:
                raise EmberValueError(
                    f"set_input: cannot convert the value for input {name!r} to "
                    f"{self.graph.dltype[eid]}: {exc}"
                ) from None
            given_dtype = source.dtype
        self._check_value("set_input", name, eid, source, given_dtype)
        target.copyfrom(source)
        self._unset.discard(name)

    def _check_value(self, what: str, name: str, eid: int, value: Any, given_dtype: Any) -> None:
        """Shape and dtype of ``value`` must be the entry's exactly; the error names both."""
        shape, dtype = self.graph.shape[eid], self.graph.dltype[eid]
        given_shape = tuple(int(d) for d in getattr(value, "shape", ()))
        given = str(given_dtype) if given_dtype is not None else "?"
        if given_shape != shape or given != dtype:
            raise EmberValueError(
                f"{what}: input {name!r} expects shape {shape} and dtype {dtype}, got shape "
                f"{given_shape} and dtype {given}; "
                + mismatch_advice(name, shape, dtype, given_shape, given)
            )

    @synchronized
    def set_input_zero_copy(self, key: int | str, value: NDArray) -> None:
        """Let input ``key`` live in ``value`` itself (no copy; later writes to it are seen).

        ``value`` must be an NDArray on the executor's device, 64-byte aligned, of the
        input's exact shape and dtype, and the input must not share storage with another
        entry of the graph.
        """
        index = self._resolve_input(key, "set_input_zero_copy")
        name = self._input_names[index]
        eid = self._input_eids[index]
        if not isinstance(value, NDArray):
            raise EmberTypeError(
                f"set_input_zero_copy: input {name!r} needs an NDArray, got "
                f"{type(value).__name__}; use ember.nd.array(x) or set_input (which copies)"
            )
        self._check_value("set_input_zero_copy", name, eid, value, value.dtype)
        if value.device != self.device or value.data_ptr % STORAGE_ALIGNMENT:
            raise EmberValueError(
                f"set_input_zero_copy: input {name!r} needs a {STORAGE_ALIGNMENT}-byte aligned "
                f"array on {self.device}; got one at {value.data_ptr:#x} on {value.device} "
                "(ember.nd.empty/array allocate aligned memory)"
            )
        sid = self.graph.storage_id[eid]
        sharing = [e for e, s in enumerate(self.graph.storage_id) if s == sid and e != eid]
        if sharing:
            raise ExecutorError(
                f"set_input_zero_copy: input {name!r} shares storage {sid} with entries "
                f"{sharing[:8]} of the graph, so it cannot move; use set_input"
            )
        self._shared.discard(eid)
        self.plan.rebind(eid, value)
        self._unset.discard(name)

    @synchronized
    def get_input(self, key: int | str) -> NDArray:
        """The executor's array of input ``key`` (a view: writing it changes the input)."""
        index = self._resolve_input(key, "get_input")
        return self.plan.entries[self._input_eids[index]]

    @synchronized
    def share_params(self, params: Mapping[str, np.ndarray]) -> None:
        """Let parameters live in the caller's arrays (no copy) where they can, else copy.

        Shared arrays are only read by the kernels; a later ``set_input`` (or
        ``load_params``) of a shared parameter first gives the entry memory of its own, so
        the caller's array is never written.
        """
        for name in sorted(params):
            index = self._input_index.get(name)
            if index is None:
                continue
            value = np.asarray(params[name])
            eid = self._input_eids[index]
            sid = self.graph.storage_id[eid]
            alone = sum(1 for s in self.graph.storage_id if s == sid) == 1
            fits = (
                value.shape == self.graph.shape[eid] and str(value.dtype) == self.graph.dltype[eid]
            )
            aligned = value.flags.c_contiguous and value.ctypes.data % STORAGE_ALIGNMENT == 0
            if alone and fits and aligned and value.nbytes:
                self.plan.rebind(eid, ndarray.from_numpy_view(value, self.device))
                self._shared.add(eid)
                self._unset.discard(name)
            else:
                self.set_input(name, value)
            self._param_names.add(name)

    def _own(self, eid: int) -> None:
        """Give a shared parameter entry memory of its own before it is written."""
        if eid in self._shared:
            self._shared.discard(eid)
            shape, dtype = self.graph.shape[eid], self.graph.dltype[eid]
            self.plan.rebind(eid, ndarray.empty(shape, dtype, self.device))

    @synchronized
    def load_params(self, params: Mapping[str, Any] | bytes | bytearray) -> None:
        """Set parameters from a ``.params`` blob or a dict; unknown names are ignored."""
        values = parse_params(params) if isinstance(params, bytes | bytearray) else params
        for name in sorted(values):
            if name in self._input_index:
                self.set_input(name, values[name])
                self._param_names.add(name)

    # ------------------------------------------------------------------ outputs
    @property
    def run_site(self) -> int:
        """The site of this executor's governed runs (ember.runtime.threads.run_choice)."""
        return self.plan.run_site.site

    def get_num_outputs(self) -> int:
        """Number of graph outputs."""
        return len(self._output_eids)

    def get_output_names(self) -> list[str]:
        """The output names, in output order (the ONNX names for an imported model)."""
        return list(self._output_names)

    def get_output_index(self, name: str) -> int:
        """Index of output ``name``, or -1."""
        return self._output_names.index(name) if name in self._output_names else -1

    @synchronized
    def get_output(self, index: int | str, out: Any = None) -> Any:
        """Output ``index`` (or name) as a view of executor memory, or copied into ``out``."""
        k = output_index(index, len(self._output_eids), self._output_names)
        eid = self._output_eids[k]
        return hand_out(self.plan.entries[eid], self.plan.arrays[eid], k, out)

    # ------------------------------------------------------------------ running
    @synchronized
    def run(self) -> None:
        """Execute the graph once (in debug mode, also time every node)."""
        if self._unset:
            self._check_inputs_set("run")
        if self.debug:
            self._record(self.plan.run_timed())
        else:
            self.plan.run()

    @synchronized
    def debug_get_output(self, node: int | str, index: int = 0) -> NDArray:
        """Run the graph up to ``node`` (id or name) and return a copy of its output ``index``."""
        g = self.graph
        if isinstance(node, str):
            matches = [i for i, n in enumerate(g.nodes) if n.name == node]
            if not matches:
                raise ExecutorError(
                    f"debug_get_output: no node named {node!r}; nodes: "
                    f"{', '.join(n.name for n in g.nodes[:20])}"
                )
            nid = matches[0]
        elif isinstance(node, int | np.integer) and 0 <= node < len(g.nodes):
            nid = int(node)
        else:
            raise ExecutorError(f"debug_get_output: node {node!r} is not a node id or name")
        if not 0 <= index < g.nodes[nid].num_outputs:
            raise ExecutorError(
                f"debug_get_output: node {g.nodes[nid].name!r} has "
                f"{g.nodes[nid].num_outputs} output(s), not {index + 1}"
            )
        self._check_inputs_set("debug_get_output")
        self.plan.run_through(nid)
        return ndarray.array(self.plan.entries[g.node_row_ptr[nid] + index])

    def _check_inputs_set(self, what: str) -> None:
        if self._unset:
            raise ExecutorError(
                f"{what}: input(s) {sorted(self._unset)} were never set; call set_input (or "
                "load_params for parameters) first"
            )

    def _record(self, times: list[int]) -> None:
        for i, t in enumerate(times):
            self._timings[i] += t
        self._timed_runs += 1

    @synchronized
    def profile(self, repeat: int = 10, clock: str = "wall") -> ProfileReport:
        """Run ``repeat`` times timing each node by ``clock`` (``"wall"``, or ``"thread"``:
        this thread's CPU time, robust on a busy machine at one thread); ``repeat=0``
        reports the debug runs so far."""
        if repeat < 0:
            raise EmberValueError(f"profile: repeat must be >= 0, got {repeat}")
        if repeat == 0:
            if not self._timed_runs:
                raise ExecutorError(
                    "profile(repeat=0) reports the runs recorded in debug mode, but there are "
                    "none; create the executor with debug=True and call run(), or pass repeat>0"
                )
            totals, runs = list(self._timings), self._timed_runs
        else:
            self.run()  # warm-up, also checks the inputs
            totals, runs = [0] * len(self.plan.calls), repeat
            for _ in range(repeat):
                for i, t in enumerate(self.plan.run_timed(clock)):
                    totals[i] += t
        g = self.graph
        calls = self.plan.calls
        shapes = []
        dtypes = []
        for c in calls:
            first = g.node_row_ptr[c.node_id]
            count = g.nodes[c.node_id].num_outputs
            shapes.append(tuple(g.shape[first + k] for k in range(count)))
            dtypes.append(g.dltype[first])
        return make_report(
            [c.node_id for c in calls],
            [c.name for c in calls],
            [c.func_name for c in calls],
            shapes,
            dtypes,
            totals,
            runs,
            [node_sources(_extra(g.nodes[c.node_id].attrs)) for c in calls],
        )


def _extra(attrs: OpAttrs | None) -> tuple[tuple[str, str], ...]:
    return attrs.extra if attrs is not None else ()
