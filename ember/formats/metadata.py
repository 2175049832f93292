"""Model metadata (``metadata.json``): what a compiled model takes, returns and needs in memory.

One source of truth for every executor (design doc 001, "unified metadata"): the graph
executor reads the input/output names and types from it, the AOT executor will also read
the ``FunctionInfo`` of its run function, and the Model Library Format stores it verbatim.

::

    {"version": 1, "mod_name": "default", "executor": "graph", "interface_api": "packed",
     "inputs":  [{"name": "x", "tir_name": "x", "shape": [1, 4], "dtype": "float32"}],
     "outputs": [{"name": "output0", "tir_name": "output0", "shape": [1, 4], ...}],
     "params":  [{"name": "p0", ...}],
     "functions": [{"function_name": "default_run_model", "num_inputs": 1, "num_outputs": 1,
                    "params": [...inputs then outputs...], "workspace_size_bytes": 64,
                    "io_size_bytes": 32, "constant_size_bytes": 16}]}

Written deterministically (sorted keys); read with validation (``SerializationError``), and
a file of a newer ``version`` is refused with a message saying which version is supported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.errors import SerializationError
from ember.formats.dtypes import check_dtype, dtype_name, numpy_dtype
from ember.formats.graph_json import MAX_TENSOR_BYTES, GraphJSON
from ember.formats.graph_memory import plan_graph_memory

METADATA_FORMAT_VERSION = 1
EXECUTORS = ("aot", "graph")
INTERFACE_APIS = ("c", "packed")
MAX_METADATA_BYTES = 64 << 20
MAX_ITEMS = 1 << 20
STORAGE_ALIGNMENT = 64
#: the largest DLPack device type a parameter may name (graph JSON's device_index bound)
MAX_DEVICE_TYPE = 1 << 16


def _fail(where: str, what: str) -> SerializationError:
    return SerializationError(f"metadata JSON {where}: {what}")


def _get(obj: Any, key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if not isinstance(obj, dict):
        raise _fail(where, f"expected an object, got {type(obj).__name__}")
    if key not in obj:
        raise _fail(where, f"missing key {key!r}")
    value = obj[key]
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise _fail(f"{where}.{key}", f"expected {kind}, got {value!r}")
    return value


def _count(obj: Any, key: str, where: str) -> int:
    value: int = _get(obj, key, int, where)
    if not 0 <= value <= 1 << 48:
        raise _fail(f"{where}.{key}", f"{value} is out of range")
    return value


@dataclass(frozen=True)
class ParameterInfo:
    """One argument of a model or function: model name, compiled name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    tir_name: str = ""
    device_type: int = 1

    @property
    def nbytes(self) -> int:
        """Bytes the tensor occupies."""
        return int(np.prod(self.shape, dtype=np.int64)) * numpy_dtype(self.dtype).itemsize

    def to_json(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "name": self.name,
            "tir_name": self.tir_name or self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "device_type": self.device_type,
        }

    @staticmethod
    def from_json(obj: Any, where: str) -> ParameterInfo:
        """Read and validate one parameter object."""
        name = _get(obj, "name", str, where)
        shape = _get(obj, "shape", list, where)
        if len(shape) > 32 or any(isinstance(d, bool) or not isinstance(d, int) for d in shape):
            raise _fail(f"{where}.shape", f"expected up to 32 integers, got {shape!r}")
        if any(d < 0 for d in shape):
            raise _fail(f"{where}.shape", f"negative dimension in {shape}")
        dtype = check_dtype(_get(obj, "dtype", str, where), f"metadata JSON {where}.dtype")
        nbytes = math.prod(shape) * numpy_dtype(dtype).itemsize  # Python ints: no overflow
        if nbytes > MAX_TENSOR_BYTES:
            raise _fail(
                f"{where}.shape",
                f"{shape} of {dtype} needs {nbytes} bytes; the bound is {MAX_TENSOR_BYTES} "
                "(1 TiB); the file is corrupt: rebuild the model",
            )
        tir_name = obj.get("tir_name", name)
        device_type = obj.get("device_type", 1)
        if not isinstance(tir_name, str):
            raise _fail(f"{where}.tir_name", f"expected a string, got {tir_name!r}")
        if (
            isinstance(device_type, bool)
            or not isinstance(device_type, int)
            or not 0 <= device_type <= MAX_DEVICE_TYPE
        ):
            raise _fail(
                f"{where}.device_type",
                f"expected an integer in [0, {MAX_DEVICE_TYPE}] (1 is the CPU), got "
                f"{device_type!r}; the file is corrupt: rebuild the model",
            )
        return ParameterInfo(name, tuple(shape), dtype, tir_name, device_type)


