"""Tensors of the compute DSL: placeholders, computes, reduce axes and reductions.

Example::

    A = placeholder((n, k), "float32", "A")
    B = placeholder((k, m), "float32", "B")
    r = reduce_axis(k, "r")
    C = compute((n, m), lambda i, j: sum(A[i, r] * B[r, j], axis=r), "C")
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ember.errors import CompileError, IRError
from ember.tir import dtype as dt
from ember.tir.expr import ExprLike, FloatImm, IntImm, PrimExpr, Var, const, convert
from ember.tir.functor import exceeds

if TYPE_CHECKING:
    from ember.tir.buffer import Buffer
    from ember.tir.stmt import Stmt

#: the deepest (and largest) expression one compute may have: the recursive passes,
#: printer and code generator stay far from Python's recursion limit below it, with room
#: for the inlined producers (``te.inline.MAX_INLINE_DEPTH``) on top
MAX_COMPUTE_DEPTH = 96
MAX_COMPUTE_NODES = 20_000


@dataclass(frozen=True, eq=False)
class IterVar:
    """An iteration axis: a variable ranging over [min, min + extent), data-parallel or reduce."""

    var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: str = "data_par"  # "data_par" | "reduce"

    def __hash__(self) -> int:
        return id(self)

    @property
    def name(self) -> str:
        """The variable's name."""
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.extent}, {self.kind})"

    def as_expr(self) -> PrimExpr:
        """The loop variable, so an IterVar can be used wherever an expression is expected."""
        return self.var

    # Arithmetic on an IterVar is arithmetic on its variable (``k * 2 + 1``).
    def __add__(self, other: ExprLike) -> PrimExpr:
        return self.var + other

    def __radd__(self, other: ExprLike) -> PrimExpr:
        return other + self.var

    def __sub__(self, other: ExprLike) -> PrimExpr:
        return self.var - other

    def __rsub__(self, other: ExprLike) -> PrimExpr:
        return other - self.var

    def __mul__(self, other: ExprLike) -> PrimExpr:
        return self.var * other

    def __rmul__(self, other: ExprLike) -> PrimExpr:
        return other * self.var

    def __floordiv__(self, other: ExprLike) -> PrimExpr:
        return self.var // other

    def __rfloordiv__(self, other: ExprLike) -> PrimExpr:
        return other // self.var

    def __mod__(self, other: ExprLike) -> PrimExpr:
        return self.var % other

    def __rmod__(self, other: ExprLike) -> PrimExpr:
        return other % self.var

    def __neg__(self) -> PrimExpr:
        return -self.var

    def __lt__(self, other: ExprLike) -> PrimExpr:
        return self.var < other

    def __le__(self, other: ExprLike) -> PrimExpr:
        return self.var <= other

    def __gt__(self, other: ExprLike) -> PrimExpr:
        return self.var > other

    def __ge__(self, other: ExprLike) -> PrimExpr:
        return self.var >= other


def reduce_axis(extent: ExprLike | tuple[ExprLike, ExprLike], name: str = "rv") -> IterVar:
    """A reduction axis over [0, extent) or over [lo, hi) when given a pair."""
    if isinstance(extent, tuple):
        lo, hi = convert(extent[0]), convert(extent[1])
        return IterVar(Var(name, lo.dtype), lo, _simplify(hi - lo), "reduce")
    ext = convert(extent)
    return IterVar(Var(name, ext.dtype), const(0, ext.dtype), ext, "reduce")


def _simplify(e: PrimExpr) -> PrimExpr:
    from ember.tir.simplify import simplify

    return simplify(e)  # type: ignore[no-any-return]


class Operation:
    """Base of the operations that produce tensors."""

    name: str

    def input_tensors(self) -> list[Tensor]:
        """The tensors this operation reads."""
        return []


@dataclass(frozen=True, eq=False)
class PlaceholderOp(Operation):
    """An input tensor with no computation."""

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: str


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    """out[axis] = body, where body may be a Reduce over reduce_axis."""

    name: str
    axis: tuple[IterVar, ...]
    body: PrimExpr
    tag: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        """The reduction axes (empty unless the body is a Reduce)."""
        return self.body.axis if isinstance(self.body, Reduce) else ()

    def input_tensors(self) -> list[Tensor]:
        """The tensors read by the body, in first-use order."""
        from ember.tir.functor import post_order_visit

        seen: list[Tensor] = []

        def fn(n: Any) -> None:
            if isinstance(n, TensorLoad) and n.tensor not in seen:
                seen.append(n.tensor)

        post_order_visit(self.body, fn)
        return seen


