"""What the graph and AOT executors share of the model interface: naming an input by name
or index, and handing an output out as a view or a copy (same checks, same messages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ember.errors import EmberValueError, ExecutorError
from ember.runtime.ndarray import NDArray


def resolve_input(key: Any, names: Sequence[str], index: Mapping[str, int], what: str) -> int:
    """The position of input ``key`` (a name, or an index into ``names``)."""
    if isinstance(key, str):
        found = index.get(key)
        if found is None:
            known = ", ".join(repr(n) for n in names)
            raise ExecutorError(f"{what}: the model has no input {key!r}; inputs: {known}")
        return found
    if isinstance(key, bool) or not isinstance(key, int | np.integer):
        raise ExecutorError(f"{what}: an input is named by str or int, got {key!r}")
    if not 0 <= key < len(names):
        raise ExecutorError(
            f"{what}: input index {key} is out of range; the model has {len(names)} inputs"
        )
    return int(key)


def output_index(index: Any, count: int, names: Sequence[str] = ()) -> int:
    """Check an output index against ``count`` outputs; a str is looked up in ``names``."""
    if isinstance(index, str):
        if index not in names:
            known = ", ".join(repr(n) for n in names)
            raise ExecutorError(f"get_output: the model has no output {index!r}; outputs: {known}")
        return list(names).index(index)
    if isinstance(index, bool) or not isinstance(index, int | np.integer):
        raise ExecutorError(f"get_output: expected an output name or index, got {index!r}")
    if not 0 <= index < count:
        raise ExecutorError(
            f"get_output: output index {index} is out of range; the model has {count} outputs"
        )
    return int(index)


def output_names(names: Sequence[str] | None, count: int) -> list[str]:
    """The model's output names (e.g. ONNX's), else ``output0``, ``output1``, ..."""
    return list(names) if names else [f"output{i}" for i in range(count)]


def hand_out(array: NDArray, view: np.ndarray, index: int, out: Any) -> Any:
    """Output ``index``: ``array`` itself, or copied into ``out`` (an NDArray or numpy array
    of the output's exact shape and dtype)."""
    if out is None:
        return array
    if isinstance(out, NDArray):
        return out.copyfrom(array)
    if isinstance(out, np.ndarray):
        if out.shape != view.shape or out.dtype != view.dtype:
            raise EmberValueError(
                f"get_output: out has shape {out.shape} and dtype {out.dtype}; output "
                f"{index} has shape {view.shape} and dtype {view.dtype}"
            )
        if not out.flags.writeable:
            raise EmberValueError(
                f"get_output: out is a read-only numpy array; pass a writable array for output "
                f"{index}, or omit out to get a view"
            )
        np.copyto(out, view)
        return out
    raise ExecutorError(f"get_output: out must be an NDArray or numpy array, got {out!r}")
