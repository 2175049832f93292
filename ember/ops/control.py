"""Kernels of the control ops: a branch or a loop around calls of compiled bodies.

Lowering (``ember.driver.control``) compiles each body like a model of its own, for the AOT
executor: fused kernels and a run function with a statically planned workspace. It
records a :class:`BodyProgram` per body in the op's ``programs`` attribute and appends the
body's constants to the op's arguments. The compute here is one extern stage: it copies
each iteration's slices into temporaries, calls the body's run function (its unpacked C
entry) with them and a workspace, checks the status and carries the state in the output
buffers. Temporaries are heap buffers of the kernel, so the AOT executor plans them in its
workspace like any other kernel scratch.

A Loop whose count depends on data runs ``for i < trip_count`` guarded by its condition;
without a small static bound the loop is a nest of base-256 digits, each level guarded, so
a loop that stops early skips at most 256 checks per level instead of running on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.ops.control import PROGRAMS_ATTR
from ember.ir.types import TensorType, TupleType, Type
from ember.ops.registry import register_compute
from ember.tir import PrimExpr, Var, call_extern, decl_buffer, eq, for_range, seq, store, te
from ember.tir import const as tir_const
from ember.tir.buffer import Buffer
from ember.tir.expr import And, Cast, IntImm, Mul
from ember.tir.stmt import Allocate, AssertStmt, IfThenElse, LetStmt, Stmt, StorageKind

#: a Loop with a static trip count up to this runs as one plain (guarded) loop.
FLAT_LOOP_LIMIT = 4096
#: digits of the guarded loop nest of a Loop without a small static bound.
DIGIT = 256
#: the largest trip count an int64 holds.
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, eq=False)
class BodyProgram:
    """A compiled body: its run function's unpacked C entry and the arguments it takes
    (inputs, outputs, then ``num_consts`` constants found at ``const_start`` of the op's
    arguments, then a workspace of ``workspace_bytes``)."""

    symbol: str
    num_inputs: int
    num_outputs: int
    const_start: int
    num_consts: int
    workspace_bytes: int


def _programs(attrs: Attrs, count: int, op: str) -> tuple[BodyProgram, ...]:
    progs = attrs[PROGRAMS_ATTR]
    if not isinstance(progs, tuple) or len(progs) != count:
        raise CompileError(
            f"{op}: its bodies are not compiled; control ops are lowered by ember.lower "
            "(ember.driver.control compiles the bodies first)"
        )
    return progs


def _in_memory(inputs: Sequence[te.Tensor]) -> list[te.Tensor]:
    """Every input as a buffer (an inline constant gets one of its own)."""
    out = []
    for t in inputs:
        if isinstance(t.op, te.PlaceholderOp):
            out.append(t)
        else:
            out.append(
                te.compute(t.shape, lambda *i, t=t: t[i], "ctl_arg", attrs={"materialize": True})
            )
    return out


def _out_types(out_type: Type) -> list[TensorType]:
    fields = out_type.fields if isinstance(out_type, TupleType) else (out_type,)
    return [f for f in fields if isinstance(f, TensorType)]


def _extern(
    inputs: Sequence[te.Tensor],
    out_type: Type,
    name: str,
    body: Callable[[list[Buffer], list[Buffer]], Stmt],
) -> list[te.Tensor]:
    outs = _out_types(out_type)
    shapes = [list(t.shape) for t in outs]
    dtypes = [t.dtype for t in outs]
    made = te.extern(shapes, _in_memory(inputs), body, name=name, dtype=dtypes)
    return made if isinstance(made, list) else [made]


# -- statements -----------------------------------------------------------------------


def _temp(ty: TensorType, name: str) -> Buffer:
    """A temporary of the kernel (allocated by :func:`_allocate`)."""
    return decl_buffer(ty.shape, ty.dtype, name, scope="local")


def _allocate(temps: Sequence[Buffer], body: Stmt) -> Stmt:
    """``body`` inside heap allocations of ``temps`` (the AOT executor plans them)."""
    for buf in reversed(temps):
        count = math.prod(int(d.value) for d in buf.shape if isinstance(d, IntImm))
        if count == 0:
            raise CompileError(
                f"control flow: the temporary '{buf.name}' has no elements; bodies with "
                "empty tensors are not supported"
            )
        body = Allocate(buf, body, StorageKind.HEAP)
    return body


def _workspace(progs: Sequence[BodyProgram]) -> Buffer:
    size = max(1, *(p.workspace_bytes for p in progs))
    return decl_buffer((size,), "uint8", "ctl_ws", scope="local")


def _copy(
    dst: Buffer,
    src: Buffer,
    dst_at: tuple[int, PrimExpr] | None = None,
    src_at: tuple[int, PrimExpr] | None = None,
) -> Stmt:
    """dst = src, where ``*_at = (axis, position)`` fixes one axis of that side."""
    small = src if dst_at is not None or src_at is None else dst
    shape = [int(d.value) for d in small.shape if isinstance(d, IntImm)]
    idx = [Var(f"c{k}", "int64") for k in range(len(shape))]

    def full(at: tuple[int, PrimExpr] | None) -> list[PrimExpr]:
        if at is None:
            return list(idx)
        axis, pos = at
        return [*idx[:axis], pos, *idx[axis:]]

    body: Stmt = store(dst, src.load(*full(src_at)), *full(dst_at))
    for k in reversed(range(len(shape))):
        body = _range(idx[k], shape[k], body)
    return body


def _range(var: Var, extent: int, body: Stmt) -> Stmt:
    """A serial int64 loop over [0, extent)."""
    return for_range(var, tir_const(extent, "int64"), body, start=tir_const(0, "int64"))


def _first(buf: Buffer) -> PrimExpr:
    """The first element of ``buf`` (a one-element tensor of any rank)."""
    return buf.load(*(tir_const(0, "int64") for _ in buf.shape))


def _call(prog: BodyProgram, args: Sequence[Buffer], consts: Sequence[Buffer], ws: Buffer) -> Stmt:
    """Call a body's run function; a failing body fails the kernel with its own message."""
    if len(args) != prog.num_inputs + prog.num_outputs or len(consts) != prog.num_consts:
        raise CompileError(f"control flow: {prog.symbol} takes other arguments than given")
    pointers = [b.data for b in (*args, *consts)]
    # a void* (the run function's workspace parameter): through an integer, as the
    # simplifier drops a cast between two handles
    workspace = Cast("handle", Cast("uint64", ws.data))
    status = call_extern("int32", prog.symbol, *pointers, workspace)
    return AssertStmt(eq(status, 0), "", seq())