@dataclass(frozen=True, eq=False)
class Tensor:
    """The output of an operation; index it to read elements inside a compute."""

    shape: tuple[PrimExpr, ...]
    dtype: str
    op: Operation
    name: str
    value_index: int = 0

    def __hash__(self) -> int:
        return id(self)

    def __getitem__(self, index: ExprLike | tuple[ExprLike, ...]) -> PrimExpr:
        idx = index if isinstance(index, tuple) else (index,)
        if len(idx) != len(self.shape):
            raise IRError(
                f"tensor {self.name} has {len(self.shape)} dims but was indexed with {len(idx)}"
            )
        return TensorLoad(self, tuple(convert(i) for i in idx), self.dtype)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {tuple(str(s) for s in self.shape)}, {self.dtype})"


@dataclass(frozen=True, eq=False)
class ExternOp(Operation):
    """Outputs written by a hand-written loop-IR statement (often a call_extern).

    ``body`` refers to ``input_buffers`` and ``output_buffers``; lowering binds them to
    the real buffers of ``inputs`` and ``outputs``.
    """

    name: str
    inputs: tuple[Tensor, ...]
    input_buffers: tuple[Buffer, ...]
    output_buffers: tuple[Buffer, ...]
    body: Stmt
    tag: str = ""
    outputs: list[Tensor] = field(default_factory=list)

    def input_tensors(self) -> list[Tensor]:
        """The tensors read by the body, in the order given."""
        return list(self.inputs)


@dataclass(frozen=True)
class TensorLoad(PrimExpr):
    """tensor[indices] inside a compute body (becomes a BufferLoad when lowered)."""

    tensor: Tensor
    indices: tuple[PrimExpr, ...]
    dtype: str