@dataclass(frozen=True)
class FunctionInfo:
    """A compiled entry function: its arguments (inputs then outputs) and memory sizes."""

    function_name: str
    params: tuple[ParameterInfo, ...]
    num_inputs: int
    num_outputs: int
    workspace_size_bytes: int = 0
    io_size_bytes: int = 0
    constant_size_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "function_name": self.function_name,
            "params": [p.to_json() for p in self.params],
            "num_inputs": self.num_inputs,
            "num_outputs": self.num_outputs,
            "workspace_size_bytes": self.workspace_size_bytes,
            "io_size_bytes": self.io_size_bytes,
            "constant_size_bytes": self.constant_size_bytes,
        }

    @staticmethod
    def from_json(obj: Any, where: str) -> FunctionInfo:
        """Read and validate one function object."""
        raw = _get(obj, "params", list, where)
        params = tuple(
            ParameterInfo.from_json(p, f"{where}.params[{i}]") for i, p in enumerate(raw)
        )
        info = FunctionInfo(
            _get(obj, "function_name", str, where),
            params,
            _count(obj, "num_inputs", where),
            _count(obj, "num_outputs", where),
            _count(obj, "workspace_size_bytes", where),
            _count(obj, "io_size_bytes", where),
            _count(obj, "constant_size_bytes", where),
        )
        if info.num_inputs + info.num_outputs != len(params):
            raise _fail(where, f"num_inputs + num_outputs != {len(params)} params")
        return info


@dataclass(frozen=True)
class ModelMetadata:
    """Everything an executor needs to know about a compiled model besides its code."""

    mod_name: str
    executor: str
    inputs: tuple[ParameterInfo, ...]
    outputs: tuple[ParameterInfo, ...]
    params: tuple[ParameterInfo, ...] = ()
    functions: tuple[FunctionInfo, ...] = ()
    interface_api: str = "packed"
    version: int = METADATA_FORMAT_VERSION

    def to_json_obj(self) -> dict[str, Any]:
        """The JSON object."""
        return {
            "version": self.version,
            "mod_name": self.mod_name,
            "executor": self.executor,
            "interface_api": self.interface_api,
            "inputs": [p.to_json() for p in self.inputs],
            "outputs": [p.to_json() for p in self.outputs],
            "params": [p.to_json() for p in self.params],
            "functions": [f.to_json() for f in self.functions],
        }

    def to_json(self) -> str:
        """Deterministic JSON text."""
        return json.dumps(self.to_json_obj(), sort_keys=True, indent=2) + "\n"

    @staticmethod
    def from_json(text: str | bytes) -> ModelMetadata:
        """Parse and validate metadata JSON text."""
        if len(text) > MAX_METADATA_BYTES:
            raise _fail("text", f"is {len(text)} bytes; at most {MAX_METADATA_BYTES}")
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise _fail("text", f"is not valid JSON: {exc}") from None
        version = _get(obj, "version", int, "top level")
        if version != METADATA_FORMAT_VERSION:
            raise _fail(
                "version",
                f"is {version}; this ember reads version {METADATA_FORMAT_VERSION} only "
                "(rebuild the model with this ember)",
            )
        executor = _get(obj, "executor", str, "top level")
        if executor not in EXECUTORS:
            raise _fail("executor", f"{executor!r} is unknown; known: {', '.join(EXECUTORS)}")
        api = obj.get("interface_api", "packed")
        if api not in INTERFACE_APIS:
            raise _fail("interface_api", f"{api!r} is unknown; known: {INTERFACE_APIS}")

        def infos(key: str) -> tuple[ParameterInfo, ...]:
            items = _get(obj, key, list, "top level")
            if len(items) > MAX_ITEMS:
                raise _fail(key, f"has {len(items)} items; at most {MAX_ITEMS}")
            return tuple(ParameterInfo.from_json(p, f"{key}[{i}]") for i, p in enumerate(items))

        funcs = _get(obj, "functions", list, "top level")
        inputs, outputs, params = infos("inputs"), infos("outputs"), infos("params")
        for what, group in (("inputs and params", inputs + params), ("outputs", outputs)):
            names = [p.name for p in group]
            if len(set(names)) != len(names):
                repeated = sorted({n for n in names if names.count(n) > 1})
                raise _fail(
                    what,
                    f"names must be unique; repeated: {repeated[:8]}. The file is corrupt: "
                    "rebuild the model",
                )
        return ModelMetadata(
            mod_name=_get(obj, "mod_name", str, "top level"),
            executor=executor,
            inputs=inputs,
            outputs=outputs,
            params=params,
            functions=tuple(
                FunctionInfo.from_json(f, f"functions[{i}]") for i, f in enumerate(funcs)
            ),
            interface_api=api,
        )


