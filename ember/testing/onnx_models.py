"""Small ONNX models and seeded inputs for tests: one ``build_model`` instead of a copy per
test file.

Example::

    x = random_input((2, 3), "float32", seed=0)
    model = build_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"], opset=14)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

#: onnx may stamp models with an IR version newer than onnxruntime reads; the opsets the
#: tests use are all readable at this version, so built models are clamped to it.
ORT_MAX_IR_VERSION = 10

#: a graph input: an example array (its dtype and shape), or ``(dtype, shape)`` where the
#: shape may hold symbolic (str) or unknown (None) dimensions, or be None (unknown rank).
InputSpec = np.ndarray | tuple[str, Sequence[int | str | None] | None]


def elem_type(dtype: str) -> int:
    """The ONNX TensorProto element type of numpy dtype name ``dtype``."""
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _value_info(name: str, spec: InputSpec) -> onnx.ValueInfoProto:
    if isinstance(spec, np.ndarray):
        return helper.make_tensor_value_info(name, elem_type(spec.dtype.name), spec.shape)
    dtype, shape = spec
    return helper.make_tensor_value_info(name, elem_type(dtype), shape)


def build_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Mapping[str, InputSpec],
    outputs: Sequence[str] | Mapping[str, str],
    initializers: Mapping[str, np.ndarray] | None = None,
    opset: int = 17,
    name: str = "test_graph",
    extra_opsets: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """A model of ``nodes``: typed graph inputs, ``initializers``, and outputs that
    are untyped (a sequence of names) or typed by dtype with an unknown shape (a mapping
    name -> dtype); default domain at ``opset`` plus ``extra_opsets`` (domain -> version)."""
    if isinstance(outputs, Mapping):
        outs = [helper.make_tensor_value_info(n, elem_type(d), None) for n, d in outputs.items()]
    else:
        outs = [helper.make_empty_tensor_value_info(n) for n in outputs]
    graph = helper.make_graph(
        list(nodes),
        name,
        [_value_info(n, spec) for n, spec in inputs.items()],
        outs,
        initializer=[
            numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()
        ],
    )
    opsets = [helper.make_opsetid("", opset)]
    opsets += [helper.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
    return model


def node(op_type: str, inputs: Sequence[str], output: str, **attrs: Any) -> onnx.NodeProto:
    """A node of ``op_type`` with one output, named like its output."""
    return helper.make_node(op_type, list(inputs), [output], name=output, **attrs)


def random_input(
    shape: Sequence[int],
    dtype: str = "float32",
    seed: int | np.random.Generator = 0,
    *,
    scale: float = 1.0,
    int_range: tuple[int, int] = (0, 100),
) -> np.ndarray:
    """A seeded random array: standard normal times ``scale`` for floats, uniform integers
    in ``int_range`` (clipped at 0 for unsigned types) for ints, fair coin flips for bool.
    ``seed`` may be a Generator, to draw several inputs from one stream."""
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    shape = tuple(shape)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        low, high = int_range
        if dtype.startswith("uint"):
            low = max(low, 0)
        return rng.integers(low, high, shape).astype(dtype)
    return (rng.standard_normal(shape) * scale).astype(dtype)
