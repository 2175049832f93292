"""Elementwise and broadcasting ops: relu and friends, arithmetic, comparisons, logic.

Unary ops are a table from the graph-IR op name to a function of one scalar expression
(and the attributes); binary ops broadcast their operands like numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import load_broadcast, out_tensor_type, scalar
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, te

UnaryFn = Callable[[PrimExpr, Attrs], PrimExpr]
BinaryFn = Callable[[PrimExpr, PrimExpr], PrimExpr]


def _relu(x: PrimExpr, attrs: Attrs) -> PrimExpr:
    return tir.max(x, scalar(0, x.dtype))


UNARY: dict[str, UnaryFn] = {
    "relu": _relu,
}

BINARY: dict[str, BinaryFn] = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "maximum": lambda a, b: tir.max(a, b),
    "minimum": lambda a, b: tir.min(a, b),
}


def _unary_compute(name: str, fn: UnaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        x = inputs[0]
        ty = out_tensor_type(out_type)
        return te.compute(ty.shape, lambda *i: fn(x[i] if i else x[()], attrs), name)

    register_compute(name)(compute)


def _binary_compute(name: str, fn: BinaryFn) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        a, b = inputs
        ty = out_tensor_type(out_type)

        def body(*i: Any) -> PrimExpr:
            return fn(load_broadcast(a, i), load_broadcast(b, i))

        return te.compute(ty.shape, body, name)

    register_compute(name)(compute)


for _name, _fn in UNARY.items():
    _unary_compute(_name, _fn)
for _bname, _bfn in BINARY.items():
    _binary_compute(_bname, _bfn)
