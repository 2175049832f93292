"""Schedules: how the loops of each compute stage are split, ordered, fused and annotated.

Example::

    s = create_schedule(C)
    io, ii = s[C].split(C.op.axis[0], factor=8)
    s[C].reorder(io, C.op.axis[1], ii)
    s[C].parallel(io)
    s[C].vectorize(ii)
    s[B].compute_inline()
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember.errors import IRError
from ember.tir.expr import ExprLike, IntImm, PrimExpr, Var, const, convert
from ember.tir.simplify import simplify
from ember.tir.stmt import ForKind
from ember.tir.te.tensor import (
    ComputeOp,
    ExternOp,
    IterVar,
    Operation,
    PlaceholderOp,
    Reduce,
    Tensor,
)


@dataclass(frozen=True)
class Split:
    """parent = outer * factor + inner."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: PrimExpr


@dataclass(frozen=True)
class Fuse:
    """fused = outer * extent(inner) + inner."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


class Stage:
    """The schedule of one compute operation."""

    def __init__(self, op: ComputeOp | ExternOp) -> None:
        self.op = op
        axes = [*op.axis, *op.reduce_axis] if isinstance(op, ComputeOp) else []
        self.leaf_iter_vars: list[IterVar] = axes
        self.relations: list[Split | Fuse] = []
        self.kinds: dict[IterVar, ForKind] = {}
        self.inlined = False
        self.attach: tuple[Stage, IterVar] | None = None

    def __repr__(self) -> str:
        return f"Stage({self.op.name}, leaves={[iv.name for iv in self.leaf_iter_vars]})"

    def _leaf(self, iv: IterVar, what: str) -> int:
        if not isinstance(iv, IterVar):
            raise IRError(f"{self.op.name}.{what}: expected an IterVar, got {iv!r}")
        for k, leaf in enumerate(self.leaf_iter_vars):
            if leaf is iv:
                return k
        names = ", ".join(v.name for v in self.leaf_iter_vars)
        raise IRError(
            f"{self.op.name}.{what}: axis '{iv.name}' is not a current loop of this stage "
            f"(current loops: {names}); it may have been split or fused already"
        )

    def split(
        self, parent: IterVar, factor: ExprLike | None = None, nparts: ExprLike | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split ``parent`` into (outer, inner): inner extent ``factor`` or ``nparts`` outer."""
        pos = self._leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise IRError(f"{self.op.name}.split: give exactly one of factor= or nparts=")
        ext = parent.extent
        if factor is not None:
            f = convert(factor).astype(ext.dtype)
            outer_ext = simplify((ext + f - 1) // f)
        else:
            n = convert(nparts).astype(ext.dtype)  # type: ignore[arg-type]
            f = simplify((ext + n - 1) // n)
            outer_ext = n
        if isinstance(f, IntImm) and f.value <= 0:
            raise IRError(f"{self.op.name}.split: factor must be positive, got {f.value}")
        zero = const(0, ext.dtype)
        outer = IterVar(Var(f"{parent.name}_outer", ext.dtype), zero, outer_ext, parent.kind)
        inner = IterVar(Var(f"{parent.name}_inner", ext.dtype), zero, f, parent.kind)
        self.relations.append(Split(parent, outer, inner, f))
        self.leaf_iter_vars[pos : pos + 1] = [outer, inner]
        return outer, inner

    def tile(
        self, x: IterVar, y: IterVar, x_factor: ExprLike, y_factor: ExprLike
    ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split x and y and order the loops as x_outer, y_outer, x_inner, y_inner."""
        xo, xi = self.split(x, factor=x_factor)
        yo, yi = self.split(y, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *ivs: IterVar) -> IterVar:
        """Fuse consecutive loops (outermost first) into one."""
        if len(ivs) < 2:
            if len(ivs) == 1:
                return ivs[0]
            raise IRError(f"{self.op.name}.fuse: needs at least one axis")
        fused = ivs[0]
        for nxt in ivs[1:]:
            fused = self._fuse2(fused, nxt)
        return fused

    def _fuse2(self, outer: IterVar, inner: IterVar) -> IterVar:
        po, pi = self._leaf(outer, "fuse"), self._leaf(inner, "fuse")
        if pi != po + 1:
            raise IRError(
                f"{self.op.name}.fuse: '{outer.name}' and '{inner.name}' are not adjacent loops "
                "(outer first); reorder them first"
            )
        if outer.kind != inner.kind:
            raise IRError(f"{self.op.name}.fuse: cannot fuse a reduction axis with a data axis")
        ext = simplify(outer.extent * inner.extent)
        var = Var(f"{outer.name}_{inner.name}_fused", outer.var.dtype)
        fused = IterVar(var, const(0, outer.var.dtype), ext, outer.kind)
        self.relations.append(Fuse(outer, inner, fused))
        self.leaf_iter_vars[po : pi + 1] = [fused]
        return fused

    def reorder(self, *ivs: IterVar) -> None:
        """Put the given loops in this order, in the positions they currently occupy."""
        positions = sorted(self._leaf(iv, "reorder") for iv in ivs)
        if len(set(positions)) != len(ivs):
            raise IRError(f"{self.op.name}.reorder: an axis is listed twice")
        for pos, iv in zip(positions, ivs, strict=True):
            self.leaf_iter_vars[pos] = iv

    def _annotate(self, iv: IterVar, kind: ForKind) -> None:
        self._leaf(iv, kind.value)
        if iv.kind == "reduce" and kind in (ForKind.PARALLEL, ForKind.VECTORIZED):
            raise IRError(
                f"{self.op.name}: cannot mark reduction axis '{iv.name}' {kind.value} "
                "(iterations would race on the accumulator); rfactor is not supported"
            )
        self.kinds[iv] = kind

    def parallel(self, iv: IterVar) -> None:
        """Run the iterations of ``iv`` on several threads (OpenMP in C)."""
        self._annotate(iv, ForKind.PARALLEL)

    def vectorize(self, iv: IterVar) -> None:
        """Mark ``iv`` for SIMD execution (an innermost loop of constant extent works best)."""
        self._annotate(iv, ForKind.VECTORIZED)

    def unroll(self, iv: IterVar) -> None:
        """Unroll ``iv`` (its extent should be a small constant)."""
        self._annotate(iv, ForKind.UNROLLED)

    def compute_inline(self) -> None:
        """Inline this elementwise stage into every consumer (no buffer, no loop)."""
        if isinstance(self.op, ExternOp):
            raise IRError(f"{self.op.name}: an extern stage cannot be inlined")
        if isinstance(self.op.body, Reduce):
            raise IRError(f"{self.op.name}: a reduction cannot be inlined; use compute_at")
        if self.attach is not None:
            raise IRError(f"{self.op.name}: a stage cannot be both inlined and attached")
        self.inlined = True

    def compute_at(self, parent: Stage, iv: IterVar) -> None:
        """Compute this stage inside the loop ``iv`` of ``parent``, only the region it needs."""
        parent._leaf(iv, "compute_at")
        if isinstance(self.op, ExternOp):
            raise IRError(f"{self.op.name}: an extern stage cannot be computed at another stage")
        if self.inlined:
            raise IRError(f"{self.op.name}: a stage cannot be both inlined and attached")
        if parent is self:
            raise IRError(f"{self.op.name}: cannot compute a stage at itself")
        self.attach = (parent, iv)


class Schedule:
    """The stages of every compute operation reachable from the outputs."""

    def __init__(self, outputs: Sequence[Tensor]) -> None:
        self.outputs = list(outputs)
        self.ops: list[Operation] = _topo_order(self.outputs)
        self.stages: dict[Operation, Stage] = {
            op: Stage(op) for op in self.ops if isinstance(op, ComputeOp | ExternOp)
        }

    def __getitem__(self, t: Tensor | Operation) -> Stage:
        op = t.op if isinstance(t, Tensor) else t
        if op not in self.stages:
            kind = "a placeholder" if isinstance(op, PlaceholderOp) else "not part of this schedule"
            raise IRError(f"schedule: tensor '{op.name}' is {kind}; it has no stage")
        return self.stages[op]


def _topo_order(outputs: Sequence[Tensor]) -> list[Operation]:
    """Operations producers-first, in deterministic depth-first order."""
    order: list[Operation] = []
    state: dict[Operation, int] = {}

    def visit(op: Operation) -> None:
        mark = state.get(op, 0)
        if mark == 2:
            return
        if mark == 1:
            raise IRError(f"compute graph has a cycle through '{op.name}'")
        state[op] = 1
        for t in op.input_tensors():
            visit(t.op)
        state[op] = 2
        order.append(op)

    for t in outputs:
        if not isinstance(t, Tensor):
            raise IRError(f"schedule outputs must be Tensors, got {type(t).__name__}")
        visit(t.op)
    return order


def create_schedule(outputs: Tensor | Sequence[Tensor]) -> Schedule:
    """A default schedule (row-major serial loops) for the given output tensor(s)."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    return Schedule(outs)


__all__ = ["Fuse", "Schedule", "Split", "Stage", "create_schedule", "PrimExpr"]
