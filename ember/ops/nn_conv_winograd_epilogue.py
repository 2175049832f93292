"""The fused epilogue of ``nn.conv_winograd``: bias add, residual add and ReLU applied by the
kernel's output transform to each output vector before it is stored.

Lowered alone, a Winograd group is the kernel call writing a temporary ``y``, then one
loop nest over every output element::

    assert ember_f32_winograd(x, u, y, scratch, ..., y, y, 0) == 0
    for pos in parallel(N * OH * OW):
      for o in vectorized(O):
        out[.., o] = let(v = y[.., o] + bias[0, 0, o] + res[.., o], select(v < 0, 0, v))

``fuse_epilogue`` (a post-lowering rewrite that ``schedule_winograd`` asks for) reads that
store's value as a chain of steps on ``y``'s element (``STEP_BIAS``: + a per-channel
vector, ``STEP_RES``: + the same element of a tensor of the output's shape, ``STEP_RELU``:
``v < 0 ? 0 : v``), hands them to the call (``epi``: 4 bits a step, the first lowest;
``bias``, ``res``), points the call at ``out`` and drops the nest and ``y``. The kernel then
computes the same float operations in the same order on the same values (float addition
commutes exactly), so the bits are the unfused path's: ember/codegen/c/f32_winograd.py's
``ember_wino_epi``. Any other epilogue (SiLU, a clip, a broadcast other than per channel)
keeps the nest, scheduled as the default schedule would (``schedule_output``).

SiLU (YOLO's) stays loop IR: its exp is libmvec's on ``c`` and a polynomial on the llvm
kinds (ember.codegen.llvm.mathfn), so one kernel in the runtime could not give both their
bits. Measured (one layer per model, a 1x1 conv either side, fused / unfused, one thread,
thread CPU time, 300-3000 interleaved rounds in one process, load 2): 32x32 16->16 with a
residual 0.976, 16x16 32->32 with a residual 0.997, 56x56 64->64 0.990, 28x28 128->128
0.982, 14x14 256->256 (F(2,3)) 0.990, 8x25 256->256 0.989: the pass over the output was
1-2% of a layer.
"""

from __future__ import annotations

from ember.ops.nn_schedule import schedule_output
from ember.ops.registry import ScheduleContext
from ember.tir import IRMutator, PrimFunc, post_order_visit, structural_equal
from ember.tir.buffer import Buffer
from ember.tir.expr import (
    LT,
    Add,
    BufferLoad,
    Call,
    FloatImm,
    IntImm,
    Let,
    PrimExpr,
    Select,
    Var,
    const,
)
from ember.tir.stmt import Allocate, BufferStore, For, SeqStmt, Stmt, seq

#: the kernel's epilogue steps (EMBER_WINO_* of ember/codegen/c/f32_winograd.py).
STEP_BIAS = 1
STEP_RES = 2
STEP_RELU = 3
#: steps of 4 bits that fit a non-negative int32.
MAX_STEPS = 7

KERNEL = "ember_f32_winograd"


def schedule_winograd(ctx: ScheduleContext) -> None:
    """nn.conv_winograd's schedule: the group's output nest as the default schedule lays it
    out (outer data loops fused and parallel, channels vectorised) and, unless the op's
    ``epilogue`` attribute is 0, the rewrite that moves that nest into the call."""
    for t in ctx.group_outputs:
        schedule_output(ctx.stage(t))
    if int(ctx.attrs.get("epilogue", 1)):
        ctx.post_lower.append(fuse_epilogue)


def _plain(buf: Buffer) -> bool:
    """A dense float32 buffer of constant shape at offset 0."""
    offset = buf.elem_offset
    zero = isinstance(offset, IntImm) and offset.value == 0
    return buf.dtype == "float32" and not buf.strides and zero and buf.const_shape() is not None


class _Chain:
    """The steps of one store's value on the kernel's output element (None: no match)."""

    def __init__(self, y: Var, store: BufferStore, channel: Var, channels: int) -> None:
        self.y, self.store, self.channel, self.channels = y, store, channel, channels
        self.bias: Buffer | None = None
        self.res: Buffer | None = None

    def _same_element(self, e: PrimExpr) -> bool:
        if not isinstance(e, BufferLoad) or len(e.indices) != len(self.store.indices):
            return False
        return all(
            structural_equal(a, b, map_free_vars=False)
            for a, b in zip(e.indices, self.store.indices, strict=True)
        )

    def _operand(self, e: PrimExpr) -> int | None:
        """STEP_BIAS or STEP_RES for an added operand (one buffer of each at most)."""
        if not isinstance(e, BufferLoad) or not _plain(e.buffer) or e.buffer.data is self.y:
            return None
        shape = e.buffer.const_shape() or ()
        *lead, last = e.indices
        per_channel = last is self.channel and all(
            isinstance(i, IntImm) and i.value == 0 for i in lead
        )
        if per_channel and shape and shape[-1] == self.channels:
            if self.bias is not None and self.bias is not e.buffer:
                return None
            self.bias = e.buffer
            return STEP_BIAS
        if self._same_element(e) and shape == self.store.buffer.const_shape():
            if self.res is not None and self.res is not e.buffer:
                return None
            self.res = e.buffer
            return STEP_RES
        return None

    def steps(self, e: PrimExpr) -> list[int] | None:
        """The steps from the kernel's element to ``e``."""
        if isinstance(e, BufferLoad) and e.buffer.data is self.y:
            same_shape = e.buffer.const_shape() == self.store.buffer.const_shape()
            return [] if same_shape and self._same_element(e) else None
        if isinstance(e, Add):
            for base, other in ((e.a, e.b), (e.b, e.a)):
                head = self.steps(base)
                if head is not None:
                    step = self._operand(other)
                    return None if step is None else [*head, step]
            return None
        if isinstance(e, Let) and _is_relu(e.body, e.var):
            head = self.steps(e.value)
            return None if head is None else [*head, STEP_RELU]
        if isinstance(e, Select) and isinstance(e.condition, LT):
            x = e.condition.a
            if _is_relu(e, x):
                head = self.steps(x)
                return None if head is None else [*head, STEP_RELU]
        return None


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, FloatImm) and e.value == 0.0


