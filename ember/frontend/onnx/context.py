"""What an ONNX op handler sees: a decoded view of one node and the conversion context.

A handler receives ``(ctx, node)``::

    @onnx_op("Reshape", since=5)
    def reshape(ctx: ConvertContext, node: NodeView) -> Expr:
        shape = ctx.require_const(node.inputs[1], "the target shape")
        return call("reshape", node.inputs[0], newshape=..., name=node.name)

``node.inputs`` are graph IR expressions (None for an omitted optional input),
``node.attr(name, default)`` returns decoded Python values, and ``ctx.const_value`` sees
through constants, initializers and constant sub-computations (evaluated with the op
references, cached), so shape arguments computed by Shape/Gather/Concat chains are static.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np
import onnx
from onnx import numpy_helper

from ember.errors import FrontendError
from ember.ir.expr import (
    Call,
    Constant,
    Expr,
    Tuple,
    TupleGetItem,
    Var,
    children,
)
from ember.ir.op import OpDef
from ember.ir.types import TensorType, TupleType
from ember.support import dtypes
from ember.support.advice import advice

#: sentinel default of :meth:`NodeView.attr`: the attribute must be present.
REQUIRED: Any = object()


def onnx_elem_dtype(elem_type: int, where: str) -> str:
    """The canonical ember dtype of an ONNX TensorProto element type, or FrontendError."""
    info = dtypes.from_onnx(elem_type)
    if info is None:
        raise FrontendError(
            f"{where}: element type {onnx_elem_name(elem_type)} is not supported by ember; "
            f"supported element types: {', '.join(dtypes.TENSOR_DTYPES)}"
        )
    return info.name


def onnx_elem_name(elem_type: int) -> str:
    """The TensorProto name of an element type (e.g. ``FLOAT``), for messages."""
    try:
        return str(onnx.TensorProto.DataType.Name(elem_type))
    except ValueError:
        return f"<element type {elem_type}>"


def tensor_to_numpy(tensor: onnx.TensorProto, where: str) -> np.ndarray:
    """Decode a TensorProto (including external data already loaded) into a numpy array."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        raise FrontendError(
            f"{where}: tensor '{tensor.name}' is stored in an external data file that was not "
            "loaded; pass the model's file path to from_onnx (the data files next to it are "
            "read), or load it with onnx.load(path) first"
        )
    try:
        arr = numpy_helper.to_array(tensor)
    except Exception as err:  # protobuf/numpy raise many kinds on corrupt tensors
        raise FrontendError(f"{where}: cannot decode tensor '{tensor.name}': {err}") from None
    if arr.dtype == object:  # strings (bytes in onnx): a numpy object array of str
        flat = [_text(b) for b in arr.reshape(-1).tolist()]
        return np.array(flat + [None], dtype=object)[:-1].reshape(arr.shape)
    onnx_elem_dtype(tensor.data_type, f"{where}: tensor '{tensor.name}'")
    return arr if arr.flags.c_contiguous else arr.copy(order="C")  # keeps 0-d arrays 0-d


