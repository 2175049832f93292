"""Expressions of the graph IR: immutable nodes, each typed when it is built.

Nodes compare and hash by identity (a graph is a DAG that shares nodes); use
``ember.ir.structural_equal`` for structural comparison. Calls are built with :func:`call`,
which validates attributes against the op's schema and infers the result type at once, so
every expression always has a ``type``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attrs, OpDef, get_op
from ember.ir.types import TensorType, TupleType, Type, tensor_type_of


class Expr:
    """Base class of graph IR expressions; every expression has a ``type``."""

    type: Type

    @property
    def tensor_type(self) -> TensorType:
        """The type, which must be a tensor type."""
        if not isinstance(self.type, TensorType):
            raise IRError(f"expected a tensor-typed expression, got {self.type}")
        return self.type


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A named input of a function (a model input or a parameter)."""

    name: str
    type: Type

    def __repr__(self) -> str:
        return f"Var(%{self.name}: {self.type})"


@dataclass(frozen=True, eq=False)
class Constant(Expr):
    """A constant tensor; the data is copied into a read-only array."""

    data: np.ndarray
    type: TensorType = field(init=False)

    def __post_init__(self) -> None:
        data = np.array(self.data, copy=True)
        data.setflags(write=False)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "type", tensor_type_of(data))

    def __repr__(self) -> str:
        return f"Constant({self.type})"


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """An application of a registered operator, or of a Function (e.g. a fused group with
    attribute ``Primitive=1``), to arguments.

    ``name`` is a hint for humans (e.g. the source ONNX node name); it never changes meaning.
    A Function callee is not a child of the call: walks over the caller do not enter it.
    """

    op: OpDef | Function
    args: tuple[Expr, ...]
    attrs: Attrs = field(default_factory=Attrs)
    name: str = ""
    type: Type = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        if isinstance(self.op, Function):
            self._check_function_call(self.op)
            object.__setattr__(self, "type", self.op.ret_type)
            return
        self.op.check_arity(len(self.args))
        try:
            ty = self.op.infer_type([a.type for a in self.args], self.attrs)
        except IRError as err:
            where = f" (node '{self.name}')" if self.name else ""
            raise IRError(f"op '{self.op.name}'{where}: {err}") from None
        object.__setattr__(self, "type", ty)

    def _check_function_call(self, func: Function) -> None:
        if len(func.params) != len(self.args):
            raise IRError(f"function takes {len(func.params)} arguments, got {len(self.args)}")
        for i, (p, a) in enumerate(zip(func.params, self.args, strict=True)):
            if p.type != a.type:
                raise IRError(f"argument {i} of a function call: expected {p.type}, got {a.type}")

    @property
    def op_name(self) -> str:
        """The op's name, or ``"fn"`` for a call of a Function."""
        return self.op.name if isinstance(self.op, OpDef) else "fn"

    def __repr__(self) -> str:
        return f"Call({self.op_name}, {len(self.args)} args) -> {self.type}"


@dataclass(frozen=True, eq=False)
class Tuple(Expr):
    """A tuple of expressions."""

    fields: tuple[Expr, ...]
    type: TupleType = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "type", TupleType(tuple(f.type for f in self.fields)))


@dataclass(frozen=True, eq=False)
class TupleGetItem(Expr):
    """The ``index``-th field of a tuple-typed expression."""

    tuple_value: Expr
    index: int
    type: Type = field(init=False)

    def __post_init__(self) -> None:
        ty = self.tuple_value.type
        if not isinstance(ty, TupleType):
            raise IRError(f"TupleGetItem on a non-tuple of type {ty}")
        if not 0 <= self.index < len(ty.fields):
            raise IRError(f"TupleGetItem index {self.index} out of range for {ty}")
        object.__setattr__(self, "type", ty.fields[self.index])


@dataclass(frozen=True, eq=False)
class Function(Expr):
    """A function: parameters, a body, and attributes (e.g. ``Primitive=1`` for fused groups)."""

    params: tuple[Var, ...]
    body: Expr
    attrs: Attrs = field(default_factory=Attrs)
    type: Type = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "type", self.body.type)

    @property
    def ret_type(self) -> Type:
        """The type of the body."""
        return self.body.type


def call(op: str | OpDef, *args: Expr, name: str = "", **attrs: Any) -> Call:
    """Build a Call of ``op`` (a name or OpDef) with schema-checked attributes."""
    opdef = get_op(op) if isinstance(op, str) else op
    return Call(opdef, tuple(args), opdef.make_attrs(attrs), name=name)


def const(value: Any, dtype: str | None = None) -> Constant:
    """A Constant from a Python scalar, list or numpy array (optionally cast to ``dtype``)."""
    arr = np.asarray(value, dtype=dtype)
    return Constant(arr)


def children(expr: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``expr`` (functions: the body only)."""
    if isinstance(expr, Call):
        return expr.args
    if isinstance(expr, Tuple):
        return expr.fields
    if isinstance(expr, TupleGetItem):
        return (expr.tuple_value,)
    if isinstance(expr, Function):
        return (expr.body,)
    return ()


def post_order(roots: Expr | Iterable[Expr]) -> list[Expr]:
    """All expressions reachable from ``roots``, each once, children before parents.

    Iterative, so graphs of any depth work; the order is deterministic.
    """
    stack: list[tuple[Expr, bool]] = []
    root_list = [roots] if isinstance(roots, Expr) else list(roots)
    for r in reversed(root_list):
        stack.append((r, False))
    seen: set[int] = set()
    order: list[Expr] = []
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for child in reversed(children(node)):
            if id(child) not in seen:
                stack.append((child, False))
    return order


def rewrite(root: Expr, fn: Callable[[Expr, Mapping[int, Expr]], Expr | None]) -> Expr:
    """Rebuild ``root`` bottom-up: for each node (children first), ``fn(node, new)`` may
    return a replacement, where ``new`` maps ``id(old child)`` to its rewritten value.

    Returning None keeps the node, rebuilt with rewritten children when any changed.
    """
    new: dict[int, Expr] = {}
    for node in post_order(root):
        rebuilt = _with_children(node, new)
        replacement = fn(rebuilt, new)
        new[id(node)] = rebuilt if replacement is None else replacement
    return new[id(root)]


def _with_children(node: Expr, new: Mapping[int, Expr]) -> Expr:
    """``node`` with each child replaced by its rewritten value (itself if none changed)."""
    return with_children(node, tuple(new.get(id(c), c) for c in children(node)))


def with_children(node: Expr, kids: tuple[Expr, ...]) -> Expr:
    """``node`` with its children replaced by ``kids`` (``node`` itself when unchanged)."""
    old = children(node)
    if all(a is b for a, b in zip(old, kids, strict=True)):
        return node
    if isinstance(node, Call):
        return Call(node.op, kids, node.attrs, name=node.name)
    if isinstance(node, Tuple):
        return Tuple(kids)
    if isinstance(node, TupleGetItem):
        return TupleGetItem(kids[0], node.index)
    if isinstance(node, Function):
        return Function(node.params, kids[0], node.attrs)
    return node
