"""ONNX importer: ModelProto (or path, or bytes) -> (IRModule, params).

TVM's convention: graph inputs that are not initializers become the leading parameters
of ``main``; initializers become trailing parameters whose values are returned in
``params``. Shapes are static: ``shape=`` binds symbolic or unknown input dims, and every
call whose inputs are all constants is folded at once, so shape sub-graphs
(Shape -> Gather -> Concat -> Reshape) disappear. Everything that can be wrong with the
input is checked before any node is converted (see ``model_check``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ember.errors import EmberError, FrontendError, OpNotSupportedError
from ember.frontend.onnx import expand, model_check, sequence_io, upgrade
from ember.frontend.onnx.context import (
    ConvertContext,
    NodeView,
    onnx_elem_dtype,
    tensor_to_numpy,
)
from ember.frontend.onnx.registry import find_handler
from ember.frontend.onnx.sequence import EmptyOptional
from ember.ir.expr import Constant, Expr, Function, Tuple, TupleGetItem, Var, post_order
from ember.ir.module import IRModule
from ember.ir.types import TensorType, TupleType, canonical_dtype
from ember.support.advice import advice

ShapeArg = Mapping[str, Sequence[int] | int]
DtypeArg = str | Mapping[str, str]


def from_onnx(
    model: onnx.ModelProto | str | os.PathLike[str] | bytes,
    shape: Mapping[str, Sequence[int] | int | None] | None = None,
    dtype: DtypeArg | None = None,
) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Import an ONNX model into graph IR; return ``(module, params)``.

    ``shape`` maps an input name to its full static shape (``{"x": (1, 3, 224, 224)}``)
    or a symbolic dim name to its value (``{"batch": 1}``), or marks an optional input
    empty with None (``{"opt": None}``: no input of the compiled model); ``dtype`` is one dtype for
    every input or a mapping from input name to dtype.
    """
    proto = model_check.load_model(model)  # parse, external data, valid strings
    proto = model_check.normalize_model(proto)  # inline local functions, densify sparse
    proto = upgrade.upgrade_model(proto, model_check.MIN_OPSET)  # opsets 1-6: converted
    proto = expand.expand_functions(proto, _has_handler)  # handler-less function ops inlined
    graph = proto.graph
    label = model_check.graph_label(proto)
    opsets = model_check.read_opsets(proto)  # opset range
    init_names = [t.name for t in graph.initializer]
    input_protos = _graph_inputs(graph, set(init_names))
    order = model_check.topological_nodes(  # single assignment, producers, no cycle
        graph, [i.name for i in input_protos] + init_names
    )
    absent = sequence_io.absent_optionals(graph.input, shape, label)  # empty optionals
    input_protos = [vi for vi in input_protos if vi.name not in absent]
    shapes: ShapeArg = {k: v for k, v in (shape or {}).items() if v is not None}
    seq_protos = [vi for vi in input_protos if sequence_io.element_type(vi) is not None]
    input_protos = [vi for vi in input_protos if vi not in seq_protos]
    input_dtypes = _input_dtypes(input_protos, dtype, label)
    value_dtypes = model_check.infer_value_dtypes(proto, input_dtypes)
    model_check.raise_unsupported(  # every unsupported op at once, before converting
        label, model_check.find_unsupported(graph, order, opsets, value_dtypes)
    )
    seq_vars = {vi.name: sequence_io.sequence_vars(vi, shapes, dtype, label) for vi in seq_protos}
    tensor_shape = {k: v for k, v in shapes.items() if k not in seq_vars}
    input_vars = _input_vars(input_protos, input_dtypes, tensor_shape, label)
    input_vars += [v for elements in seq_vars.values() for v in elements]
    init_vars, init_values = _initializers(graph, label)
    ctx = ConvertContext(graph.name, opsets, {init_vars[n]: v for n, v in init_values.items()})
    ctx.convert_subgraph = _convert_subgraph
    env: dict[str, Expr] = {v.name: v for v in input_vars}
    env.update((name, Tuple(tuple(vs))) for name, vs in seq_vars.items())
    env.update((name, EmptyOptional()) for name in absent)
    env.update(init_vars)
    ctx.env = env
    for i in order:  # convert nodes in dependency order
        _convert_node(ctx, graph.node[i], i, env)
    outputs = [env[o.name] for o in graph.output]
    _check_output_dtypes(graph, outputs, label)
    out_names, outputs = sequence_io.flatten_outputs(graph, outputs, label)
    body = outputs[0] if len(outputs) == 1 else Tuple(tuple(outputs))
    used = {id(e) for e in post_order(body) if isinstance(e, Var)}
    params = [init_vars[n] for n in init_names if id(init_vars[n]) in used]
    func = Function(tuple(input_vars) + tuple(params), body)
    op_types = [[n.name or f"{n.op_type}_{i}", n.op_type] for i, n in enumerate(graph.node)]
    names = {"output_names": out_names, "onnx_op_types": op_types}
    return IRModule.from_expr(func, name=graph.name or "main", **names), {
        p.name: init_values[p.name] for p in params
    }


