"""Structural equality and hashing of loop IR up to renaming of variables and buffers.

Both walk a node in one fixed order and turn it into a token stream in which each variable
and buffer is replaced by the index of its first appearance; two nodes are structurally
equal exactly when their streams are equal, and the hash is a SHA-256 of the stream, so it
is stable across processes (no dependence on ``PYTHONHASHSEED``).
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import fields
from typing import Any

from ember.tir.buffer import Buffer
from ember.tir.expr import PrimExpr, Var
from ember.tir.stmt import PrimFunc, Stmt


class _Tokenizer:
    def __init__(self, map_names: bool) -> None:
        self.vars: dict[int, int] = {}
        self.bufs: dict[int, int] = {}
        self.out: list[Any] = []
        self.map_names = map_names
        self._keep: list[Any] = []

    def node(self, n: Any) -> None:
        out = self.out
        if isinstance(n, Var):
            if id(n) not in self.vars:
                self.vars[id(n)] = len(self.vars)
                self._keep.append(n)
                out.append(("defvar", n.dtype) if self.map_names else ("defvar", n.dtype, n.name))
            out.append(("var", self.vars[id(n)]))
            return
        if isinstance(n, Buffer):
            self.buffer(n)
            return
        if isinstance(n, PrimExpr | Stmt | PrimFunc):
            out.append(type(n).__name__)
            for f in fields(n):  # type: ignore[arg-type]
                if f.name == "name" and isinstance(n, PrimFunc) and self.map_names:
                    continue
                self.value(getattr(n, f.name))
            out.append(")")
            return
        self.value(n)

    def buffer(self, b: Buffer) -> None:
        if id(b) in self.bufs:
            self.out.append(("buf", self.bufs[id(b)]))
            return
        self.bufs[id(b)] = len(self.bufs)
        self._keep.append(b)
        self.out.append(("defbuf", b.dtype, b.scope, b.align, len(b.shape), len(b.strides)))
        if not self.map_names:
            self.out.append(b.name)
        for e in (*b.shape, *b.strides, b.elem_offset, b.data):
            self.node(e)

    def value(self, v: Any) -> None:
        if isinstance(v, PrimExpr | Stmt | Buffer | PrimFunc):
            self.node(v)
        elif isinstance(v, tuple | list):
            self.out.append(("seq", len(v)))
            for x in v:
                self.value(x)
        elif isinstance(v, dict):
            self.out.append(("dict", len(v)))
            for k in sorted(v, key=str):
                self.out.append(str(k))
                self.value(v[k])
        elif isinstance(v, enum.Enum):
            self.out.append(("enum", v.value))
        elif v is None or isinstance(v, bool | int | float | str):
            self.out.append((type(v).__name__, v))
        else:
            self.out.append(("repr", repr(v)))


def _tokens(node: Any, map_names: bool = True) -> list[Any]:
    t = _Tokenizer(map_names)
    t.node(node)
    return t.out


def structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> bool:
    """True if a and b are the same IR up to a consistent renaming of vars and buffers.

    With ``map_free_vars=False``, names of variables and buffers must match as well.
    """
    return _tokens(a, map_free_vars) == _tokens(b, map_free_vars)


def structural_hash(node: Any) -> int:
    """A deterministic 63-bit hash consistent with ``structural_equal``."""
    digest = hashlib.sha256(repr(_tokens(node)).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1