def _consts(prog: BodyProgram, ins: Sequence[Buffer]) -> list[Buffer]:
    return list(ins[prog.const_start : prog.const_start + prog.num_consts])


# -- if ---------------------------------------------------------------------------------


@register_compute("control.if")
def if_(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """A branch: the then or else body's run function, writing the outputs directly."""
    then_p, else_p = _programs(attrs, 2, "control.if")

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        ws = _workspace((then_p, else_p))
        captured = ins[1 : 1 + then_p.num_inputs]
        then_s = _call(then_p, [*captured, *outs], _consts(then_p, ins), ws)
        else_s = _call(else_p, [*captured, *outs], _consts(else_p, ins), ws)
        cond = _first(ins[0])
        return _allocate([ws], IfThenElse(cond.astype("bool"), then_s, else_s))

    return _extern(inputs, out_type, "ctl_if", body)


# -- scan -------------------------------------------------------------------------------


@register_compute("control.scan")
def scan(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """ONNX Scan: per step, slice the scan inputs, call the body, carry the states in the
    outputs and write the step's scan outputs into their slot."""
    (prog,) = _programs(attrs, 1, "control.scan")
    n, m = attrs["num_states"], attrs["num_scan_inputs"]
    in_axes, in_dirs = attrs["scan_input_axes"], attrs["scan_input_directions"]
    out_axes, out_dirs = attrs["scan_output_axes"], attrs["scan_output_directions"]

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        ws = _workspace((prog,))
        xs = [ins[n + k] for k in range(m)]
        length = int(xs[0].shape[in_axes[0]].value)  # type: ignore[attr-defined]
        slices = [
            _temp(TensorType(_drop(x.shape, in_axes[k]), x.dtype), f"ctl_x{k}")
            for k, x in enumerate(xs)
        ]
        states = [_temp(_tt(outs[i]), f"ctl_s{i}") for i in range(n)]
        ys = [
            _temp(TensorType(_drop(y.shape, out_axes[k]), y.dtype), f"ctl_y{k}")
            for k, y in enumerate(outs[n:])
        ]
        captured = ins[n + m : prog.num_inputs]
        t = Var("ctl_t", "int64")

        def step(direction: int) -> PrimExpr:
            return tir_const(length - 1, "int64") - t if direction else t

        steps: list[Stmt] = [
            _copy(s, x, None, (in_axes[k], step(in_dirs[k])))
            for k, (s, x) in enumerate(zip(slices, xs, strict=True))
        ]
        args = [*outs[:n], *slices, *captured, *states, *ys]
        steps.append(_call(prog, args, _consts(prog, ins), ws))
        steps += [_copy(outs[i], states[i]) for i in range(n)]
        steps += [
            _copy(outs[n + k], y, (out_axes[k], step(out_dirs[k])), None) for k, y in enumerate(ys)
        ]
        loop = _range(t, length, seq(*steps))
        init = [_copy(outs[i], ins[i]) for i in range(n)]
        return _allocate([ws, *slices, *states, *ys], seq(*init, loop))

    return _extern(inputs, out_type, "ctl_scan", body)


def _drop(shape: Sequence[PrimExpr], axis: int) -> tuple[int, ...]:
    dims = [int(d.value) for d in shape if isinstance(d, IntImm)]
    return tuple(dims[:axis] + dims[axis + 1 :])


def _tt(buf: Buffer) -> TensorType:
    return TensorType(tuple(int(d.value) for d in buf.shape if isinstance(d, IntImm)), buf.dtype)


# -- loop -------------------------------------------------------------------------------


@register_compute("control.loop")
def loop(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """ONNX Loop: call the body while ``i < trip_count`` and the condition holds, carrying
    the values in the outputs; scan outputs (static count only) fill row ``i``."""
    (prog,) = _programs(attrs, 1, "control.loop")
    n = attrs["num_carried"]
    count, bound = attrs["iterations"], attrs["trip_bound"]

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        ws = _workspace((prog,))
        trip, cond = ins[0], ins[1]
        it = decl_buffer((), "int64", "ctl_i", scope="local")
        go = decl_buffer((), "bool", "ctl_c", scope="local")
        go_out = decl_buffer((), "bool", "ctl_co", scope="local")
        carried = [_temp(_tt(outs[i]), f"ctl_v{i}") for i in range(n)]
        scan_ts = [
            _temp(TensorType(_tt(y).shape[1:], y.dtype), f"ctl_y{k}")
            for k, y in enumerate(outs[n:])
        ]
        captured = ins[2 + n : prog.num_inputs]
        i = Var("ctl_iter", "int64")
        steps: list[Stmt] = [store(it, i)]
        args = [it, go, *outs[:n], *captured, go_out, *carried, *scan_ts]
        steps.append(_call(prog, args, _consts(prog, ins), ws))
        steps.append(store(go, go_out[()]))
        steps += [_copy(outs[k], carried[k]) for k in range(n)]
        steps += [_copy(outs[n + k], y, (0, i), None) for k, y in enumerate(scan_ts)]
        if count >= 0:  # scan outputs: the count is static and nothing stops the loop early
            nest: Stmt = _range(i, count, seq(*steps))
        else:
            nest = _guarded_loop(i, _first(trip), go[()], bound, seq(*steps))
        init: list[Stmt] = [store(go, _first(cond).astype("bool"))]
        init += [_copy(outs[k], ins[2 + k]) for k in range(n)]
        temps = [ws, it, go, go_out, *carried, *scan_ts]
        return _allocate(temps, seq(*init, nest))

    return _extern(inputs, out_type, "ctl_loop", body)


def _guarded_loop(i: Var, trip: PrimExpr, go: PrimExpr, bound: int, body: Stmt) -> Stmt:
    """``for i in [0, trip) while go``: one loop for a small static bound, else a nest of
    base-256 digits, every level guarded, so an early stop costs at most 256 checks a level."""
    limit = INT64_MAX if bound < 0 else bound
    if limit <= FLAT_LOOP_LIMIT:
        guard = And(go, i < trip)
        return _range(i, limit, IfThenElse(guard, body))
    levels = 1
    while DIGIT**levels < limit:
        levels += 1
    digits = [Var(f"ctl_d{k}", "int64") for k in range(levels)]
    prefix: PrimExpr = tir_const(0, "int64")
    prefixes: list[PrimExpr] = []
    for d in reversed(digits):  # the most significant digit first
        prefix = prefix * tir_const(DIGIT, "int64") + d if prefixes else d
        prefixes.append(prefix)
    from_inner = list(reversed(prefixes))  # prefixes[k] covers digits k.. (k=0: the index)
    nest: Stmt = IfThenElse(And(go, from_inner[0] < trip), LetStmt(i, from_inner[0], body))
    for k in range(1, levels):
        scale = tir_const(DIGIT**k, "int64")
        inner = _range(digits[k - 1], DIGIT, nest)
        nest = IfThenElse(And(go, Mul(from_inner[k], scale) < trip), inner)
    top = -(-limit // DIGIT ** (levels - 1))
    return _range(digits[levels - 1], min(DIGIT, top), nest)