def _has_handler(op_type: str, opset: int, domain: str) -> bool:
    return find_handler(op_type, opset, domain) is not None


def _check_output_dtypes(graph: onnx.GraphProto, outputs: Sequence[Expr], label: str) -> None:
    """A declared output element type must match the converted one (catches bad handlers)."""
    for vi, expr in zip(graph.output, outputs, strict=True):
        elem = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        if not elem or not isinstance(expr.type, TensorType):
            continue
        declared = onnx_elem_dtype(elem, f"ONNX model {label}: output '{vi.name}'")
        if declared != expr.type.dtype:
            raise FrontendError(
                f"ONNX model {label}: output '{vi.name}' is declared {declared} but converts "
                f"to {expr.type}; the model's type annotations or an op handler are wrong"
            )


def _graph_inputs(graph: onnx.GraphProto, init_names: set[str]) -> list[onnx.ValueInfoProto]:
    """Graph inputs that are not initializers (duplicates are an error)."""
    seen: set[str] = set()
    out = []
    for vi in graph.input:
        if vi.name in seen:
            raise FrontendError(
                f"graph '{graph.name}': input '{vi.name}' is declared twice; fix the model"
            )
        seen.add(vi.name)
        if vi.name not in init_names:
            out.append(_present_optional(vi))
    return out


