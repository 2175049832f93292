"""Lowering of one fused group: a primitive ir.Function -> a loop-IR PrimFunc.

Each op of the group contributes its tensor expression (``ember.ops`` computes); every
intermediate elementwise/injective stage is inlined into its consumer, so a group like
conv + bias + relu becomes one loop nest whose only materialised intermediate is the
convolution's accumulator. The anchor op (the group's reduction/convolution/opaque op, the
one with the highest fusion pattern) may bring its own schedule; otherwise the default CPU
schedule parallelises the outer loops and vectorises the innermost one.

A compute created with ``attrs={"materialize": True}`` keeps its own buffer (e.g. a padded
conv input built once so the reduction's inner loop has no branches).

The PrimFunc's parameters are the group's inputs in order, then its outputs (flattened).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ember.errors import CompileError
from ember.ir.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var, post_order
from ember.ir.op import OpDef, OpPattern
from ember.ir.types import TensorType
from ember.ops.registry import COMPUTE_TARGET, ScheduleContext, find_schedule, get_compute
from ember.target import Target
from ember.tir import PrimExpr, PrimFunc, te
from ember.tir import const as tir_const
from ember.tir.functor import free_vars, post_order_visit, substitute
from ember.tir.simplify import _collect, simplify
from ember.tir.te.tensor import Operation
from ember.tir.transform.guard_bounds import guard_bounds
from ember.tir.transform.hoist_checks import hoist_checks
from ember.tir.transform.interleave_loops import interleave_loops
from ember.tir.transform.partition_loops import partition_loops

#: below this many output elements a loop nest runs on one thread.
MIN_PARALLEL_ELEMENTS = 4096
#: the innermost loop is vectorised when its extent is at least this.
MIN_VECTOR_EXTENT = 4

#: whether injective groups' interleaved loops are rewritten (ember.tir.transform.interleave_loops).
INTERLEAVE = True


def _as_list(out: te.Tensor | Sequence[te.Tensor]) -> list[te.Tensor]:
    return [out] if isinstance(out, te.Tensor) else list(out)


def _constant_tensor(node: Constant) -> te.Tensor:
    """A scalar-sized constant as a tensor expression (bigger ones are lifted to params)."""
    ty = node.type
    if ty.size > 1:
        raise CompileError(
            f"constant of type {ty} left inside a fused group; plan_graph lifts such "
            "constants into parameters (run lowering through ember.build)"
        )
    value = np.asarray(node.data).reshape(-1)[0].item() if ty.size == 1 else 0
    dtype = "uint8" if ty.dtype == "bool" else ty.dtype
    return te.compute(ty.shape, lambda *i: tir_const(value, dtype), "const")


def _copy(t: te.Tensor, name: str) -> te.Tensor:
    return te.compute(t.shape, lambda *i: t[i], name)


class _GroupBuilder:
    """Builds the tensor expressions of a group, remembering which op made which tensor."""

    def __init__(self, func: Function) -> None:
        self.func = func
        self.inputs: list[te.Tensor] = []
        self.values: dict[int, list[te.Tensor]] = {}
        self.anchor: tuple[Call, list[te.Tensor]] | None = None
        self.anchor_pattern = -1

    def build(self) -> list[te.Tensor]:
        for i, p in enumerate(self.func.params):
            ty = p.type
            if not isinstance(ty, TensorType):
                raise CompileError(f"group parameter {p.name} has non-tensor type {ty}")
            t = te.placeholder(ty.shape, ty.dtype, f"p{i}")
            self.inputs.append(t)
            self.values[id(p)] = [t]
        for node in post_order(self.func.body):
            self.visit(node)
        return self.values[id(self.func.body)]

    def visit(self, node: Expr) -> None:
        if isinstance(node, Var):
            if id(node) not in self.values:
                raise CompileError(f"free variable %{node.name} inside a fused group")
        elif isinstance(node, Constant):
            self.values[id(node)] = [_constant_tensor(node)]
        elif isinstance(node, Call):
            if not isinstance(node.op, OpDef):
                raise CompileError("nested function calls inside a fused group are not supported")
            args: list[te.Tensor] = []
            for a in node.args:
                args.extend(self.values[id(a)])
            outs = _as_list(get_compute(node.op.name)(args, node.attrs, node.type))
            self.values[id(node)] = outs
            pattern = int(node.op.pattern)
            if pattern >= OpPattern.COMM_REDUCE and pattern > self.anchor_pattern:
                self.anchor, self.anchor_pattern = (node, outs), pattern
        elif isinstance(node, Tuple):
            flat: list[te.Tensor] = []
            for f in node.fields:
                flat.extend(self.values[id(f)])
            self.values[id(node)] = flat
        elif isinstance(node, TupleGetItem):
            self.values[id(node)] = [self.values[id(node.tuple_value)][node.index]]
        else:
            raise CompileError(f"cannot lower {type(node).__name__} inside a fused group")


#: whether an injective output that reads an input's innermost axis along one of its outer
#: axes (a layout transpose: NHWC -> NCHW) is computed in tiles along those two axes of
#: TRANSPOSE_TILE, half of it, or the whole axis when shorter, so that each tile's reads
#: stay in a few cache lines. One thread, thread CPU time, NHWC -> NCHW: 80x80x64 262-277
#: -> 116-131 us, 56x56x128 407 -> 135 us; NCHW -> NHWC 64x80x80 64 us.
TRANSPOSE_TILES = True
TRANSPOSE_TILE = 16

#: whether such a tiled transpose whose input is computed (a SiLU, a normalisation's
#: scale, a depth-to-space, then the layout transpose) first computes each tile of that
#: input in its own order, contiguous and vectorised, into a small buffer. Inlined, the
#: math runs on the transpose's strided reads, which GCC does not vectorize: a SiLU and
#: NCHW -> NHWC at 32x32x256, one thread, 1,451 -> 136 us.
SOURCE_ORDER_TILES = True


def _transposed_axis(op: te.ComputeOp, sch: te.Schedule | None = None) -> int:
    """The position of the output axis that indexes the innermost axis of every input the
    body reads, when it is not the output's innermost; else -1. With ``sch`` (its inlined
    stages decided), the reads are followed through the inlined stages, and an innermost
    index affine in that axis with coefficient one counts too (a reshape's arithmetic:
    attention heads transposed for a product, ``x[t, h * 64 + d]``)."""
    k = _plain_transposed_axis(op)
    if k < 0 and sch is not None:
        return _affine_transposed_axis(op, sch)
    return k


def _source_loads(
    expr: PrimExpr, sch: te.Schedule, depth: int = 0, budget: list[int] | None = None
) -> list[tuple[te.Tensor, tuple[PrimExpr, ...]]] | None:
    """The reads of ``expr`` of tensors in memory, through the inlined stages (their
    indices substituted); None when deeper than MAX_SOURCE_DEPTH or more reads than
    MAX_SOURCE_LOADS (a chain reading each stage twice would double at every step)."""
    budget = [MAX_SOURCE_LOADS] if budget is None else budget
    loads: list[te.TensorLoad] = []
    post_order_visit(expr, lambda n: loads.append(n) if isinstance(n, te.TensorLoad) else None)
    budget[0] -= len(loads)
    if budget[0] < 0:
        return None
    out: list[tuple[te.Tensor, tuple[PrimExpr, ...]]] = []
    for load in loads:
        op = load.tensor.op
        inlined = isinstance(op, te.ComputeOp) and op in sch.stages and sch[op].inlined
        if not inlined:
            out.append((load.tensor, load.indices))
            continue
        assert isinstance(op, te.ComputeOp)
        if depth > MAX_SOURCE_DEPTH or isinstance(op.body, te.Reduce):
            return None
        mapping = {iv.var: idx for iv, idx in zip(op.axis, load.indices, strict=True)}
        inner = _source_loads(substitute(op.body, mapping), sch, depth + 1, budget)
        if inner is None:
            return None
        out.extend(inner)
    return out


def _affine_transposed_axis(op: te.ComputeOp, sch: te.Schedule) -> int:
    """_transposed_axis through the inlined stages (see there); -1 when none."""
    loads = _source_loads(op.body, sch)
    axis_vars = [iv.var for iv in op.axis]
    if not loads or len(axis_vars) < 2:
        return -1
    found: set[int] = set()
    for tensor, indices in loads:
        if not indices or all(int(getattr(d, "value", 0)) == 1 for d in tensor.shape):
            continue  # a scalar read
        terms, _ = _collect(simplify(indices[-1]))
        if terms is None or any(t is axis_vars[-1] for t in terms):
            return -1
        ones = {k for k, v in enumerate(axis_vars) for t, c in terms.items() if t is v and c == 1}
        if len(ones) != 1:
            return -1
        found |= ones
    if len(found) != 1:
        return -1
    (k,) = found
    return k


def _plain_transposed_axis(op: te.ComputeOp) -> int:
    """_transposed_axis on ``op``'s own reads, each innermost index an output axis."""
    axis_vars = [iv.var for iv in op.axis]
    found: set[int] = set()
    loads: list[te.TensorLoad] = []
    post_order_visit(op.body, lambda n: loads.append(n) if isinstance(n, te.TensorLoad) else None)
    for load in loads:
        last = load.indices[-1] if load.indices else None
        if not any(last is v for v in axis_vars):
            return -1
        found.add(next(k for k, v in enumerate(axis_vars) if last is v))
    if len(found) != 1:
        return -1
    (k,) = found
    return k if k < len(axis_vars) - 1 else -1


