"""Structural equality and hashing of graph IR expressions, functions and modules.

Two expressions are structurally equal when their graphs are isomorphic: a one-to-one
mapping of calls, tuples and variables exists under which ops, attributes, types and
arguments agree. Constants compare by value (dtype, shape, bit pattern), so two separate
constant nodes with equal data match; shared sub-graphs must be shared on both sides.
Variables bound by a Function match by position; free variables must be the same object
unless ``map_free_vars=True``.

:func:`structural_hash` is consistent with equality (equal implies equal hashes) and
deterministic across processes (sha-based, no ``id`` and no Python string hashing).
Both walk the graph iteratively, so deep graphs are fine.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from ember.errors import IRError
from ember.ir.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var, post_order
from ember.ir.module import IRModule
from ember.ir.printer import format_value


def data_bytes(data: np.ndarray) -> memoryview:
    """The raw bytes of an array (no copy when it is C-contiguous, as constants are)."""
    flat = np.ascontiguousarray(data).reshape(-1)
    if flat.dtype.kind == "O":  # strings: their UTF-8 bytes, each NUL-terminated
        return memoryview(b"".join(str(s).encode("utf-8", "surrogateescape") + b"\0" for s in flat))
    return memoryview(flat.view(np.uint8).data)


def constants_equal(a: Constant, b: Constant) -> bool:
    """True when two constants have the same dtype, shape and bit pattern."""
    if a is b:
        return True
    if a.type != b.type:
        return False
    return bool(np.array_equal(data_bytes(a.data), data_bytes(b.data)))


def structural_equal(a: Expr | IRModule, b: Expr | IRModule, map_free_vars: bool = False) -> bool:
    """True when ``a`` and ``b`` are structurally equal (see the module docstring)."""
    if isinstance(a, IRModule) or isinstance(b, IRModule):
        if not (isinstance(a, IRModule) and isinstance(b, IRModule)):
            return False
        if list(a.functions) != list(b.functions) or dict(a.attrs) != dict(b.attrs):
            return False
        return all(
            _Matcher(map_free_vars).match(a.functions[k], b.functions[k]) for k in a.functions
        )
    return _Matcher(map_free_vars).match(a, b)


class _Matcher:
    """One isomorphism check: the node mapping in both directions."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.fwd: dict[int, Expr] = {}
        self.bwd: dict[int, Expr] = {}

    def bind(self, x: Expr, y: Expr) -> bool:
        """Record ``x <-> y``; False if either side is already mapped elsewhere."""
        if id(x) in self.fwd:
            return self.fwd[id(x)] is y
        if id(y) in self.bwd:
            return False
        self.fwd[id(x)] = y
        self.bwd[id(y)] = x
        return True

    def match(self, a: Expr, b: Expr) -> bool:
        stack: list[tuple[Expr, Expr]] = [(a, b)]
        while stack:
            x, y = stack.pop()
            if isinstance(x, Constant):
                if not (isinstance(y, Constant) and constants_equal(x, y)):
                    return False
                continue
            if id(x) in self.fwd:
                if self.fwd[id(x)] is not y:
                    return False
                continue
            if type(x) is not type(y) or x.type != y.type:
                return False
            if isinstance(x, Var):
                # bound variables were mapped when their Function was matched
                if not self.map_free_vars and x is not y:
                    return False
                if not self.bind(x, y):
                    return False
                continue
            pairs = self.local_pairs(x, y)
            if pairs is None or not self.bind(x, y):
                return False
            stack.extend(reversed(pairs))
        return True

    def local_pairs(self, x: Expr, y: Expr) -> list[tuple[Expr, Expr]] | None:
        """Compare the node-local parts of ``x`` and ``y``; return their child pairs."""
        if isinstance(x, Call):
            assert isinstance(y, Call)
            if x.attrs != y.attrs or len(x.args) != len(y.args):
                return None
            pairs: list[tuple[Expr, Expr]] = list(zip(x.args, y.args, strict=True))
            xop, yop = x.op, y.op
            if isinstance(xop, Function) and isinstance(yop, Function):
                pairs.insert(0, (xop, yop))  # callees match like any other node
                return pairs
            if isinstance(xop, Function) or isinstance(yop, Function) or xop.name != yop.name:
                return None
            return pairs
        if isinstance(x, Tuple):
            assert isinstance(y, Tuple)
            if len(x.fields) != len(y.fields):
                return None
            return list(zip(x.fields, y.fields, strict=True))
        if isinstance(x, TupleGetItem):
            assert isinstance(y, TupleGetItem)
            if x.index != y.index:
                return None
            return [(x.tuple_value, y.tuple_value)]
        if isinstance(x, Function):
            assert isinstance(y, Function)
            if x.attrs != y.attrs or len(x.params) != len(y.params):
                return None
            for p, q in zip(x.params, y.params, strict=True):
                if p.type != q.type or not self.bind(p, q):
                    return None
            return [(x.body, y.body)]
        raise IRError(f"structural_equal: unknown expression kind {type(x).__name__}")


def _digest(*parts: bytes | memoryview) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(struct.pack("<Q", memoryview(part).nbytes))
        h.update(part)
    return h.digest()


def structural_hash(node: Expr | IRModule) -> int:
    """A deterministic 64-bit hash consistent with :func:`structural_equal`."""
    if isinstance(node, IRModule):
        memo: dict[int, bytes] = {}
        parts = [name.encode() + _expr_digest(fn, memo) for name, fn in node.functions.items()]
        return int.from_bytes(_digest(b"module", *parts)[:8], "little")
    return int.from_bytes(_expr_digest(node)[:8], "little")


def _expr_digest(root: Expr, memo: dict[int, bytes] | None = None) -> bytes:
    """Digest of ``root``; ``memo`` caches the digests of called functions by identity."""
    memo = {} if memo is None else memo
    order = post_order(root)
    position: dict[int, int] = {}
    for n in order:
        if isinstance(n, Function):
            for i, p in enumerate(n.params):
                position[id(p)] = i
    free_index: dict[int, int] = {}
    digests: dict[int, bytes] = {}
    for n in order:
        ty = str(n.type).encode()
        if isinstance(n, Var):
            if id(n) in position:
                d = _digest(b"var", ty, str(position[id(n)]).encode())
            else:
                k = free_index.setdefault(id(n), len(free_index))
                d = _digest(b"free", ty, str(k).encode())
        elif isinstance(n, Constant):
            d = _digest(b"const", ty, data_bytes(n.data))
        elif isinstance(n, Call):
            attrs = ",".join(f"{k}={format_value(v)}" for k, v in n.attrs.items())
            kids = [digests[id(a)] for a in n.args]
            if isinstance(n.op, Function):
                if id(n.op) not in memo:
                    memo[id(n.op)] = _expr_digest(n.op, memo)
                callee = b"fn:" + memo[id(n.op)]
            else:
                callee = n.op.name.encode()
            d = _digest(b"call", callee, attrs.encode(), ty, *kids)
        elif isinstance(n, Tuple):
            d = _digest(b"tuple", ty, *(digests[id(f)] for f in n.fields))
        elif isinstance(n, TupleGetItem):
            d = _digest(b"get", str(n.index).encode(), digests[id(n.tuple_value)])
        elif isinstance(n, Function):
            attrs = ",".join(f"{k}={format_value(v)}" for k, v in n.attrs.items())
            ptys = ",".join(str(p.type) for p in n.params)
            d = _digest(b"fn", attrs.encode(), ptys.encode(), digests[id(n.body)])
        else:
            raise IRError(f"structural_hash: unknown expression kind {type(n).__name__}")
        digests[id(n)] = d
    return digests[id(root)]