def graph_metadata(
    graph: GraphJSON, params: Mapping[str, Any], mod_name: str = "default"
) -> ModelMetadata:
    """Derive the model metadata of a graph-executor build from its graph and parameters."""

    def info(eid: int, name: str) -> ParameterInfo:
        return ParameterInfo(name, graph.shape[eid], graph.dltype[eid], name)

    inputs, consts = [], []
    for nid in graph.arg_nodes:
        node = graph.nodes[nid]
        eid = graph.node_row_ptr[nid]
        if node.name in params:
            arr = np.asarray(params[node.name])
            consts.append(ParameterInfo(node.name, arr.shape, dtype_name(arr.dtype), node.name))
        else:
            inputs.append(info(eid, node.name))
    eids = graph.output_entry_ids()
    out_names = graph.output_names or tuple(f"output{i}" for i in range(len(eids)))
    outputs = [info(eid, name) for eid, name in zip(eids, out_names, strict=True)]
    # the graph executor's one workspace: every entry but inputs, parameters and outputs,
    # and the kernels' scratch, placed by the static planner (formats.graph_memory)
    workspace = plan_graph_memory(graph, STORAGE_ALIGNMENT).workspace_size
    io_size = sum(p.nbytes for p in inputs + outputs)
    const_size = sum(p.nbytes for p in consts)
    main = FunctionInfo(
        f"{mod_name}_run_model",
        tuple(inputs + outputs),
        len(inputs),
        len(outputs),
        workspace,
        io_size,
        const_size,
    )
    return ModelMetadata(mod_name, "graph", tuple(inputs), tuple(outputs), tuple(consts), (main,))


#: C's keywords: a struct field of the c interface must not be one.
C_KEYWORDS = frozenset(
    [
        "auto",
        "break",
        "case",
        "char",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "restrict",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "_Bool",
        "_Complex",
        "_Imaginary",
        "_Alignas",
        "_Alignof",
        "_Atomic",
        "_Generic",
        "_Noreturn",
        "_Static_assert",
        "_Thread_local",
    ]
)


def c_field_names(params: tuple[ParameterInfo, ...]) -> list[str]:
    """The c interface's struct field names of tensors: their model names made C
    identifiers (``input:0`` -> ``input_0``; a leading digit gets ``t_``), unique."""
    out: list[str] = []
    for p in params:
        name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in p.name) or "t"
        if not (name[0].isalpha() or name[0] == "_"):
            name = "t_" + name
        base, k = name, 1
        while name in out or name in C_KEYWORDS:
            name, k = f"{base}_{k}", k + 1
        out.append(name)
    return out