@dataclass(frozen=True)
class Reduce(PrimExpr):
    """combiner(source over axis), starting from init; combiner is sum, max or min."""

    combiner: str
    source: PrimExpr
    axis: tuple[IterVar, ...]
    init: PrimExpr | None = None
    dtype: str = ""

    def __post_init__(self) -> None:
        if not self.dtype:
            object.__setattr__(self, "dtype", self.source.dtype)

    def identity(self) -> PrimExpr:
        """The combiner's identity (used when no init is given)."""
        d = self.dtype
        if self.combiner == "sum":
            return const(0, d)
        big = math.inf if dt.is_float(d) else None
        if big is not None:
            return FloatImm(d, -big if self.combiner == "max" else big)
        bits = dt.bits_of(d)
        lo, hi = (
            (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dt.is_int(d) else (0, (1 << bits) - 1)
        )
        return IntImm(d, lo if self.combiner == "max" else hi)


def extern(
    shape: Sequence[ExprLike] | Sequence[Sequence[ExprLike]],
    inputs: Sequence[Tensor],
    fcompute: Callable[[list[Buffer], list[Buffer]], Stmt | PrimExpr],
    name: str = "extern",
    dtype: str | Sequence[str] | None = None,
    tag: str = "",
) -> Tensor | list[Tensor]:
    """Tensor(s) computed by ``fcompute(input_buffers, output_buffers) -> Stmt``.

    Use it for what compute cannot say: calls into C libraries (call_extern), sorting,
    scans. One shape gives one Tensor; a list of shapes gives a list. ``dtype`` defaults
    to the first input's.
    """
    from ember.tir.buffer import decl_buffer
    from ember.tir.stmt import Evaluate

    multi = len(shape) > 0 and isinstance(shape[0], list | tuple)
    shapes = [_dims(s) for s in shape] if multi else [_dims(shape)]  # type: ignore[arg-type]
    if dtype is None:
        if not inputs:
            raise IRError(f"extern {name}: give dtype= when there are no inputs")
        dtypes = [inputs[0].dtype] * len(shapes)
    elif isinstance(dtype, str):
        dtypes = [dtype] * len(shapes)
    else:
        dtypes = list(dtype)
    if len(dtypes) != len(shapes):
        raise IRError(f"extern {name}: {len(dtypes)} dtypes for {len(shapes)} outputs")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise IRError(f"extern {name}: inputs must be Tensors, got {type(t).__name__}")
    in_bufs = [decl_buffer(t.shape, t.dtype, f"{name}_in{k}") for k, t in enumerate(inputs)]
    out_bufs = [
        decl_buffer(s, d, f"{name}_out{k}")
        for k, (s, d) in enumerate(zip(shapes, dtypes, strict=True))
    ]
    body = fcompute(in_bufs, out_bufs)
    if isinstance(body, PrimExpr):
        body = Evaluate(body)
    from ember.tir.stmt import Stmt as _Stmt

    if not isinstance(body, _Stmt):
        raise IRError(f"extern {name}: fcompute must return a loop-IR statement, got {body!r}")
    op = ExternOp(name, tuple(inputs), tuple(in_bufs), tuple(out_bufs), body, tag)
    suffix = [f"_{k}" if multi else "" for k in range(len(shapes))]
    for k, (s, d) in enumerate(zip(shapes, dtypes, strict=True)):
        op.outputs.append(Tensor(s, d, op, name + suffix[k], k))
    return list(op.outputs) if multi else op.outputs[0]


def _dims(shape: Sequence[ExprLike]) -> tuple[PrimExpr, ...]:
    if isinstance(shape, int | PrimExpr):
        shape = (shape,)
    dims = tuple(convert(s) for s in shape)
    for d in dims:
        if not dt.is_integral(d.dtype):
            raise IRError(f"tensor extent {d} must be an integer expression, got {d.dtype}")
    return dims


def placeholder(
    shape: Sequence[ExprLike], dtype: str = "float32", name: str = "placeholder"
) -> Tensor:
    """An input tensor of the given shape and dtype."""
    dt.check_dtype(dtype)
    dims = _dims(shape)
    return Tensor(dims, dtype, PlaceholderOp(name, dims, dtype), name)


def compute(
    shape: Sequence[ExprLike],
    fcompute: Callable[..., ExprLike],
    name: str = "compute",
    tag: str = "",
    attrs: dict[str, Any] | None = None,
) -> Tensor:
    """A tensor whose element at each index is ``fcompute(*index)``."""
    dims = _dims(shape)
    names = _arg_names(fcompute, len(dims))
    axis = tuple(
        IterVar(Var(n, d.dtype), const(0, d.dtype), d) for n, d in zip(names, dims, strict=True)
    )
    body = convert(fcompute(*(iv.var for iv in axis)))
    if exceeds(body, MAX_COMPUTE_DEPTH, MAX_COMPUTE_NODES):
        raise CompileError(
            f"compute '{name}': its expression is deeper than {MAX_COMPUTE_DEPTH} levels or "
            f"larger than {MAX_COMPUTE_NODES} nodes, more than lowering handles; split the "
            "operator (e.g. a Concat of many inputs into several) or report the model"
        )
    if isinstance(body, Reduce):
        _check_reduce_top(body, name)
    else:
        _check_no_nested_reduce(body, name)
    op = ComputeOp(name, axis, body, tag, dict(attrs or {}))
    return Tensor(dims, body.dtype, op, name)


def _arg_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    plain = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(plain) == n:
        return plain
    if any(p.kind is p.VAR_POSITIONAL for p in params) or not params:
        return [f"i{k}" for k in range(n)]
    raise IRError(
        f"compute: fcompute takes {len(plain)} index arguments but the shape has {n} dims"
    )


def _check_reduce_top(body: Reduce, name: str) -> None:
    _check_no_nested_reduce(body.source, name)


def _check_no_nested_reduce(e: PrimExpr, name: str) -> None:
    from ember.tir.functor import post_order_visit

    def fn(n: Any) -> None:
        if isinstance(n, Reduce):
            raise IRError(
                f"compute {name}: a reduction must be the whole body (e.g. "
                "compute(..., lambda i: sum(A[i, k], axis=k))); split it into two computes"
            )

    post_order_visit(e, fn)


def _reducer(combiner: str) -> Callable[..., Reduce]:
    def make(
        expr: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None
    ) -> Reduce:
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes or any(not isinstance(a, IterVar) or a.kind != "reduce" for a in axes):
            raise IRError(f"{combiner}: axis must be one or more reduce_axis(...) IterVars")
        src = convert(expr)
        init_e = None if init is None else convert(init).astype(src.dtype)
        return Reduce(combiner, src, axes, init_e)

    make.__name__ = combiner
    make.__doc__ = f"The {combiner} of expr over the reduce axes (optionally starting from init)."
    return make


sum = _reducer("sum")  # noqa: A001 - TVM's name
max = _reducer("max")  # noqa: A001 - TVM's name
min = _reducer("min")  # noqa: A001 - TVM's name
