"""Sequences as inputs and outputs of a whole model, flattened to tensors at build time.

A compiled model takes and returns tensors. A sequence input (or a present optional
sequence) whose elements' shapes are given at build time, ``shape={"seq": [(4,), (3,)]}``,
becomes one tensor input per element, named ``seq.0``, ``seq.1``, ...; inside the model it
is the tuple of those (see ``sequence``). A sequence output becomes one output per element,
named the same way. Without the element shapes the importer says how to give them.

An optional input is present by default (a tensor or sequence input like any other); an
optional that is empty for this build is named with ``shape={"opt": None}``: it is no
input of the compiled model, and inside the model it is ``EmptyOptional`` (so
OptionalHasElement folds to False).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx

from ember.errors import FrontendError
from ember.frontend.onnx.context import onnx_elem_dtype
from ember.frontend.onnx.sequence import EmptyOptional
from ember.ir.expr import Expr, Tuple, Var
from ember.ir.types import TensorType


def element_type(vi: onnx.ValueInfoProto) -> onnx.TypeProto | None:
    """The element type of a sequence (or optional sequence) input, else None."""
    tp = vi.type
    if tp.HasField("optional_type"):
        tp = tp.optional_type.elem_type
    if not tp.HasField("sequence_type"):
        return None
    return tp.sequence_type.elem_type


def absent_optionals(
    inputs: Sequence[onnx.ValueInfoProto], shape: Mapping[str, Any] | None, label: str
) -> set[str]:
    """The optional inputs ``shape`` marks empty (``None``); a non-optional one is an error."""
    absent = {name for name, value in (shape or {}).items() if value is None}
    for vi in inputs:
        if vi.name in absent and not vi.type.HasField("optional_type"):
            raise FrontendError(
                f"ONNX model {label}: shape= gives None for input '{vi.name}', which is not "
                "optional; give its shape (None marks an optional input empty)"
            )
    return absent


def element_name(name: str, index: int) -> str:
    """The name of element ``index`` of sequence ``name`` as a model input or output."""
    return f"{name}.{index}"


def sequence_vars(
    vi: onnx.ValueInfoProto,
    shape: Mapping[str, Any],
    dtype: Mapping[str, Any] | str | None,
    label: str,
) -> list[Var]:
    """One input Var per element of sequence input ``vi``, shaped by ``shape[vi.name]``."""
    elem = element_type(vi)
    assert elem is not None
    given = shape.get(vi.name)
    if not isinstance(given, list | tuple) or not _is_shape_list(given):
        raise FrontendError(
            f"ONNX model {label}: input '{vi.name}' is a sequence; a compiled model takes its "
            "elements as separate tensor inputs, so give each element's shape, e.g. "
            f"from_onnx(..., shape={{'{vi.name}': [(2, 3), (4, 3)]}}) for the inputs "
            f"'{element_name(vi.name, 0)}' and '{element_name(vi.name, 1)}'"
        )
    override = dtype.get(vi.name) if isinstance(dtype, Mapping) else dtype
    if override is not None:
        elem_dtype = str(override)
    elif elem.HasField("tensor_type") and elem.tensor_type.elem_type:
        elem_dtype = onnx_elem_dtype(elem.tensor_type.elem_type, f"input '{vi.name}'")
    else:
        raise FrontendError(
            f"ONNX model {label}: sequence input '{vi.name}' has no tensor element type; pass "
            f"dtype={{'{vi.name}': 'float32'}}"
        )
    return [
        Var(element_name(vi.name, i), TensorType(tuple(int(d) for d in s), elem_dtype))
        for i, s in enumerate(given)
    ]


def _is_shape_list(value: object) -> bool:
    """True for a list of shapes (each a sequence of ints), as a sequence input takes."""
    if not isinstance(value, list | tuple):
        return False
    return all(isinstance(s, list | tuple) for s in value)


def flatten_outputs(
    graph: onnx.GraphProto, outputs: Sequence[Expr], label: str
) -> tuple[list[str], list[Expr]]:
    """The model's outputs as tensors: each sequence output gives one per element."""
    names: list[str] = []
    flat: list[Expr] = []
    for vi, expr in zip(graph.output, outputs, strict=True):
        if isinstance(expr, EmptyOptional):
            raise FrontendError(
                f"ONNX model {label}: output '{vi.name}' is an optional that is empty (known "
                "at build time); a compiled model returns tensors"
            )
        if isinstance(expr, Tuple):
            for i, item in enumerate(expr.fields):
                if not isinstance(item.type, TensorType):
                    raise FrontendError(
                        f"ONNX model {label}: output '{vi.name}' is a sequence of "
                        f"{item.type}; a compiled model returns tensors"
                    )
                names.append(element_name(vi.name, i))
                flat.append(item)
            continue
        names.append(vi.name)
        flat.append(expr)
    return names, flat