def _is_relu(e: PrimExpr, x: PrimExpr) -> bool:
    """``e`` is ``select(x < 0, 0, x)`` (ember.ops.elemwise's ReLU)."""
    if not isinstance(e, Select) or not isinstance(e.condition, LT):
        return False
    cond = e.condition
    same = structural_equal(cond.a, x, map_free_vars=False) and structural_equal(
        e.false_value, x, map_free_vars=False
    )
    return same and _is_zero(cond.b) and _is_zero(e.true_value)


def _kernel_call(stmt: Stmt) -> Call | None:
    """The one unfused ember_f32_winograd call of ``stmt`` (its output a handle var)."""
    calls: list[Call] = []

    def visit(n: object) -> None:
        if isinstance(n, Call) and n.kind == "extern" and n.op == KERNEL:
            calls.append(n)

    post_order_visit(stmt, visit)
    if len(calls) != 1:
        return None
    call = calls[0]
    epi = call.args[-1]
    if not isinstance(call.args[2], Var) or not (isinstance(epi, IntImm) and epi.value == 0):
        return None
    return call


def _epilogue(nest: Stmt, y: Var) -> tuple[Buffer, Buffer | None, Buffer | None, int] | None:
    """(output, bias, residual, epi) of a nest ``for pos: for o: out[.., o] = f(y[.., o])``
    covering the whole output, else None."""
    if not isinstance(nest, For) or not isinstance(nest.body, For):
        return None
    inner = nest.body
    store = inner.body
    if not isinstance(store, BufferStore) or not _plain(store.buffer) or not store.indices:
        return None
    shape = store.buffer.const_shape() or ()
    extents = [nest.min, nest.extent, inner.min, inner.extent]
    if not all(isinstance(e, IntImm) for e in extents):
        return None
    lo, outer, ilo, channels = (e.value for e in extents)  # type: ignore[attr-defined]
    size = 1
    for d in shape:
        size *= d
    if lo or ilo or store.indices[-1] is not inner.loop_var or shape[-1] != channels:
        return None
    if outer * channels != size:
        return None
    chain = _Chain(y, store, inner.loop_var, channels)
    steps = chain.steps(store.value)
    if not steps or len(steps) > MAX_STEPS:
        return None
    epi = 0
    for i, step in enumerate(steps):
        epi |= step << (4 * i)
    return store.buffer, chain.bias, chain.res, epi


class _Fuse(IRMutator):
    """Each (kernel call, epilogue nest) pair of a SeqStmt -> the call with the epilogue."""

    def __init__(self) -> None:
        self.dropped: list[Var] = []

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
        s = self.generic_stmt(s)  # type: ignore[assignment]
        if not isinstance(s, SeqStmt):
            return s
        out: list[Stmt] = []
        items = s.seq
        i = 0
        while i < len(items):
            call = _kernel_call(items[i]) if i + 1 < len(items) else None
            fused = _epilogue(items[i + 1], call.args[2]) if call is not None else None  # type: ignore[arg-type]
            if call is None or fused is None:
                out.append(items[i])
                i += 1
                continue
            out_buf, bias, res, epi = fused
            args = list(call.args)
            self.dropped.append(args[2])  # type: ignore[arg-type]
            args[2] = out_buf.data
            args[-3] = (bias or out_buf).data
            args[-2] = (res or out_buf).data
            args[-1] = const(epi, "int32")
            new_call = Call(call.dtype, call.op, tuple(args), call.kind)
            out.append(_ReplaceCall(call, new_call).visit_stmt(items[i]))
            i += 2
        return seq(*out)


class _ReplaceCall(IRMutator):
    def __init__(self, old: Call, new: Call) -> None:
        self.old, self.new = old, new

    def visit_Call(self, c: Call) -> PrimExpr:
        return self.new if c is self.old else self.generic_expr(c)


def _uses(node: Stmt, var: Var) -> bool:
    found: list[bool] = []

    def visit(n: object) -> None:
        if n is var or (isinstance(n, BufferLoad | BufferStore) and n.buffer.data is var):
            found.append(True)

    post_order_visit(node, visit)
    return bool(found)


class _DropAllocs(IRMutator):
    def __init__(self, dropped: list[Var]) -> None:
        self.dropped = dropped

    def visit_Allocate(self, a: Allocate) -> Stmt:
        body = self.visit_stmt(a.body)
        if any(a.buffer.data is v for v in self.dropped):
            return body
        return a if body is a.body else Allocate(a.buffer, body, a.storage, a.pool, a.offset)


def fuse_epilogue(prim: PrimFunc) -> PrimFunc:
    """``prim`` with each Winograd call's epilogue nest moved into the call (see the module
    docstring); unchanged where the nest does not match or the temporary is read elsewhere."""
    fuse = _Fuse()
    body = fuse.visit_stmt(prim.body)
    if not fuse.dropped:
        return prim
    if any(_uses(body, y) for y in fuse.dropped):
        return prim  # the temporary has another reader: keep it and the nest
    return prim.with_body(_DropAllocs(fuse.dropped).visit_stmt(body))
