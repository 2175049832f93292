"""einsum as one generic compute: each output letter is a data axis, each contracted letter
(and the ellipsis dims when the output drops them) a reduce axis, and the body is the
product of the operands read at those indices (a repeated letter reads a diagonal; an
ellipsis dim of size 1 broadcasts).

A two-operand float einsum that is a (batched) matrix product, every letter either shared
by both operands and the output (a batch letter), by both operands only (contracted) or by
one operand and the output, is legalized into transposes, reshapes and one ``nn.matmul``
(einsum_as_matmul), which the tiled product schedule runs: attention's
``bhqd,bhkd->bhqk`` over 8 heads of 128 x 64 took 2.9 ms as the generic compute
(onnxruntime 0.10)."""

from __future__ import annotations

import math
from typing import Any

from ember.errors import CompileError
from ember.ir.expr import Call, Expr, call
from ember.ir.op import Attrs
from ember.ir.ops.einsum import parse_equation
from ember.ir.types import TensorType, Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.nn_common import check_dtype, prod_expr
from ember.ops.nn_schedule import schedule_anchor
from ember.ops.registry import register_compute, register_legalize, register_schedule
from ember.tir import PrimExpr, te
from ember.tir import const as tir_const


class _Operand:
    """One input of the equation: which letter (or ellipsis dim) indexes each of its dims."""

    def __init__(self, term: str, tensor: te.Tensor) -> None:
        self.tensor = tensor
        self.shape = static_shape(tensor)
        named = len(term.replace(".", ""))
        self.n_ell = len(self.shape) - named
        self.dims: list[tuple[str, int]] = []  # (letter, 0) or (".", k-th ellipsis dim)
        for ch in term:
            if ch == ".":
                self.dims.extend((".", k) for k in range(self.n_ell))
            else:
                self.dims.append((ch, 0))

    def sizes(self) -> dict[str, int]:
        """Size of each letter in this operand."""
        return {ch: d for (ch, _), d in zip(self.dims, self.shape, strict=True) if ch != "."}

    def ellipsis_shape(self) -> tuple[int, ...]:
        """The sizes of this operand's ellipsis dims."""
        return tuple(d for (ch, _), d in zip(self.dims, self.shape, strict=True) if ch == ".")

    def load(self, env: dict[str, Any], ell: list[Any]) -> PrimExpr:
        """The operand read at the letters' current values (ellipsis right-aligned)."""
        index = []
        offset = len(ell) - self.n_ell
        for (ch, k), d in zip(self.dims, self.shape, strict=True):
            if ch != ".":
                index.append(env[ch])
            elif d == 1:
                index.append(tir_const(0, "int32"))
            else:
                index.append(ell[offset + k])
        return self.tensor[tuple(index)]


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    return tuple(max(x, y) for x, y in zip(a, b, strict=True))


@register_compute("einsum")
def einsum(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The einsum of the inputs (see the module docstring)."""
    check_dtype("einsum", inputs[0].dtype)
    ty = out_tensor_type(out_type)
    terms, out_term = parse_equation(attrs["equation"], len(inputs))
    operands = [_Operand(t, x) for t, x in zip(terms, inputs, strict=True)]
    sizes: dict[str, int] = {}
    ell_shape: tuple[int, ...] = ()
    for op in operands:
        sizes.update(op.sizes())
        ell_shape = _broadcast(ell_shape, op.ellipsis_shape())
    contracted = [ch for ch in dict.fromkeys("".join(terms)) if ch != "." and ch not in out_term]
    red = {ch: te.reduce_axis(sizes[ch], f"r_{ch}") for ch in contracted}
    red_ell = (
        [] if "." in out_term else [te.reduce_axis(d, f"r_e{k}") for k, d in enumerate(ell_shape)]
    )
    axes = [*red.values(), *red_ell]

    def body(*index: Any) -> PrimExpr:
        env: dict[str, Any] = {ch: r.var for ch, r in red.items()}
        ell: list[Any] = [r.var for r in red_ell]
        pos = 0
        for ch in out_term:
            if ch == ".":
                ell = list(index[pos : pos + len(ell_shape)])
                pos += len(ell_shape)
            else:
                env[ch] = index[pos]
                pos += 1
        value = prod_expr([op.load(env, ell) for op in operands])
        if value is None:
            raise CompileError(f"einsum {attrs['equation']!r} has no operands")
        return te.sum(value, axis=axes) if axes else value

    return te.compute(ty.shape, body, "einsum")


register_schedule("einsum")(schedule_anchor)


@register_legalize("einsum")
def einsum_as_matmul(node: Call) -> Expr:
    """A two-operand float einsum that is a batched matrix product (see the module
    docstring) as ``transpose(reshape(nn.matmul(A', B')))``, A' the first operand's batch,
    free and contracted letters in that order reshaped to (batch..., M, K), B' the second's
    as (batch..., K, N); any other einsum is left to the generic compute."""
    types = [a.type for a in node.args]
    if len(types) != 2 or not all(isinstance(t, TensorType) for t in types):
        return node
    ta, tb = types
    assert isinstance(ta, TensorType) and isinstance(tb, TensorType)
    if ta.dtype != tb.dtype or ta.dtype not in ("float32", "float64"):
        return node
    terms, out = parse_equation(node.attrs["equation"], 2)
    if "." in "".join(terms) + out:
        return node
    a_term, b_term = terms
    if any(len(set(t)) != len(t) for t in (a_term, b_term, out)):
        return node  # diagonals
    batch = [c for c in out if c in a_term and c in b_term]
    contract = [c for c in a_term if c in b_term and c not in out]
    a_free = [c for c in a_term if c not in b_term]
    b_free = [c for c in b_term if c not in a_term]
    if any(c not in out for c in a_free + b_free):
        return node  # a letter summed over one operand alone
    size = {c: int(d) for c, d in zip(a_term + b_term, (*ta.shape, *tb.shape), strict=True)}

    def extent(letters: list[str]) -> int:
        return math.prod(size[c] for c in letters)

    lead = [size[c] for c in batch]
    lhs = _arranged(node.args[0], a_term, batch + a_free + contract)
    lhs = call("reshape", lhs, newshape=(*lead, extent(a_free), extent(contract)))
    rhs = _arranged(node.args[1], b_term, batch + contract + b_free)
    rhs = call("reshape", rhs, newshape=(*lead, extent(contract), extent(b_free)))
    product = call("nn.matmul", lhs, rhs, name=node.name)
    order = batch + a_free + b_free
    result = call("reshape", product, newshape=tuple(size[c] for c in order))
    return _arranged(result, "".join(order), list(out))


def _arranged(x: Expr, term: str, letters: list[str]) -> Expr:
    """``x`` (indexed by ``term``) transposed to the order of ``letters``."""
    axes = tuple(term.index(c) for c in letters)
    return x if axes == tuple(range(len(axes))) else call("transpose", x, axes=axes)
