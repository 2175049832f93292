"""einsum as one generic compute: each output letter is a data axis, each contracted letter
(and the ellipsis dims when the output drops them) a reduce axis, and the body is the
product of the operands read at those indices (a repeated letter reads a diagonal; an
ellipsis dim of size 1 broadcasts)."""

from __future__ import annotations

from typing import Any

from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.ops.einsum import parse_equation
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.nn_common import check_dtype, prod_expr
from ember.ops.nn_schedule import schedule_anchor
from ember.ops.registry import register_compute, register_schedule
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
