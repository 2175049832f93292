"""Lowering: a schedule of compute stages -> one loop-IR PrimFunc.

Steps: inline the stages marked compute_inline into their consumers; give every argument
tensor a parameter buffer and every other non-inlined tensor a local allocation; build each
root stage's loop nest from its leaf loops (splits and fuses turned into index arithmetic,
guards where a split does not divide evenly, reductions as an init nest plus an update
nest); place stages marked compute_at inside their consumer's loop, computing only the region
it reads; replace tensor reads by buffer loads; simplify and verify.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ember.errors import CompileError, IRError
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer, decl_buffer
from ember.tir.expr import IntImm, Max, Min, PrimExpr, Var, const
from ember.tir.functor import IRMutator, post_order_visit, substitute
from ember.tir.simplify import NON_NEGATIVE_MAX, simplify
from ember.tir.stmt import (
    Allocate,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    PrimFunc,
    Stmt,
    StorageKind,
    seq,
)
from ember.tir.te.full_tiles import range_of, split_full_tiles
from ember.tir.te.inline import MAX_INLINE_DEPTH, MAX_INLINE_NODES, inline_body, too_big
from ember.tir.te.schedule import Fuse, Schedule, Split, Stage, create_schedule
from ember.tir.te.tensor import (
    ComputeOp,
    ExternOp,
    IterVar,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorLoad,
)
from ember.tir.verify import verify

STACK_LIMIT_BYTES = 64 * 1024  # larger local tensors go to the runtime workspace (heap)


class _Materialize(IRMutator):
    """TensorLoad -> BufferLoad with the region offset of attached stages."""

    def __init__(self, where: dict[Tensor, tuple[Buffer, tuple[PrimExpr, ...]]]) -> None:
        self.where = where

    def visit_TensorLoad(self, e: TensorLoad) -> PrimExpr:
        e = self.generic_expr(e)  # type: ignore[assignment]
        if e.tensor not in self.where:
            raise IRError(
                f"lower: tensor '{e.tensor.name}' is read but is neither an argument nor "
                "computed; add the placeholder to args"
            )
        buf, off = self.where[e.tensor]
        return buf.load(*(i - o for i, o in zip(e.indices, off, strict=True)))


class _Lowerer:
    def __init__(self, sch: Schedule, args: list[Tensor], name: str) -> None:
        self.sch = sch
        self.args = args
        self.name = name
        self.bodies: dict[ComputeOp, PrimExpr] = {}
        self.where: dict[Tensor, tuple[Buffer, tuple[PrimExpr, ...]]] = {}
        self.allocs: list[Buffer] = []
        # inlined stages too big to inline: computed at root into a buffer of their own
        self.materialized: set[Any] = set()
        self.children: dict[Stage, list[Stage]] = {}
        # per stage being emitted: iter var values and (region-adjusted) leaf loops
        self.nests: dict[Stage, tuple[dict[IterVar, PrimExpr], list[IterVar]]] = {}

    def tensor_of(self, op: Any) -> Tensor:
        if isinstance(op, ExternOp):
            return op.outputs[0]
        for t in self.args + self.sch.outputs:
            if t.op is op:
                return t
        for other in self.sch.ops:
            for t in other.input_tensors():
                if t.op is op:
                    return t
        raise IRError(f"lower: no tensor found for operation '{op.name}'")  # pragma: no cover

    def run(self) -> PrimFunc:
        names = set()
        params: list[Buffer] = []
        for t in self.args:
            if t.name in names:
                raise IRError(
                    f"lower: two arguments are named '{t.name}'; give tensors unique names"
                )
            names.add(t.name)
            buf = decl_buffer(t.shape, t.dtype, _identifier(t.name))
            params.append(buf)
            self.where[t] = (buf, tuple(const(0, s.dtype) for s in t.shape))
        # 1. inline, producers first so chains collapse fully (too big: into a buffer)
        inlined: dict[ComputeOp, PrimExpr] = {}
        for op in self.sch.ops:
            if isinstance(op, ComputeOp):
                body = inline_body(op.body, inlined)
                self.bodies[op] = body
                if self.sch[op].inlined:
                    if any(t.op is op for t in self.args):
                        raise IRError(f"lower: '{op.name}' is an argument and cannot be inlined")
                    if too_big(body):
                        self.materialized.add(op)
                    else:
                        inlined[op] = body
        # 2. stages to emit and where
        roots: list[Stage] = []
        for op in self.sch.ops:
            if isinstance(op, PlaceholderOp):
                t = self.tensor_of(op)
                if t not in self.where:
                    raise IRError(f"lower: placeholder '{op.name}' is used but missing from args")
                continue
            stage = self.sch[op]
            if isinstance(op, ExternOp):
                self._extern_buffers(op, inlined)
                roots.append(stage)
                continue
            if stage.inlined and op not in self.materialized:
                continue
            t = self.tensor_of(op)
            if stage.attach is not None:
                self._check_attach(stage)
                self.children.setdefault(stage.attach[0], []).append(stage)
            else:
                roots.append(stage)
                if t not in self.where:
                    buf = decl_buffer(t.shape, t.dtype, _identifier(t.name), scope="local")
                    self.where[t] = (buf, tuple(const(0, s.dtype) for s in t.shape))
                    self.allocs.append(buf)
        nest: Stmt = seq([self.stage_stmt(s, None) for s in roots])
        for buf in reversed(self.allocs):
            nest = Allocate(buf, nest, _storage(buf))
        nest = _Materialize(self.where).visit_stmt(nest)
        extents = {e: (0, NON_NEGATIVE_MAX) for b in params for e in b.shape if isinstance(e, Var)}
        func = PrimFunc(self.name, tuple(params), simplify(nest, extents))
        return verify(func)

    def _extern_buffers(self, op: ExternOp, inlined: dict[ComputeOp, PrimExpr]) -> None:
        for t in op.inputs:
            if t.op in inlined:
                raise IRError(
                    f"lower: '{t.name}' is inlined but read by the extern stage '{op.name}', "
                    "which needs it in memory; do not compute_inline it"
                )
        for t in op.outputs:
            if t not in self.where:
                buf = decl_buffer(t.shape, t.dtype, _identifier(t.name), scope="local")
                self.where[t] = (buf, tuple(const(0, s.dtype) for s in t.shape))
                self.allocs.append(buf)

    def extern_stmt(self, op: ExternOp) -> Stmt:
        """The extern body with its placeholder buffers bound to the real ones."""
        vmap: dict[Var, PrimExpr] = {}
        bmap: dict[Buffer, Buffer] = {}
        tensors = [*op.inputs, *op.outputs]
        for t, placeholder in zip(tensors, [*op.input_buffers, *op.output_buffers], strict=True):
            real = self.where[t][0]
            bmap[placeholder] = real
            vmap[placeholder.data] = real.data
        return substitute(op.body, vmap, bmap)  # type: ignore[no-any-return]

    def _check_attach(self, stage: Stage) -> None:
        parent, _ = stage.attach  # type: ignore[misc]
        t = self.tensor_of(stage.op)
        seen = [stage]
        up: Stage | None = parent
        while up is not None:
            if up in seen:
                chain = " -> ".join(x.op.name for x in [*seen, up])
                raise IRError(f"lower: compute_at forms a cycle: {chain}")
            if up.inlined:
                raise IRError(
                    f"lower: '{stage.op.name}' is computed at '{up.op.name}', which is inlined "
                    "and has no loops; attach it to a stage that keeps its loops"
                )
            seen.append(up)
            up = up.attach[0] if up.attach is not None else None
        if t in self.args:
            raise IRError(
                f"lower: '{stage.op.name}' is an argument and cannot be computed at another stage"
            )
        for op in self.sch.ops:
            if isinstance(op, ExternOp) and any(x is t for x in op.inputs):
                raise IRError(
                    f"lower: '{stage.op.name}' is computed at '{parent.op.name}' but also "
                    f"read by the extern stage '{op.name}'; compute it at root instead"
                )
            if not isinstance(op, ComputeOp) or op is parent.op:
                continue
            if self.sch[op].inlined and op not in self.materialized:
                continue
            if any(x is t for x in _reads(self.bodies[op])):
                if op in self.materialized:
                    raise CompileError(
                        f"lower: the fused expression of '{op.name}' exceeds "
                        f"{MAX_INLINE_DEPTH} levels or {MAX_INLINE_NODES} nodes and would need "
                        f"'{stage.op.name}' at root; split the fused group before '{op.name}'"
                    )
                raise IRError(
                    f"lower: '{stage.op.name}' is computed at '{parent.op.name}' but also "
                    f"read by '{op.name}'; compute it at root instead"
                )

    # -- one stage ----------------------------------------------------------------------
    def values(
        self, stage: Stage, ext: dict[IterVar, PrimExpr] | None = None
    ) -> dict[IterVar, PrimExpr]:
        """Every iter var (root and derived) as an expression of the leaf loop variables."""
        ext = ext or {}
        val: dict[IterVar, PrimExpr] = {iv: iv.var for iv in stage.leaf_iter_vars}
        for rel in reversed(stage.relations):
            if isinstance(rel, Split):
                val[rel.parent] = rel.parent.min + val[rel.outer] * rel.factor + val[rel.inner]
            else:
                inner_ext = ext.get(rel.inner, rel.inner.extent)
                val[rel.outer] = val[rel.fused] // inner_ext
                val[rel.inner] = val[rel.fused] % inner_ext
        return val

    def extents(
        self, stage: Stage, region: list[tuple[PrimExpr, PrimExpr]] | None
    ) -> dict[IterVar, PrimExpr]:
        """Extents that differ from the schedule's: an attached stage's region and the
        splits and fuses derived from it."""
        ext: dict[IterVar, PrimExpr] = {}
        if region is None:
            return ext
        op = stage.op
        assert isinstance(op, ComputeOp)
        for iv, (_, e) in zip(op.axis, region, strict=True):
            ext[iv] = e
        for rel in stage.relations:
            if isinstance(rel, Split) and rel.parent in ext:
                ext[rel.outer] = simplify((ext[rel.parent] + rel.factor - 1) // rel.factor)
            elif isinstance(rel, Fuse) and (rel.outer in ext or rel.inner in ext):
                a = ext.get(rel.outer, rel.outer.extent)
                ext[rel.fused] = simplify(a * ext.get(rel.inner, rel.inner.extent))
        return ext

    def stage_stmt(self, stage: Stage, region: list[tuple[PrimExpr, PrimExpr]] | None) -> Stmt:
        op = stage.op
        if isinstance(op, ExternOp):
            return self.extern_stmt(op)
        t = self.tensor_of(op)
        ext = self.extents(stage, region)
        val = self.values(stage, ext)
        leaves = [
            IterVar(iv.var, iv.min, ext[iv], iv.kind) if iv in ext else iv
            for iv in stage.leaf_iter_vars
        ]
        data_guards, reduce_guards = self.guards(stage, val, ext)
        if region is not None:  # attached: data axes run over the region, offset by its min
            for iv, (lo, _) in zip(op.axis, region, strict=True):
                val[iv] = lo + val[iv]
        self.nests[stage] = (val, leaves)
        vmap = {iv.var: val[iv] for iv in (*op.axis, *op.reduce_axis)}
        index = tuple(val[iv] for iv in op.axis)
        buf, off = self.where[t]
        dst = tuple(i - o for i, o in zip(index, off, strict=True))
        if region is not None:
            for iv, shape_ext in zip(op.axis, t.shape, strict=True):
                data_guards.append(val[iv] >= 0)
                data_guards.append(val[iv] < shape_ext)
        body = self.bodies[op]
        if not isinstance(body, Reduce):
            store = BufferStore(buf, substitute(body, vmap), dst)
            return self.loops(stage, leaves, _guard(data_guards, store))
        src = substitute(body.source, vmap)
        acc = buf.load(*dst)
        new = {"sum": acc + src, "max": Max(acc, src), "min": Min(acc, src)}[body.combiner]
        init = body.init if body.init is not None else body.identity()
        p = next((k for k, iv in enumerate(leaves) if iv.kind == "reduce"), len(leaves))
        init_nest = self.loops(
            stage,
            [iv for iv in leaves[p:] if iv.kind != "reduce"],
            _guard(data_guards, BufferStore(buf, init, dst)),
            attach=False,
        )
        update = _guard(data_guards + reduce_guards, BufferStore(buf, new, dst))
        return self.loops(stage, leaves[:p], seq(init_nest, self.loops(stage, leaves[p:], update)))

    def guards(
        self, stage: Stage, val: dict[IterVar, PrimExpr], ext: dict[IterVar, PrimExpr]
    ) -> tuple[list[PrimExpr], list[PrimExpr]]:
        """Conditions that keep uneven splits inside their parent (data, reduce)."""
        data: list[PrimExpr] = []
        red: list[PrimExpr] = []
        for rel in stage.relations:
            if isinstance(rel, Split):
                bound = ext.get(rel.parent, rel.parent.extent)
                cond = val[rel.outer] * rel.factor + val[rel.inner] < bound
                (red if rel.parent.kind == "reduce" else data).append(cond)
        return data, red

    def loops(
        self, stage: Stage, leaves: Sequence[IterVar], inner: Stmt, attach: bool = True
    ) -> Stmt:
        body = inner
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            if attach:
                body = self.with_attached(stage, iv, leaves, body)
            kind = stage.kinds.get(_original(stage, iv), ForKind.SERIAL)
            body = For(iv.var, iv.min, iv.extent, kind, body)
        return body

    def with_attached(
        self, stage: Stage, iv: IterVar, leaves: Sequence[IterVar], body: Stmt
    ) -> Stmt:
        kids = [
            c
            for c in self.children.get(stage, [])
            if c.attach is not None and _attach_leaf(stage, c.attach[1]).var is iv.var
        ]
        if not kids:
            return body
        val, all_leaves = self.nests[stage]  # as the stage's own nest sees them
        pos = [lv.var for lv in all_leaves].index(iv.var)
        inner_leaves = all_leaves[pos + 1 :]
        prods: list[Stmt] = []
        bufs: list[Buffer] = []
        for kid in kids:
            t = self.tensor_of(kid.op)
            region = self.region(stage, t, val, inner_leaves)
            shape = tuple(ext for _, ext in region)
            buf = decl_buffer(shape, t.dtype, _identifier(t.name), scope="local")
            self.where[t] = (buf, tuple(m for m, _ in region))
            prods.append(self.stage_stmt(kid, region))
            bufs.append(buf)
        out: Stmt = split_full_tiles(seq(*prods, body))
        for buf in reversed(bufs):
            out = Allocate(buf, out, _storage(buf))
        return out

    def region(
        self, stage: Stage, t: Tensor, val: dict[IterVar, PrimExpr], inner: Sequence[IterVar]
    ) -> list[tuple[PrimExpr, PrimExpr]]:
        """Per dimension of ``t``: (min, extent) read by one iteration above the attach loop."""
        op = stage.op
        assert isinstance(op, ComputeOp)  # compute_at refuses extern parents (no loops)
        vmap = {iv.var: val[iv] for iv in (*op.axis, *op.reduce_axis)}
        rng = {iv.var: (iv.min, simplify(iv.min + iv.extent - 1)) for iv in inner}
        accesses = [e for e in _reads(self.bodies[op], full=True) if e.tensor is t]
        out: list[tuple[PrimExpr, PrimExpr]] = []
        for d, extent in enumerate(t.shape):
            lows: list[PrimExpr] = []
            highs: list[PrimExpr] = []
            ok = True
            for acc in accesses:
                e = simplify(substitute(acc.indices[d], vmap))
                lohi = range_of(e, rng)
                if lohi is None:
                    ok = False
                    break
                lows.append(lohi[0])
                highs.append(lohi[1])
            lo = _pick(lows, min_side=True) if ok else None
            hi = _pick(highs, min_side=False) if ok else None
            ext = simplify(hi - lo + 1) if lo is not None and hi is not None else None
            if lo is None or not isinstance(ext, IntImm):
                out.append((const(0, extent.dtype), extent))
            else:
                out.append((lo, ext))
        return out


def _identifier(name: str) -> str:
    """A buffer name from a tensor name: ``conv.weight:0`` -> ``conv_weight_0``."""
    text = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in name)
    return text if text and not text[0].isdigit() else "t_" + text


def _pick(options: list[PrimExpr], min_side: bool) -> PrimExpr | None:
    if not options:
        return None
    best = options[0]
    for o in options[1:]:
        diff = simplify(o - best)
        if not isinstance(diff, IntImm):
            return None
        if (diff.value < 0) == min_side and diff.value != 0:
            best = o
    return best


def _reads(e: PrimExpr, full: bool = False) -> list[Any]:
    out: list[Any] = []
    post_order_visit(
        e, lambda n: out.append(n if full else n.tensor) if isinstance(n, TensorLoad) else None
    )
    return out


def _original(stage: Stage, iv: IterVar) -> IterVar:
    for leaf in stage.leaf_iter_vars:
        if leaf.var is iv.var:
            return leaf
    return iv


def _attach_leaf(stage: Stage, iv: IterVar) -> IterVar:
    """The current loop that stands for attach point ``iv``: itself if still a leaf, else
    the innermost loop derived from it by later splits and fuses."""
    reach = {iv}
    for rel in stage.relations:
        if isinstance(rel, Split) and rel.parent in reach:
            reach |= {rel.outer, rel.inner}
        elif isinstance(rel, Fuse) and (rel.outer in reach or rel.inner in reach):
            reach.add(rel.fused)
    found = [leaf for leaf in stage.leaf_iter_vars if leaf in reach]
    if not found:  # pragma: no cover - every iter var leads to some leaf
        raise IRError(f"lower: attach point '{iv.name}' of '{stage.op.name}' has no loop")
    return found[-1]


def _guard(conds: list[PrimExpr], body: Stmt) -> Stmt:
    unique: list[PrimExpr] = []
    for c in conds:
        if not any(c == u for u in unique):
            unique.append(c)
    conds = unique
    if not conds:
        return body
    cond = conds[0]
    for c in conds[1:]:
        cond = cond & c
    return IfThenElse(cond, body)


def _storage(buf: Buffer) -> StorageKind:
    shape = buf.const_shape()
    if shape is None:
        return StorageKind.HEAP
    n = dt.bytes_of(buf.dtype)
    for s in shape:
        n *= s
    return StorageKind.STACK if n <= STACK_LIMIT_BYTES else StorageKind.HEAP


def lower(
    sch: Schedule | Tensor | Sequence[Tensor],
    args: Sequence[Tensor] | str | None = None,
    name: str = "main",
) -> PrimFunc:
    """Lower a schedule (or output tensors with the default schedule) to a PrimFunc.

    ``args`` lists the parameter tensors in order (inputs and outputs); by default the
    placeholders in the order they are first read, then the outputs.
    """
    if isinstance(args, str):
        name, args = args, None
    schedule = sch if isinstance(sch, Schedule) else create_schedule(sch)
    if args is None:
        inputs = [
            _tensor_for_placeholder(schedule, op)
            for op in schedule.ops
            if isinstance(op, PlaceholderOp)
        ]
        arg_list = inputs + [t for t in schedule.outputs if t not in inputs]
    else:
        arg_list = list(args)
        for t in schedule.outputs:
            if t not in arg_list:
                raise IRError(f"lower: output '{t.name}' must be listed in args")
    return _Lowerer(schedule, arg_list, name).run()


def _tensor_for_placeholder(sch: Schedule, op: PlaceholderOp) -> Tensor:
    for t in sch.outputs:
        if t.op is op:
            return t
    for other in sch.ops:
        for t in other.input_tensors():
            if t.op is op:
                return t
    raise IRError(f"lower: placeholder '{op.name}' is not read by any stage")  # pragma: no cover
