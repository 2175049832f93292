"""Elementwise chains between 8-bit tensors as 256-entry tables (part of fuse_qdq).

A QDQ model computes what has no integer kernel in float between a ``dequantize`` and a
``quantize``: BERT's GELU (``dequantize -> div -> erf -> add -> mul -> mul``, with a
quantize/dequantize pair after every step), and the Q/DQ pairs its quantizer leaves around
every Reshape and Transpose. When such a chain ends in a ``quantize`` and reads one 8-bit
tensor ``x`` (every other operand a one-element constant, or computed from such constants
only, as the quantizer's dequantized scalar weights; the ops elementwise, or reshapes
and transposes that only move elements), its output element is a function of one byte of
``x``: the chain is evaluated once at build time on the 256 byte values (the ops' numpy
references) and becomes ``quantized_table_int8(x, table)`` (one C kernel: 64 lookups in
three AVX512_VBMI instructions) under the same moves, or just the moves
when the table is the identity (a quantize of the dequantize with the same parameters).

The table equals the float chain's value wherever the compiled float kernels agree with
the references (they are both float32, as onnxruntime's own float kernels are; a value
landing exactly on a rounding boundary may move by one step)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call, children
from ember.ir.op import OpDef, OpPattern

_8BIT = ("int8", "uint8")
#: ops that move elements without computing (the table commutes with them).
_MOVES = ("reshape", "transpose")


def _op(node: Expr) -> OpDef | None:
    return node.op if isinstance(node, Call) and isinstance(node.op, OpDef) else None


def _scalar(expr: Expr) -> np.ndarray | None:
    if isinstance(expr, Constant) and np.asarray(expr.data).size == 1:
        return np.asarray(expr.data).reshape(())
    return None


def _is_table(node: Expr) -> bool:
    """A ``quantized_table_int8`` this pass made (composed, not a leaf); or a
    ``quantized_add``/``quantized_mul`` of one byte (one operand a one-element constant, or
    both functions of the same tensor), which fuse_qdq makes before the tables
    (onnxruntime's QLinearAdd/QLinearMul arithmetic, which the table then computes through
    the op's reference)."""
    op = _op(node)
    if op is not None and op.name == "quantized_table_int8":
        return True
    if op is not None and op.name in ("quantized_add", "quantized_mul"):
        return isinstance(node, Call) and _chain(node) is not None  # one byte: x * sigmoid(x)
    return False


def _chain(root: Call) -> tuple[list[Expr], Expr] | None:
    """(the chain's nodes, children first; its one 8-bit non-constant input), or None.
    The chain is everything elementwise (or a move, or a table) above ``root`` up to the
    first 8-bit tensors, which must all be one node."""
    nodes: dict[int, Expr] = {}
    leaf: Expr | None = None
    stack: list[Expr] = [root]
    while stack:
        node = stack.pop()
        if id(node) in nodes or node is leaf:
            continue
        op = _op(node)
        table = node is not root and _is_table(node)
        if not table and node is not root and node.tensor_type.dtype in _8BIT:
            inside = False
        else:
            inside = op is not None and (
                table or op.pattern <= OpPattern.BROADCAST or op.name in _MOVES
            )
        if not inside:
            if leaf is not None:
                return None
            leaf = node
            continue
        nodes[id(node)] = node
        if op is not None and op.name in _MOVES and len(children(node)) != 1:
            return None
        entries = op is not None and op.name == "quantized_table_int8"
        for i, arg in enumerate(children(node)):
            if isinstance(arg, Constant):
                if np.asarray(arg.data).size != 1 and not (entries and i == 1):
                    return None
                continue
            stack.append(arg)
    if leaf is None or leaf.tensor_type.dtype not in _8BIT:
        return None
    return _post_order(root, nodes), leaf


def _post_order(root: Expr, nodes: Mapping[int, Expr]) -> list[Expr]:
    out: list[Expr] = []
    seen: set[int] = set()

    def visit(node: Expr) -> None:
        if id(node) in seen or id(node) not in nodes:
            return
        seen.add(id(node))
        for arg in children(node):
            visit(arg)
        out.append(node)

    visit(root)
    return out


def _table(order: list[Expr], leaf: Expr) -> np.ndarray | None:
    """The chain's output for each of the 256 values of ``leaf``'s type (in byte order)."""
    values: dict[int, np.ndarray] = {id(leaf): np.arange(256, dtype=np.uint8).view(
        leaf.tensor_type.dtype
    )}  # fmt: skip
    for node in order:
        op = _op(node)
        assert op is not None
        if op.name in _MOVES:
            values[id(node)] = values[id(node.args[0])]  # type: ignore[attr-defined]
            continue
        args = []
        for a in children(node):
            s = _scalar(a)
            if s is None and isinstance(a, Constant):
                s = np.asarray(a.data)
            args.append(values[id(a)] if s is None else s)
        if op.reference is None:
            return None
        out = np.asarray(op.reference(args, node.attrs))  # type: ignore[attr-defined]
        if out.size == 1:  # computed from constants only (a dequantized scalar weight)
            values[id(node)] = out.reshape(())
            continue
        if out.size != 256:
            return None
        values[id(node)] = out.reshape(256)
    return values[id(order[-1])]


def lut_chain(root: Call) -> Expr | None:
    """The table form of the elementwise chain ending at ``quantize`` node ``root`` (its
    arguments already rewritten: tables of the chains below it are composed)."""
    if root.tensor_type.dtype not in _8BIT:
        return None
    found = _chain(root)
    if found is None:
        return None
    order, leaf = found
    computes = [n for n in order if _op(n).name not in _MOVES]  # type: ignore[union-attr]
    lone = [_op(n).name for n in computes] in (["quantized_add"], ["quantized_mul"])  # type: ignore[union-attr]
    if len(computes) < 2 and not lone:  # a lone quantize of a dequantize: nothing to gain
        return None
    moves = [n for n in order if _op(n).name in _MOVES]  # type: ignore[union-attr]
    on_path = _single_path(root, leaf, moves)
    if on_path is None:
        return None
    table = _table(order, leaf)
    if table is None or table.dtype != np.dtype(root.tensor_type.dtype):
        return None
    x = leaf
    identity = leaf.tensor_type.dtype == root.tensor_type.dtype and np.array_equal(
        table, np.arange(256, dtype=np.uint8).view(table.dtype)
    )
    out: Expr = x
    if not identity:
        out = call("quantized_table_int8", x, Constant(table))
    for move in on_path:
        out = call(_op(move).name, out, **dict(move.attrs))  # type: ignore[attr-defined, union-attr]
    if tuple(out.tensor_type.shape) != tuple(root.tensor_type.shape):
        return None  # a one-element constant of a higher rank broadcast the chain
    return out


def _single_path(root: Expr, leaf: Expr, moves: list[Expr]) -> list[Expr] | None:
    """The moves from ``leaf`` up to ``root`` when every path between them takes the same
    ones in the same order (else the table cannot be moved once), leaf side first."""
    if not moves:
        return []
    paths: list[list[Expr]] = []

    def walk(node: Expr, trail: list[Expr]) -> None:
        if node is leaf:
            paths.append(trail)
            return
        op = _op(node)
        step = trail + [node] if op is not None and op.name in _MOVES else trail
        for arg in children(node):
            if not isinstance(arg, Constant):
                walk(arg, step)
        if len(paths) > 64:
            raise _TooMany

    try:
        walk(root, [])
    except _TooMany:
        return None
    first = [id(n) for n in paths[0]]
    if any([id(n) for n in p] != first for p in paths):
        return None
    return list(reversed(paths[0]))


class _TooMany(Exception):
    """Too many paths through a chain to compare."""
