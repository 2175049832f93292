"""Function expansion: a node of an op ember has no handler for, but whose ONNX schema
defines it as a function of other ops, is replaced by that function's body.

ONNX defines many newer ops (Attention, RMSNormalization, RotaryEmbedding, SwiGLU,
GroupNormalization, the window ops, ...) as functions, some depending on the node's
attributes and input types (context-dependent functions). For each such node the body at
the model's opset is built by onnx, added as a model-local function in a private domain
and inlined with ``onnx.inliner``, as onnxruntime does for ops without a kernel. An op
with its own handler is never expanded; expansion repeats while the body holds further
expandable ops, a bounded number of rounds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
from onnx import defs, helper, inliner, shape_inference

from ember.errors import FrontendError

#: the private domain expanded bodies live in until they are inlined.
EXPAND_DOMAIN = "ember.expand"

#: expansion rounds (bodies that contain further function ops) before giving up.
MAX_ROUNDS = 4

HasHandler = Callable[[str, int, str], bool]


def function_body(
    node: onnx.NodeProto, opset: int, input_types: list[onnx.TypeProto]
) -> onnx.FunctionProto | None:
    """The schema's function for ``node`` at ``opset`` (None when it defines none)."""
    try:  # Any: onnx's stubs lack the function accessors of OpSchema
        schema: Any = defs.get_schema(node.op_type, opset, node.domain)
    except Exception:
        return None
    plain = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    proto = onnx.FunctionProto()
    if dependent and (not plain or max(dependent) >= max(plain)):
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                max(dependent),
                node.SerializeToString(),
                [t.SerializeToString() for t in input_types],
            )
        except Exception:
            return None
        proto.ParseFromString(data)
    elif plain:
        proto.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    else:
        return None
    return proto if proto.node else None


def add_default_attributes(node: onnx.NodeProto, opset: int) -> None:
    """Write every attribute the schema defaults and ``node`` omits into ``node`` (a
    function body refers to them by name)."""
    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
    except Exception:
        return
    present = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in present and attr.default_value and attr.default_value.name:
            node.attribute.append(attr.default_value)


def expand_functions(model: onnx.ModelProto, has_handler: HasHandler) -> onnx.ModelProto:
    """``model`` with every handler-less function op of the main graph inlined."""
    for _ in range(MAX_ROUNDS):
        expanded = _expand_once(model, has_handler)
        if expanded is None:
            return model
        model = expanded
    return model


def _opset(model: onnx.ModelProto, domain: str) -> int:
    for imp in model.opset_import:
        if imp.domain == domain or (domain in ("", "ai.onnx") and imp.domain in ("", "ai.onnx")):
            return int(imp.version)
    return 0


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Every value's type that onnx's shape inference knows (initializers included)."""
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    graph = inferred.graph
    types = {vi.name: vi.type for vi in [*graph.input, *graph.value_info, *graph.output]}
    for t in graph.initializer:
        types.setdefault(t.name, helper.make_tensor_type_proto(t.data_type, t.dims))
    return types


def _expand_once(model: onnx.ModelProto, has_handler: HasHandler) -> onnx.ModelProto | None:
    """One round: a copy with the expandable nodes made calls of local functions, inlined;
    None when nothing is expandable."""
    candidates = [
        i
        for i, n in enumerate(model.graph.node)
        if n.domain in ("", "ai.onnx") and not has_handler(n.op_type, _opset(model, ""), "")
    ]
    if not candidates:
        return None
    types = _value_types(model)
    opset = _opset(model, "")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    added = 0
    for i in candidates:
        node = out.graph.node[i]
        add_default_attributes(node, opset)
        input_types = [types.get(name, onnx.TypeProto()) for name in node.input]
        body = function_body(node, opset, input_types)
        if body is None or not _all_known(body, opset, has_handler):
            continue  # left alone: the unsupported-op report names the op itself
        fname = f"{node.op_type}_{i}"
        body.name, body.domain = fname, EXPAND_DOMAIN
        _merge_opsets(out, body)
        out.functions.append(body)
        node.op_type, node.domain = fname, EXPAND_DOMAIN
        added += 1
    if not added:
        return None
    out.opset_import.append(helper.make_opsetid(EXPAND_DOMAIN, 1))
    try:
        inlined = inliner.inline_local_functions(out)
    except Exception as err:
        raise FrontendError(
            f"ONNX model '{model.graph.name}': expanding function ops into their ONNX "
            f"definitions failed: {err}"
        ) from None
    kept = [o for o in inlined.opset_import if o.domain != EXPAND_DOMAIN]
    del inlined.opset_import[:]
    inlined.opset_import.extend(kept)
    return inlined


def _all_known(body: onnx.FunctionProto, opset: int, has_handler: HasHandler) -> bool:
    """Whether every op of ``body`` has a handler or is itself a function op."""
    for node in body.node:
        if has_handler(node.op_type, opset, node.domain):
            continue
        try:
            schema: Any = defs.get_schema(node.op_type, opset, node.domain)
        except Exception:
            return False
        if not (schema.function_opset_versions or schema.context_dependent_function_opset_versions):
            return False
    return True


def _merge_opsets(model: onnx.ModelProto, body: onnx.FunctionProto) -> None:
    """Domains a body uses that the model does not import yet are imported at its version."""
    have = {("" if o.domain == "ai.onnx" else o.domain) for o in model.opset_import}
    for imp in body.opset_import:
        domain = "" if imp.domain == "ai.onnx" else imp.domain
        if domain not in have:
            model.opset_import.append(helper.make_opsetid(imp.domain, imp.version))
            have.add(domain)