#: how many inlined stages _transposed_axis follows a read through, and how many reads
#: it looks at in all.
MAX_SOURCE_DEPTH = 16
MAX_SOURCE_LOADS = 64

#: whether a transpose axis that no tile size divides takes TRANSPOSE_TILE and a tail
#: (else the transpose runs untiled): a (1, 512, 3199) NCW -> NHWC, one thread, 4.3 -> 0.35 ms.
TRANSPOSE_TAILS = True


#: whether a tiled transpose whose output's innermost axis is shorter than a tile and
#: follows the transposed one (NCHW -> NHWC of an RGB image: rows of 3) runs its
#: transposed axis as the vector lanes, the short axis unrolled inside: the loads are
#: contiguous rows of the source and GCC stores the lanes as interleaved groups (permutes).
#: As vectors of the short axis every lane was a strided load. 3x32x32 one thread, a C
#: harness: 1,189 -> 177 ns.
INTERLEAVE_SHORT_ROWS = True


class _Tiles(NamedTuple):
    """How a transpose runs in tiles: its transposed output axis, the tile along it and
    along the innermost axis, and whether the tiles divide both (no tails)."""

    axis: int
    tile: int
    inner: int
    exact: bool


def _tiles(op: te.ComputeOp, tails: bool = True, sch: te.Schedule | None = None) -> _Tiles | None:
    """The tiles of ``op``'s transposed and innermost axes (TRANSPOSE_TILES), or None when
    it is no such transpose. An axis longer than a tile that no tile size divides takes
    TRANSPOSE_TILE and a tail (guards, then loop bounds: guard_bounds) when ``tails``; else
    None. ``sch``: as for _transposed_axis."""
    k = _transposed_axis(op, sch)
    if k < 0 or op.reduce_axis:
        return None
    tiles = []
    exact = True
    for a in (op.axis[k], op.axis[-1]):
        extent = int(getattr(a.extent, "value", 0))
        if extent <= 0:
            return None
        sizes = (TRANSPOSE_TILE, TRANSPOSE_TILE // 2, extent if extent <= TRANSPOSE_TILE else 0)
        fits = [t for t in sizes if t and extent >= t and extent % t == 0]
        if not fits and not (tails and TRANSPOSE_TAILS):
            return None
        tiles.append(fits[0] if fits else TRANSPOSE_TILE)
        exact = exact and bool(fits)
    return _Tiles(k, tiles[0], tiles[1], exact)


def tile_source(op: te.ComputeOp) -> te.ComputeOp | None:
    """The computed tensor that ``op``, a permutation of it, reads (see SOURCE_ORDER_TILES);
    None when ``op`` is no plain permutation of one computed, non-reducing tensor."""
    body = op.body
    if op.reduce_axis or not isinstance(body, te.TensorLoad):
        return None
    src = body.tensor.op
    if not isinstance(src, te.ComputeOp) or isinstance(src.body, te.Reduce):
        return None
    if isinstance(src.body, te.TensorLoad):  # a gather (depth-to-space): only when it reads
        # along its own innermost axis; a transpose of a transpose gains nothing
        indices = src.body.indices
        if not indices or src.axis[-1].var not in free_vars(indices[-1]):
            return None
    axis_vars = [iv.var for iv in op.axis]
    found = {k for i in body.indices for k, v in enumerate(axis_vars) if i is v}
    if len(body.indices) != len(axis_vars) or len(found) != len(axis_vars):
        return None
    return src


def _readers(sch: te.Schedule, op: Operation) -> int:
    """How many stages of ``sch`` read ``op``'s tensor."""
    return sum(any(t.op is op for t in other.input_tensors()) for other in sch.stages)


def _transpose_tiles(
    sch: te.Schedule, stage: te.Stage, axes: list[te.IterVar], total: int
) -> _Tiles | None:
    """Schedule ``stage`` in tiles of its transposed axis and its innermost one (see
    TRANSPOSE_TILES); None (nothing done) when it is no such transpose."""
    op = stage.op
    assert isinstance(op, te.ComputeOp)
    tiles = _tiles(op, sch=sch)
    if tiles is None:
        return None
    k = tiles.axis
    co, ci = stage.split(axes[k], factor=tiles.tile)
    wo, wi = stage.split(axes[-1], factor=tiles.inner)
    outer_axes = [*axes[:k], co, *axes[k + 1 : -1], wo]
    stage.reorder(*outer_axes, ci, wi)
    outer = stage.fuse(*outer_axes)
    if total >= MIN_PARALLEL_ELEMENTS:
        stage.parallel(outer)
    if INTERLEAVE_SHORT_ROWS and k == len(axes) - 2 and tiles.inner < TRANSPOSE_TILE:
        stage.vectorize(ci)
        stage.unroll(wi)
    else:
        stage.vectorize(wi)
    src = tile_source(op) if SOURCE_ORDER_TILES else None
    if src is not None and tiles.exact and not sch[src].inlined and _readers(sch, src) == 1:
        source = sch[src]
        source.compute_at(stage, outer)
        source.vectorize(src.axis[-1])
    return tiles


#: an elementwise group whose rows are shorter than this vectorizes its trailing axes fused
#: (flat_axes), up to this many elements.
FLAT_ROW = 256


def flat_axes(func: Function) -> int:
    """How many trailing axes of a group's output its loops may fuse into one vectorized
    loop: every op elementwise or broadcast, and every input, on those axes, either the
    output's extents or all ones (a read is then the fused index itself, or invariant).
    0 when there is no gain (rows of FLAT_ROW or more) or no such axes. NCHW rows of 56
    vectorized a row at a time and finished it in scalars: QuantizeLinear of 1x64x56x56
    91 -> 27 us at one thread (onnxruntime 17), a Sigmoid of 1x1280x7x7 74 -> 12 (19)."""
    oty = func.body.type if isinstance(func.body, Expr) else None
    if not isinstance(oty, TensorType) or len(oty.shape) < 2 or not FLAT_ROW:
        return 0
    shape = [int(d) for d in oty.shape]
    if shape[-1] >= FLAT_ROW:
        return 0
    for node in post_order(func.body):
        if isinstance(node, Call):
            if not isinstance(node.op, OpDef) or node.op.pattern > OpPattern.BROADCAST:
                return 0
        elif isinstance(node, Tuple | TupleGetItem):
            return 0
    params = [p.type for p in func.params]
    if not all(isinstance(t, TensorType) for t in params):
        return 0
    best = 0
    for k in range(2, len(shape) + 1):
        tail = shape[-k:]
        for t in params:
            assert isinstance(t, TensorType)
            dims = [1] * max(0, k - len(t.shape)) + [int(d) for d in t.shape[-k:]]
            if dims != tail and any(d != 1 for d in dims):
                return best
        best = k
        if int(np.prod(tail)) >= FLAT_ROW:
            break
    return best


def default_schedule(sch: te.Schedule, out: te.Tensor, flat: int = 0) -> bool:
    """Parallelise the outer loops of ``out``'s stage and vectorise its innermost data loop
    (a transpose: in tiles; ``flat`` trailing axes fused first, see flat_axes); True when
    transpose tiles left a tail (guards to bound)."""
    stage = sch[out]
    if not isinstance(stage.op, te.ComputeOp):
        return False  # extern stages carry their own loops
    axes = list(stage.op.axis)
    if not axes:
        return False
    if flat >= 2 and len(axes) >= flat and not stage.op.reduce_axis:
        axes = [*axes[:-flat], stage.fuse(*axes[-flat:])]
    total = 1
    for d in out.shape:
        total *= int(getattr(d, "value", 1))
    inner = axes[-1]
    inner_ext = int(getattr(inner.extent, "value", 0))
    tiles = _transpose_tiles(sch, stage, axes, total) if TRANSPOSE_TILES and not flat else None
    if tiles is not None:
        return not tiles.exact
    if total >= MIN_PARALLEL_ELEMENTS:
        if len(axes) >= 2:
            outer = stage.fuse(*axes[:-1])
            stage.parallel(outer)
        elif inner_ext >= 2 * MIN_PARALLEL_ELEMENTS:
            outer, inner = stage.split(inner, factor=MIN_PARALLEL_ELEMENTS // 4)
            stage.parallel(outer)
    if inner_ext >= MIN_VECTOR_EXTENT and not stage.op.reduce_axis:
        stage.vectorize(inner)
    return False


def _tile_sources(sch: te.Schedule, outputs: Sequence[te.Tensor]) -> set[Operation]:
    """The computed inputs of tiled transposes kept as their own stage (SOURCE_ORDER_TILES)."""
    if not (SOURCE_ORDER_TILES and TRANSPOSE_TILES):
        return set()
    found: set[Operation] = set()
    for t in outputs:
        # a tile source is computed over the whole tile: no tails (it would read past)
        if isinstance(t.op, te.ComputeOp) and _tiles(t.op, tails=False) is not None:
            src = tile_source(t.op)
            if src is None or any(src is o.op for o in outputs) or _readers(sch, src) > 1:
                continue
            found.add(src)
    return found


def lower_group(func: Function, name: str, target: Target | str = "c") -> PrimFunc:
    """Lower a primitive function to a PrimFunc called ``name`` (inputs, then outputs)."""
    tgt = Target.create(target)
    builder = _GroupBuilder(func)
    token = COMPUTE_TARGET.set(tgt)
    try:
        outputs = builder.build()
    finally:
        COMPUTE_TARGET.reset(token)
    fixed: list[te.Tensor] = []
    for i, t in enumerate(outputs):
        needs_copy = isinstance(t.op, te.PlaceholderOp) or t in fixed
        fixed.append(_copy(t, f"out{i}") if needs_copy else t)
    outputs = fixed
    sch = te.create_schedule(outputs)
    sources = _tile_sources(sch, outputs) if builder.anchor is None else set()
    for op, stage in sch.stages.items():
        if any(op is o.op for o in outputs):
            continue
        keep = isinstance(op, te.ComputeOp) and op.attrs.get("materialize", False)
        keep = keep or op in sources
        if isinstance(op, te.ComputeOp) and not isinstance(op.body, te.Reduce) and not keep:
            stage.compute_inline()
    anchor_sched = None
    ctx = None
    if builder.anchor is not None:
        call, op_outs = builder.anchor
        assert isinstance(call.op, OpDef)
        anchor_sched = find_schedule(call.op.name, tgt)
        if anchor_sched is not None:
            ctx = ScheduleContext(
                sch, op_outs, outputs, call.attrs, tgt, any(t in outputs for t in op_outs)
            )
            anchor_sched(ctx)
    tailed = False
    flat = 0
    if anchor_sched is None:
        flat = flat_axes(builder.func) if len(outputs) == 1 else 0
        for t in outputs:
            tailed = default_schedule(sch, t, flat) or tailed
    prim = te.lower(sch, builder.inputs + outputs, name=name)
    for rewrite in ctx.post_lower if ctx is not None else []:
        prim = rewrite(prim)
    if anchor_sched is None and INTERLEAVE and not flat:  # injective groups: channel shuffles
        prim = interleave_loops(prim)
    if anchor_sched is None:  # pads: border loops and a plain interior copy
        prim = partition_loops(prim)
    if tailed:
        prim = guard_bounds(prim)  # transposes in tiles with tails: guards as loop bounds
    return hoist_checks(prim)  # Gather's checked row in front of the row's copy