def _text(value: object) -> str:
    """An element of an ONNX string tensor (bytes, or str from newer onnx) as str."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def _decode_attr(attr: onnx.AttributeProto, where: str) -> Any:
    """An AttributeProto as a plain Python value (str not bytes, numpy for tensors)."""
    kind = attr.type
    A = onnx.AttributeProto
    if kind == A.FLOAT:
        return float(attr.f)
    if kind == A.INT:
        return int(attr.i)
    if kind == A.STRING:
        return attr.s.decode("utf-8", errors="replace")
    if kind == A.TENSOR:
        return tensor_to_numpy(attr.t, where)
    if kind == A.FLOATS:
        return [float(v) for v in attr.floats]
    if kind == A.INTS:
        return [int(v) for v in attr.ints]
    if kind == A.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in attr.strings]
    if kind == A.TENSORS:
        return [tensor_to_numpy(t, where) for t in attr.tensors]
    if kind == A.SPARSE_TENSOR:
        return sparse_to_dense(attr.sparse_tensor, where)
    if kind == A.GRAPH:
        return attr.g
    if kind == A.GRAPHS:
        return list(attr.graphs)
    if kind == A.TYPE_PROTO:
        return attr.tp
    raise FrontendError(f"{where}: attribute '{attr.name}' has an unknown kind {kind}")


#: A sparse tensor densifies to at most this many elements (override by assigning it).
MAX_SPARSE_DENSE_ELEMENTS = 1 << 28


def sparse_to_dense(sparse: onnx.SparseTensorProto, where: str) -> np.ndarray:
    """Densify a SparseTensorProto (COO indices, flat [NNZ] or [NNZ, rank]); named as its values.

    The dense size is bounded (:data:`MAX_SPARSE_DENSE_ELEMENTS`) and every index checked.
    """
    shape = tuple(int(d) for d in sparse.dims)
    count = math.prod(shape)
    if any(d < 0 for d in shape) or count > MAX_SPARSE_DENSE_ELEMENTS:
        raise FrontendError(
            f"{where}: sparse tensor dims {list(shape)} give {count} elements; ember densifies "
            f"at most {MAX_SPARSE_DENSE_ELEMENTS} (MAX_SPARSE_DENSE_ELEMENTS) and no negative "
            "dims; fix the model or store the tensor dense"
        )
    values = tensor_to_numpy(sparse.values, where).reshape(-1)
    indices = tensor_to_numpy(sparse.indices, where).astype(np.int64)
    dense = np.zeros(shape, dtype=values.dtype)
    try:
        if indices.ndim == 2:
            flat = np.ravel_multi_index(tuple(indices.T), shape) if indices.size else indices[:, 0]
        else:
            flat = indices.reshape(-1)
        if flat.size != values.size or (flat.size and (flat.min() < 0 or flat.max() >= count)):
            raise ValueError("indices do not match the values or the dims")
        dense.reshape(-1)[flat] = values
    except (ValueError, IndexError) as err:
        raise FrontendError(
            f"{where}: sparse tensor indices are invalid for dims {list(shape)} ({err}); fix "
            "the model"
        ) from None
    return dense


class NodeView:
    """One ONNX node as a handler sees it: name, op type, opset, IR inputs, decoded attrs."""

    def __init__(
        self,
        proto: onnx.NodeProto,
        inputs: Sequence[Expr | None],
        opset: int,
        index: int,
    ) -> None:
        self.proto = proto
        self.op_type: str = proto.op_type
        self.domain: str = proto.domain
        self.name: str = proto.name or f"{proto.op_type}_{index}"
        self.opset: int = opset
        self.inputs: list[Expr | None] = list(inputs)
        self.input_names: list[str] = list(proto.input)
        self.output_names: list[str] = list(proto.output)
        self.num_outputs: int = len(proto.output)
        where = f"node '{self.name}' ({self.op_type})"
        self._attrs: dict[str, Any] = {a.name: _decode_attr(a, where) for a in proto.attribute}

    @property
    def attrs(self) -> Mapping[str, Any]:
        """All attributes present on the node, decoded."""
        return self._attrs

    def has_attr(self, name: str) -> bool:
        """True when the node carries attribute ``name``."""
        return name in self._attrs

    def attr(self, name: str, default: Any = REQUIRED) -> Any:
        """The decoded attribute ``name``, or ``default``; FrontendError if required and absent."""
        if name in self._attrs:
            return self._attrs[name]
        if default is REQUIRED:
            present = ", ".join(sorted(self._attrs)) or "none"
            raise FrontendError(
                f"node '{self.name}' ({self.op_type}, opset {self.opset}) is missing the "
                f"required attribute '{name}' (attributes present: {present}); fix the model"
            )
        return default

    def output_used(self, i: int) -> bool:
        """True when output ``i`` exists and has a non-empty name (empty = omitted)."""
        return i < self.num_outputs and bool(self.output_names[i])

    def input(self, i: int) -> Expr | None:
        """Input ``i``, or None when it is omitted or beyond the node's inputs."""
        return self.inputs[i] if i < len(self.inputs) else None

    def __repr__(self) -> str:
        return f"NodeView({self.op_type} '{self.name}', opset {self.opset})"