def _present_optional(vi: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    """An optional tensor input as a tensor input: a compiled model's inputs are present."""
    if not vi.type.HasField("optional_type"):
        return vi
    elem = vi.type.optional_type.elem_type
    if not elem.HasField("tensor_type"):
        return vi
    plain = onnx.ValueInfoProto(name=vi.name)
    plain.type.tensor_type.CopyFrom(elem.tensor_type)
    return plain


def _input_dtypes(
    inputs: Sequence[onnx.ValueInfoProto], dtype: DtypeArg | None, label: str
) -> dict[str, str]:
    """Each input's dtype: declared in the model, overridden by ``dtype``."""
    names = [vi.name for vi in inputs]
    if isinstance(dtype, Mapping):
        unknown = sorted(set(dtype) - set(names))
        if unknown:
            raise FrontendError(
                f"ONNX model {label}: dtype= names {unknown}, which are not inputs; inputs: {names}"
            )
    out: dict[str, str] = {}
    for vi in inputs:
        override = dtype.get(vi.name) if isinstance(dtype, Mapping) else dtype
        if override is not None:
            try:
                out[vi.name] = canonical_dtype(override)
            except EmberError as err:
                raise FrontendError(f"dtype= for input '{vi.name}': {err}") from None
            continue
        if not vi.type.HasField("tensor_type"):
            kind = vi.type.WhichOneof("value") or "no type"
            raise FrontendError(
                f"ONNX model {label}: input '{vi.name}' has type {kind}, not a tensor; ember "
                "imports tensor inputs only"
            )
        elem = vi.type.tensor_type.elem_type
        if not elem:
            raise FrontendError(
                f"ONNX model {label}: input '{vi.name}' has no element type; pass "
                f"dtype={{'{vi.name}': 'float32'}}"
            )
        out[vi.name] = onnx_elem_dtype(elem, f"ONNX model {label}: input '{vi.name}'")
    return out


def _input_vars(
    inputs: Sequence[onnx.ValueInfoProto],
    dtypes: Mapping[str, str],
    shape: ShapeArg | None,
    label: str,
) -> list[Var]:
    """One Var per input, with every dim static (``shape`` binds the unknown ones)."""
    names = [vi.name for vi in inputs]
    dim_names = {
        d.dim_param
        for vi in inputs
        for d in vi.type.tensor_type.shape.dim
        if d.HasField("dim_param") and d.dim_param
    }
    shape = _dim_names_as_ints(dict(shape or {}), names, dim_names)
    unknown = sorted(k for k in shape if k not in names and k not in dim_names)
    if unknown:
        raise FrontendError(
            f"ONNX model {label}: shape= names {unknown}, which are neither inputs nor "
            f"symbolic dims; inputs: {names}; symbolic dims: {sorted(dim_names) or 'none'}"
        )
    out: list[Var] = []
    unresolved: list[str] = []
    for vi in inputs:
        dims, missing = _resolve_dims(vi, shape, label)
        if missing:
            unresolved.append(f"'{vi.name}' (dims {', '.join(missing)})")
            continue
        out.append(Var(vi.name, TensorType(tuple(dims), dtypes[vi.name])))
    if unresolved:
        raise FrontendError(
            f"ONNX model {label}: inputs with unknown dims: {'; '.join(unresolved)}. ember "
            f"compiles static shapes: {_binding_advice(inputs, shape)}"
        )
    return out


def _dim_names_as_ints(
    shape: dict[str, Sequence[int] | int], names: Sequence[str], dim_names: set[str]
) -> dict[str, Sequence[int] | int]:
    """A symbolic dim bound to a one-value sequence (``--input-shape N:7``) binds it to 7."""
    for key, value in shape.items():
        if key not in names and key in dim_names and not isinstance(value, int):
            values = list(value)
            if len(values) != 1:
                raise FrontendError(
                    f"symbolic dim '{key}' is bound to {values}; a symbolic dim takes one value"
                )
            shape[key] = int(values[0])
    return shape


def _binding_advice(inputs: Sequence[onnx.ValueInfoProto], shape: ShapeArg) -> str:
    """How to bind the unknown dims, as the current entry point (Python or CLI) spells it."""
    full: dict[str, list[int]] = {}
    named: list[str] = []
    for vi in inputs:
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value >= 0:
                dims.append(int(d.dim_value))
            elif _is_named(d) and isinstance(shape.get(d.dim_param), int):
                dims.append(int(shape[d.dim_param]))  # type: ignore[arg-type]
            else:
                dims.append(1)
                if _is_named(d) and d.dim_param not in named:
                    named.append(d.dim_param)
        full[vi.name] = dims
    py = ", ".join(f"'{k}': {tuple(v)}" for k, v in full.items())
    cli = " ".join(f"--input-shape {k}:{','.join(map(str, v))}" for k, v in full.items())
    python = f"pass each input's full shape by input name, e.g. from_onnx(..., shape={{{py}}})"
    command = f"pass each input's full shape by input name, e.g. {cli}"
    if named:
        python += f", or bind a named dim, e.g. shape={{'{named[0]}': 1}}"
        command += f", or bind a named dim, e.g. --input-shape {named[0]}:1"
    return advice(python=python, cli=command)


def _is_named(d: onnx.TensorShapeProto.Dimension) -> bool:
    """A dim with a usable symbolic name (``?`` and empty names are anonymous)."""
    return d.HasField("dim_param") and d.dim_param not in ("", "?")


def _resolve_dims(
    vi: onnx.ValueInfoProto, shape: Mapping[str, Sequence[int] | int], label: str
) -> tuple[list[int], list[str]]:
    """The static dims of one input and the descriptions of those still unknown."""
    given = shape.get(vi.name)
    tshape = vi.type.tensor_type.shape
    declared = list(tshape.dim) if vi.type.tensor_type.HasField("shape") else None
    if given is not None:
        if isinstance(given, int):
            raise FrontendError(f"shape= for input '{vi.name}' must be a sequence of ints")
        dims = [int(d) for d in given]
        if declared is not None and len(dims) != len(declared):
            raise FrontendError(
                f"ONNX model {label}: shape= gives input '{vi.name}' {len(dims)} dims, "
                f"but the model declares rank {len(declared)}"
            )
        if any(d < 0 for d in dims):
            raise FrontendError(f"shape= for input '{vi.name}' has a negative dim: {dims}")
        for axis, d in enumerate(declared or []):
            bound = shape.get(d.dim_param) if d.HasField("dim_param") else None
            if isinstance(bound, int) and bound != dims[axis]:
                raise FrontendError(
                    f"ONNX model {label}: the shape given for input '{vi.name}' has dim "
                    f"{axis} = {dims[axis]}, but its symbolic dim '{d.dim_param}' is bound to "
                    f"{bound}; give one value for both"
                )
        return dims, []
    if declared is None:
        return [], ["all: the rank is unknown"]
    dims = []
    missing = []
    for axis, d in enumerate(declared):
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param and isinstance(shape.get(d.dim_param), int):
            dims.append(int(shape[d.dim_param]))  # type: ignore[arg-type]
        elif _is_named(d):
            missing.append(f"{axis}='{d.dim_param}'")
        else:
            missing.append(f"{axis}=?")
    return dims, missing


def _initializers(
    graph: onnx.GraphProto, label: str
) -> tuple[dict[str, Var], dict[str, np.ndarray]]:
    """A Var and a value per initializer (names must be unique)."""
    init_vars: dict[str, Var] = {}
    values: dict[str, np.ndarray] = {}
    for t in graph.initializer:
        if t.name in values:
            raise FrontendError(
                f"ONNX model {label}: initializer '{t.name}' is defined twice; fix the model"
            )
        value = tensor_to_numpy(t, f"ONNX model {label}: initializer")
        values[t.name] = value
        init_vars[t.name] = Var(t.name, TensorType(value.shape, canonical_dtype(value.dtype)))
    return init_vars, values


def _convert_node(
    ctx: ConvertContext, proto: onnx.NodeProto, index: int, env: dict[str, Expr]
) -> None:
    """Run the node's handler and bind its (folded) outputs in ``env``."""
    domain = "" if proto.domain in ("", "ai.onnx") else proto.domain
    opset = ctx.opsets.get(domain, 0)
    inputs = [env[n] if n else None for n in proto.input]
    node = NodeView(proto, inputs, opset, index)
    handler = find_handler(proto.op_type, opset, domain)
    if handler is None:  # find_unsupported already reported these; keep the guard
        raise OpNotSupportedError(f"no handler for {proto.op_type} at opset {opset}")
    outer = ctx.node  # a subgraph's nodes convert inside their If node's handler
    ctx.node = node
    try:
        result = handler.fn(ctx, node)
        outputs = [None if e is None else ctx.fold(e) for e in _split_outputs(ctx, node, result)]
    except (FrontendError, OpNotSupportedError):
        raise
    except EmberError as err:
        ctx.fail(node, str(err))
    except Exception as err:  # a handler bug or an input it did not expect: say where
        raise FrontendError(
            f"{ctx.where(node)}: converting the node failed with {type(err).__name__}: {err}"
        ) from err
    finally:
        ctx.node = outer
    for i in range(node.num_outputs):
        if not node.output_used(i):
            continue
        out = outputs[i] if i < len(outputs) else None
        if out is None:
            ctx.fail(node, f"the handler gave no value for output {i} ('{proto.output[i]}')")
        env[proto.output[i]] = out


def _convert_subgraph(ctx: ConvertContext, graph: onnx.GraphProto) -> list[Expr]:
    """Convert a subgraph (an If branch) inline: its nodes see the enclosing scope
    (``ctx.env``), its initializers are constants; returns its outputs."""
    outer_env = ctx.env
    env = dict(outer_env)
    for t in graph.initializer:
        env[t.name] = Constant(tensor_to_numpy(t, f"subgraph '{graph.name}': initializer"))
    order = model_check.topological_nodes(graph, list(env))
    ctx.env = env
    try:
        for i in order:
            _convert_node(ctx, graph.node[i], i, env)
    finally:
        ctx.env = outer_env
    return [env[o.name] for o in graph.output]


def _split_outputs(ctx: ConvertContext, node: NodeView, result: Any) -> list[Expr | None]:
    """A handler result as one entry per ONNX output."""
    if isinstance(result, Expr):
        if isinstance(result, Tuple) and node.num_outputs == 1:
            return [result]  # a sequence passed through (Identity of a sequence)
        if isinstance(result.type, TupleType):
            n = len(result.type.fields)
            return [TupleGetItem(result, i) for i in range(n)]
        return [result]
    if isinstance(result, list | tuple):
        return list(result)
    ctx.fail(node, f"the handler returned {type(result).__name__}, not an IR expression")
