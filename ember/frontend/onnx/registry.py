"""Registry of ONNX op handlers, versioned by the opset they are valid ``since``.

A handler converts one ONNX node to graph IR. Example::

    @onnx_op("Relu", since=6)
    def relu(ctx: ConvertContext, node: NodeView) -> Expr:
        return call("relu", node.inputs[0], name=node.name)

For a model importing opset ``v`` of the op's domain, the handler with the largest
``since <= v`` is used. ``dtypes``, when given, lists the input element types the handler
supports (checked up front, so an unsupported dtype is reported with the unsupported ops).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ember.support import dtypes
from ember.support.registry import Registry

if TYPE_CHECKING:
    from ember.ir.expr import Expr

# arithmetic handlers take no storage-only type (int4 ...: ONNX only casts and moves them)
FLOAT_TYPES: frozenset[str] = frozenset(dtypes.names_of("float")) - dtypes.STORAGE_ONLY
INT_TYPES: frozenset[str] = frozenset(dtypes.names_of("int", "uint")) - dtypes.STORAGE_ONLY
NUMERIC_TYPES: frozenset[str] = FLOAT_TYPES | INT_TYPES
ALL_TYPES: frozenset[str] = frozenset(dtypes.names_of())

HandlerFn = Callable[[Any, Any], "Expr | Sequence[Expr | None]"]


@dataclass(frozen=True)
class OnnxHandler:
    """One versioned converter of an ONNX op."""

    op_type: str
    since: int
    fn: HandlerFn
    domain: str = ""
    dtypes: frozenset[str] | None = None


#: key: "<domain>::<op_type>" (domain "" is the default ONNX domain); value: handlers by since.
HANDLERS: Registry[dict[int, OnnxHandler]] = Registry("ONNX op")


def _key(op_type: str, domain: str) -> str:
    return f"{domain}::{op_type}" if domain not in ("", "ai.onnx") else op_type


def onnx_op(
    op_type: str,
    since: int = 1,
    *,
    domain: str = "",
    dtypes: frozenset[str] | set[str] | None = None,
    override: bool = False,
) -> Callable[[HandlerFn], HandlerFn]:
    """Decorator registering a handler for ``op_type`` valid from opset ``since``."""

    def wrap(fn: HandlerFn) -> HandlerFn:
        key = _key(op_type, domain)
        versions = HANDLERS.find(key)
        if versions is None:
            versions = HANDLERS.register(key, {})
        if since in versions and not override:
            raise ValueError(
                f"ONNX handler {op_type} since opset {since} is already registered; "
                "pass override=True to replace it"
            )
        versions[since] = OnnxHandler(
            op_type, since, fn, domain, frozenset(dtypes) if dtypes is not None else None
        )
        return fn

    return wrap


def find_handler(op_type: str, opset: int, domain: str = "") -> OnnxHandler | None:
    """The handler for ``op_type`` at ``opset`` (largest ``since <= opset``), or None."""
    versions = HANDLERS.find(_key(op_type, domain))
    if not versions:
        return None
    usable = [v for v in versions if v <= opset]
    if not usable:
        return None
    return versions[max(usable)]


def supported_ops() -> list[str]:
    """All op types with at least one handler."""
    return HANDLERS.names()
