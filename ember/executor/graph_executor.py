"""GraphExecutor: the Python face of a graph executor module (TVM's ``graph_executor.GraphModule``).

Wraps any module exposing the graph-executor functions (``set_input``, ``run``,
``get_output``, ...), typically the one a factory returns::

    lib = ember.runtime.load_module("model.so")          # or load_artifacts(...)
    gmod = GraphExecutor(lib["default"](ember.cpu(0)))
    gmod.set_input("x", x)
    gmod.run()
    y = gmod.get_output(0).numpy()

or builds one from its parts: ``GraphExecutor(graph_json, lib, ember.cpu(0), params=...,
debug=True)`` (``create`` is the same). ``benchmark`` times ``run`` with the runtime's
time_evaluator; ``profile`` returns the per-node table of the debug executor.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ember.errors import EmberTypeError, ExecutorError
from ember.executor.graph_runtime import GraphExecutorModule
from ember.executor.profile import ProfileReport
from ember.formats.graph_json import GraphJSON
from ember.runtime.device import Device, cpu
from ember.runtime.module import Module
from ember.runtime.ndarray import NDArray
from ember.runtime.packed_func import as_packed_func
from ember.runtime.threads import run_choice
from ember.runtime.time_evaluator import BenchmarkResult, TimeEvaluator


class GraphExecutor:
    """Run a compiled graph: set inputs, run, read outputs, benchmark and profile."""

    def __init__(
        self,
        module: Module | str | bytes | GraphJSON,
        lib: Module | None = None,
        device: Device | None = None,
        params: Mapping[str, Any] | bytes | None = None,
        debug: bool = False,
    ) -> None:
        if isinstance(module, str | bytes | GraphJSON):
            if lib is None:
                raise EmberTypeError(
                    "GraphExecutor(graph_json, lib, device): the host module holding the "
                    "kernels is missing"
                )
            module = GraphExecutorModule(module, lib, device or cpu(0), params, debug)
        elif not isinstance(module, Module):
            raise EmberTypeError(
                f"GraphExecutor wraps a graph executor Module (e.g. factory['default'](dev)) "
                f"or takes (graph_json, lib, device); got {type(module).__name__}"
            )
        elif lib is not None or params is not None:
            raise EmberTypeError(
                "GraphExecutor(module) takes no lib or params; the module already has them"
            )
        if debug and isinstance(module, GraphExecutorModule):
            module.debug = True
        elif debug:
            raise ExecutorError(f"debug mode needs a GraphExecutorModule, got {module!r}")
        self.module = module
        # A GraphExecutorModule is called directly (no packed-call layer on the hot path);
        # any other module implementing the interface through its packed functions.
        source: Any = module if isinstance(module, GraphExecutorModule) else None
        names = (
            *("set_input", "run", "get_output", "get_input", "get_num_outputs"),
            *("get_num_inputs", "get_input_index", "get_input_info", "load_params"),
        )
        funcs = {n: getattr(source, n) if source is not None else module[n] for n in names}
        self._set_input = funcs["set_input"]
        self._run = funcs["run"]
        self._get_output = funcs["get_output"]
        self._get_input = funcs["get_input"]
        self._get_num_outputs = funcs["get_num_outputs"]
        self._get_num_inputs = funcs["get_num_inputs"]
        self._get_input_index = funcs["get_input_index"]
        self._get_input_info = funcs["get_input_info"]
        self._load_params = funcs["load_params"]

    def set_input(self, key: int | str | None = None, value: Any = None, **params: Any) -> None:
        """Set input ``key`` (name or index) to ``value`` and/or inputs given by keyword."""
        if key is not None:
            if value is None:
                raise ExecutorError(f"set_input: no value given for input {key!r}")
            self._set_input(key, value)
        for name in sorted(params):
            self._set_input(name, params[name])

    def set_input_zero_copy(self, key: int | str, value: NDArray) -> None:
        """Let input ``key`` use ``value``'s memory directly (no copy on later runs)."""
        self.module["set_input_zero_copy"](key, value)

    def run(self, **inputs: Any) -> None:
        """Set the keyword ``inputs`` (if any), then execute the graph once."""
        if inputs:
            self.set_input(**inputs)
        self._run()

    def get_input(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """Input ``index`` (name or position); copied into ``out`` when given."""
        arr: NDArray = self._get_input(index)
        return out.copyfrom(arr) if out is not None else arr

    def get_output(self, index: int | str, out: Any = None) -> Any:
        """Output ``index`` or name (a view overwritten by the next run), or copied into
        ``out``."""
        return self._get_output(index, out)

    def get_output_index(self, name: str) -> int:
        """Index of output ``name`` (its ONNX name for an imported model), or -1."""
        return int(self.module["get_output_index"](name))

    def get_output_names(self) -> list[str]:
        """The output names in output order (``output0``... when the model had none)."""
        return list(self.module["get_output_names"]())

    def get_num_inputs(self) -> int:
        """Number of argument nodes (inputs and parameters, as in TVM)."""
        return int(self._get_num_inputs())

    def get_num_outputs(self) -> int:
        """Number of outputs."""
        return int(self._get_num_outputs())

    def get_input_index(self, name: str) -> int:
        """Index of input ``name``, or -1."""
        return int(self._get_input_index(name))

    def get_input_info(self) -> dict[str, dict[str, Any]]:
        """``{"shape": {...}, "dtype": {...}}`` of the inputs that are not parameters."""
        info: dict[str, dict[str, Any]] = self._get_input_info()
        return info

    def load_params(self, params: bytes | bytearray | Mapping[str, Any]) -> None:
        """Load parameters from a ``.params`` blob (or a dict)."""
        self._load_params(params)

    def thread_choice(self, threads: int | None = None) -> dict[str, int] | None:
        """What the run governor chose for this executor's runs at ``threads`` threads
        (default: the current count): ``parallel`` (1: the thread pool, 0: the calling
        thread alone), ``runs``, ``changes`` and ``trying`` (ember.runtime.threads.run_choice).
        None before the first run at that count, or for a module run elsewhere (RPC)."""
        site = getattr(self.module, "run_site", 0)
        return run_choice(site, threads) if site else None

    def benchmark(
        self,
        device: Device,
        func_name: str = "run",
        repeat: int = 5,
        number: int = 5,
        min_repeat_ms: int = 0,
        end_to_end: bool = False,
        **kwargs: Any,
    ) -> BenchmarkResult:
        """Time ``func_name`` (or, with ``end_to_end``, inputs in + run + outputs out)."""
        if not end_to_end:
            if kwargs:
                self.set_input(**kwargs)
            evaluator = self.module.time_evaluator(
                func_name, device, number=number, repeat=repeat, min_repeat_ms=min_repeat_ms
            )
            return evaluator()
        info = self.get_input_info()["shape"]
        inputs = dict(kwargs) or {name: self.get_input(name).numpy() for name in info}
        n_out = self.get_num_outputs()

        def end_to_end_run() -> None:
            for name in sorted(inputs):
                self._set_input(name, inputs[name])
            self._run()
            for i in range(n_out):
                self._get_output(i).numpy()

        timer = TimeEvaluator(
            as_packed_func(end_to_end_run),
            device,
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
        )
        return timer()

    def profile(self, repeat: int = 10, clock: str = "wall") -> ProfileReport:
        """Per-node times over ``repeat`` runs (``repeat=0``: the debug runs so far), by
        ``clock``: ``"wall"`` or ``"thread"`` (the calling thread's CPU time: at one thread,
        other processes preempting it do not count)."""
        report: ProfileReport = self.module["profile"](repeat, clock)
        return report

    def debug_get_output(self, node: int | str, index: int = 0) -> NDArray:
        """Run up to ``node`` (id or name) and return a copy of its output ``index``."""
        out: NDArray = self.module["debug_get_output"](node, index)
        return out

    def __getitem__(self, name: str) -> Any:
        return self.module[name]

    def __repr__(self) -> str:
        return f"GraphExecutor({self.module!r})"


def create(
    graph_json: str | bytes | GraphJSON,
    lib: Module,
    device: Device | None = None,
    params: Mapping[str, Any] | bytes | None = None,
    debug: bool = False,
) -> GraphExecutor:
    """A GraphExecutor over a new graph executor module (TVM's ``graph_executor.create``)."""
    return GraphExecutor(graph_json, lib, device, params=params, debug=debug)