class ConvertContext:
    """State shared by the handlers of one import: constants, opsets, the current node."""

    #: constant sub-computations larger than this many elements are not evaluated on demand.
    MAX_EVAL_ELEMENTS = 1 << 22

    def __init__(
        self,
        graph_name: str,
        opsets: Mapping[str, int],
        initializer_values: Mapping[Var, np.ndarray] | None = None,
    ) -> None:
        self.graph_name = graph_name
        self.opsets: dict[str, int] = dict(opsets)
        #: values of initializer variables (they stay params in the graph).
        self.initializer_values: dict[Var, np.ndarray] = dict(initializer_values or {})
        #: the node being converted (set by the importer), used in error messages.
        self.node: NodeView | None = None
        #: the values in scope by ONNX name (set by the importer; subgraphs extend it).
        self.env: dict[str, Expr] = {}
        #: converts a subgraph in the current scope, returning its outputs (set by the
        #: importer; used by control-flow handlers such as If).
        self.convert_subgraph: Callable[[ConvertContext, onnx.GraphProto], list[Expr]] | None = None
        self._cache: dict[int, tuple[Expr, np.ndarray | tuple[Any, ...] | None]] = {}
        self._folded: dict[int, tuple[Expr, Expr]] = {}

    # -- constants -------------------------------------------------------------------------

    def const_value(self, expr: Expr | None) -> np.ndarray | None:
        """The value of ``expr`` when it is statically known (constant, initializer, or a
        computation over those), else None."""
        if expr is None:
            return None
        value = self._static_value(expr)
        if value is None or isinstance(value, tuple):
            return None
        return value

    def is_const(self, expr: Expr | None) -> bool:
        """True when :meth:`const_value` would return a value."""
        return self.const_value(expr) is not None

    def require_const(self, expr: Expr | None, what: str) -> np.ndarray:
        """The static value of ``expr``; FrontendError naming the node and ``what`` if dynamic."""
        value = self.const_value(expr)
        if value is not None:
            return value
        where = self.where()
        if expr is None:
            raise FrontendError(f"{where}: {what} is required but the input is omitted")
        raise FrontendError(
            f"{where}: {what} must be constant (static), but it depends on a model input at "
            "run time (a data-dependent shape); ember compiles static shapes only. Bind the "
            "input shapes with "
            + advice(python="from_onnx(..., shape={...})", cli="--input-shape NAME:D1,D2,...")
            + " or make this input an initializer"
        )

    def _static_value(self, expr: Expr) -> np.ndarray | tuple[Any, ...] | None:
        for node in _unseen_post_order(expr, self._cache):
            self._cache[id(node)] = (node, self._eval_one(node))
        return self._cache[id(expr)][1]

    def _known(self, expr: Expr) -> Any:
        hit = self._cache.get(id(expr))
        return hit[1] if hit is not None and hit[0] is expr else None

    def _eval_one(self, node: Expr) -> np.ndarray | tuple[Any, ...] | None:
        if isinstance(node, Constant):
            return node.data
        if isinstance(node, Var):
            value = self.initializer_values.get(node)
            if value is None:
                return None
            view = value.view()
            view.setflags(write=False)  # handlers read params; they must not change them
            return view
        if isinstance(node, TupleGetItem):
            tup = self._known(node.tuple_value)
            return None if tup is None else tup[node.index]
        if isinstance(node, Tuple):
            fields = [self._known(f) for f in node.fields]
            return None if any(f is None for f in fields) else tuple(fields)
        if isinstance(node, Call) and isinstance(node.op, OpDef):
            args = [self._known(a) for a in node.args]
            if any(a is None for a in args):
                return None
            if isinstance(node.type, TensorType) and node.type.size > self.MAX_EVAL_ELEMENTS:
                return None
            out = node.op.reference(args, node.attrs)
            if isinstance(out, tuple):
                return tuple(np.asarray(v) for v in out)
            return np.asarray(out)
        return None

    # -- errors ----------------------------------------------------------------------------

    def where(self, node: NodeView | None = None) -> str:
        """'node ... in graph ...' for messages (the current node if ``node`` is None)."""
        node = node or self.node
        graph = f" in graph '{self.graph_name}'" if self.graph_name else ""
        if node is None:
            return f"ONNX import{graph}"
        return f"node '{node.name}' ({node.op_type}, opset {node.opset}){graph}"

    def fail(self, node: NodeView | None, msg: str) -> NoReturn:
        """Raise a FrontendError about ``node`` (the current node if None)."""
        raise FrontendError(f"{self.where(node)}: {msg}")

    def opset(self, domain: str = "") -> int:
        """The opset version the model imports for ``domain`` (0 if not imported)."""
        key = "" if domain == "ai.onnx" else domain
        return self.opsets.get(key, 0)

    # -- folding ---------------------------------------------------------------------------

    #: a fold may always produce this many elements; beyond, no more than its inputs hold.
    FOLD_MIN_ELEMENTS = 1 << 16

    def fold(self, root: Expr) -> Expr:
        """``root`` with every call whose arguments are all Constants replaced by its value.

        Only nodes not seen by an earlier ``fold`` are visited, so folding each node's
        outputs as they are produced costs linear time over the whole import. Folds that
        would materialise a tensor much larger than their inputs (a broadcast of a scalar
        to an activation shape) are skipped. Initializer variables are not folded: they
        stay parameters.
        """
        for node in _unseen_post_order(root, self._folded):
            self._folded[id(node)] = (node, self._fold_one(node))
        return self._folded[id(root)][1]

    def _new(self, expr: Expr) -> Expr:
        return self._folded[id(expr)][1]

    def _fold_one(self, node: Expr) -> Expr:
        if isinstance(node, Call):
            args = tuple(self._new(a) for a in node.args)
            if any(a is not b for a, b in zip(args, node.args, strict=True)):
                node = Call(node.op, args, node.attrs, name=node.name)
            value = self._fold_call(node)
            if isinstance(value, np.ndarray):
                return Constant(value)
            return node
        if isinstance(node, TupleGetItem):
            tup = self._new(node.tuple_value)
            if isinstance(tup, Tuple):
                return tup.fields[node.index]
            if isinstance(tup, Call):
                value = self._fold_call(tup)
                if isinstance(value, tuple):
                    return Constant(np.asarray(value[node.index]))
            return node if tup is node.tuple_value else TupleGetItem(tup, node.index)
        if isinstance(node, Tuple):
            fields = tuple(self._new(f) for f in node.fields)
            if any(a is not b for a, b in zip(fields, node.fields, strict=True)):
                return Tuple(fields)
        return node

    def _fold_call(self, node: Call) -> np.ndarray | tuple[Any, ...] | None:
        """The value of a call over Constants when folding it is worthwhile, else None."""
        if not isinstance(node.op, OpDef) or not all(isinstance(a, Constant) for a in node.args):
            return None
        if not node.op.pure:  # seeded random generators run at run time
            return None
        in_size = sum(a.tensor_type.size for a in node.args)
        limit = max(self.FOLD_MIN_ELEMENTS, in_size)
        types = node.type.fields if isinstance(node.type, TupleType) else (node.type,)
        if any(not isinstance(t, TensorType) or t.size > limit for t in types):
            return None
        value = self._static_value(node)
        if value is None:
            return None
        checked = _matches(value, node.type)
        if not checked:
            where = f" (node '{node.name}')" if node.name else ""
            raise FrontendError(
                f"constant folding of op '{node.op.name}'{where}: its reference produced a "
                f"value that does not match its type {node.type}; this is an ember bug"
            )
        return value


def _matches(value: Any, ty: Any) -> bool:
    """True when a numpy value (or tuple of them) has exactly the static type ``ty``."""
    if isinstance(ty, TupleType):
        return isinstance(value, tuple) and all(
            _matches(v, t) for v, t in zip(value, ty.fields, strict=True)
        )
    arr = np.asarray(value)
    return isinstance(ty, TensorType) and arr.shape == ty.shape and arr.dtype.name == ty.dtype


def _unseen_post_order(root: Expr, memo: Mapping[int, tuple[Expr, Any]]) -> list[Expr]:
    """Nodes reachable from ``root`` that ``memo`` does not hold yet, children first.

    The walk does not enter nodes already in ``memo``, so repeated calls over a growing
    graph visit each node once in total. Iterative: graph depth does not matter.
    """

    def seen(node: Expr) -> bool:
        hit = memo.get(id(node))
        return hit is not None and hit[0] is node

    order: list[Expr] = []
    done: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done or seen(node):
            continue
        if expanded:
            done.add(id(node))
            order.append(node)
            continue
        stack.append((node, True))
        for child in reversed(children(node)):
            if id(child) not in done and not seen(child):
                stack.append((child, False))
    return order
