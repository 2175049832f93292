"""Buffers: typed, shaped views of memory that loads and stores address by index.

A Buffer owns a handle variable ``data`` (the C pointer). Its ``strides`` are empty for a
compact row-major layout; ``offset_of`` turns a multi-dimensional index into one flat
element offset, the rule both the C code generator and the interpreter use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ember.errors import IRError
from ember.tir import dtype as dt
from ember.tir.expr import BufferLoad, ExprLike, IntImm, PrimExpr, Var, const, convert

SCOPES = ("global", "local")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A multi-dimensional array: name, shape, dtype, pointer var, optional strides."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str
    data: Var
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr = IntImm("int32", 0)
    align: int = 64
    scope: str = "global"

    def __post_init__(self) -> None:
        dt.check_dtype(self.dtype)
        if self.scope not in SCOPES:
            raise IRError(f"buffer {self.name}: unknown scope {self.scope!r}; use one of {SCOPES}")
        if self.strides and len(self.strides) != len(self.shape):
            raise IRError(
                f"buffer {self.name}: {len(self.strides)} strides for {len(self.shape)} dims"
            )
        if self.data.dtype != "handle":
            raise IRError(f"buffer {self.name}: data var must have dtype 'handle'")

    def __hash__(self) -> int:
        return id(self)

    def __getitem__(self, index: ExprLike | tuple[ExprLike, ...]) -> PrimExpr:
        idx = index if isinstance(index, tuple) else (index,)
        return self.load(*idx)

    def load(self, *indices: ExprLike) -> BufferLoad:
        """The element at ``indices`` (one index per dimension)."""
        if len(indices) != len(self.shape):
            raise IRError(
                f"buffer {self.name} has {len(self.shape)} dims but was indexed with "
                f"{len(indices)} indices"
            )
        return BufferLoad(self, tuple(convert(i) for i in indices))

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def const_shape(self) -> tuple[int, ...] | None:
        """The shape as Python ints, or None if some extent is symbolic."""
        dims = []
        for s in self.shape:
            if not isinstance(s, IntImm):
                return None
            dims.append(s.value)
        return tuple(dims)

    def num_elements(self) -> PrimExpr:
        """The product of the extents."""
        total: PrimExpr = const(1, "int64" if _any_int64(self.shape) else "int32")
        for s in self.shape:
            total = total * s
        from ember.tir.simplify import simplify

        return simplify(total)

    def row_major_strides(self) -> tuple[PrimExpr, ...]:
        """The strides of a compact row-major layout of this shape."""
        out: list[PrimExpr] = []
        acc: PrimExpr = const(1, self.shape[0].dtype if self.shape else "int32")
        for s in reversed(self.shape):
            out.append(acc)
            acc = acc * s
        return tuple(reversed(out))

    def offset_of(self, indices: Sequence[PrimExpr]) -> PrimExpr:
        """The flat element offset of ``indices`` (simplified)."""
        from ember.tir.simplify import simplify

        strides = self.strides or self.row_major_strides()
        total: PrimExpr = self.elem_offset
        for i, s in zip(indices, strides, strict=True):
            total = total + i * s
        return simplify(total)

    def with_name(self, name: str) -> Buffer:
        """A copy sharing nothing but shape and dtype (fresh data var)."""
        return replace(self, name=name, data=Var(name, "handle"))


def _any_int64(exprs: Sequence[PrimExpr]) -> bool:
    return any(e.dtype == "int64" for e in exprs)


def decl_buffer(
    shape: Sequence[ExprLike],
    dtype: str = "float32",
    name: str = "buf",
    strides: Sequence[ExprLike] | None = None,
    scope: str = "global",
    align: int = 64,
) -> Buffer:
    """Declare a new buffer with a fresh data pointer variable."""
    if not name.isidentifier():
        raise IRError(f"buffer name {name!r} is not an identifier; use letters, digits and '_'")
    dims = tuple(convert(s) for s in shape)
    for d in dims:
        if not dt.is_integral(d.dtype):
            raise IRError(f"buffer {name}: extent {d} must be an integer, got {d.dtype}")
    st = tuple(convert(s) for s in strides) if strides else ()
    return Buffer(name, dims, dtype, Var(name, "handle"), st, IntImm("int32", 0), align, scope)
