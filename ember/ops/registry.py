"""Operator implementations for code generation: how each graph-IR op becomes loop IR.

Three tables, all keyed by the graph-IR op name:

* ``compute``: ``fn(inputs: list[te.Tensor], attrs, out_type) -> te.Tensor | list[te.Tensor]``,
  the op's tensor expression (the default path; stages of a fused group are inlined into
  each other by ``ember.lowering.lower_group``);
* ``schedule``: ``fn(ctx: ScheduleContext) -> None`` for an *anchor* op (conv, dense,
  reductions...): shapes the loops of the op's own stage and of the group's output. A
  schedule is registered for a target key (``cpu`` by default; ``x86-avx512``, ``x86-avx2``,
  ``arm-neon``... from ``Target.keys``) and the most specific key the target has wins;
  ``ctx.target.cpu`` tells it the vector width and register count;
* ``legalize``: ``fn(call: ir.Call) -> ir.Expr`` rewrites an op into simpler graph-IR ops
  before fusion (e.g. an LSTM unrolled into matmuls and elementwise ops).

Example::

    @register_compute("relu")
    def relu(inputs, attrs, out_type):
        x = inputs[0]
        return te.compute(x.shape, lambda *i: tir.max(x[i], tir.const(0, x.dtype)), "relu")
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ember.ir.expr import Call, Expr
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.support.registry import Registry
from ember.target import Target
from ember.tir import PrimFunc, te

ComputeFn = Callable[[list[te.Tensor], Attrs, Type], "te.Tensor | Sequence[te.Tensor]"]
LegalizeFn = Callable[[Call], Expr]

#: the target a group is being lowered for (set by lower_group around the computes): a
#: compute may pick a layout for it (nn.conv_packed: channels last where the C micro-kernel runs)
COMPUTE_TARGET: ContextVar[Target | None] = ContextVar("compute_target", default=None)

#: the target of the build being legalized (set by the driver around the legalizer, through
#: legalize_scope; None outside a build): a legalizer may choose a form only that target's
#: kernels run (ember.ops.nn_conv_lane_groups, the zero block of ember.ops.nn_conv_pack)
LEGALIZE_TARGET: ContextVar[Target | None] = ContextVar("legalize_target", default=None)


@contextmanager
def legalize_scope(target: Target) -> Iterator[None]:
    """Legalize for ``target`` (LEGALIZE_TARGET) inside the block."""
    token = LEGALIZE_TARGET.set(target)
    try:
        yield
    finally:
        LEGALIZE_TARGET.reset(token)


@dataclass
class ScheduleContext:
    """What an anchor op's schedule may touch: the schedule, its own output tensors, the
    group's output tensors (the anchor's epilogue lives there) and the target."""

    sch: te.Schedule
    op_outputs: list[te.Tensor]
    group_outputs: list[te.Tensor]
    attrs: Attrs
    target: Target
    is_group_output: bool
    #: rewrites of the lowered PrimFunc the schedule asks for (applied in order by lower_group)
    post_lower: list[Callable[[PrimFunc], PrimFunc]] = field(default_factory=list)

    def stage(self, tensor: te.Tensor) -> Any:
        """The schedule stage of ``tensor``."""
        return self.sch[tensor]


ScheduleFn = Callable[[ScheduleContext], None]

COMPUTES: Registry[ComputeFn] = Registry("op compute")
SCHEDULES: Registry[ScheduleFn] = Registry("op schedule")
LEGALIZERS: Registry[LegalizeFn] = Registry("op legalizer")


def register_compute(op_name: str, override: bool = False) -> Callable[[ComputeFn], ComputeFn]:
    """Decorator: the tensor expression of graph-IR op ``op_name``."""

    def wrap(fn: ComputeFn) -> ComputeFn:
        return COMPUTES.register(op_name, fn, override=override)

    return wrap


def register_schedule(
    op_name: str, key: str = "cpu", override: bool = False
) -> Callable[[ScheduleFn], ScheduleFn]:
    """Decorator: the schedule used on targets with ``key`` when ``op_name`` is the anchor of
    a fused group (``key`` is a target key such as ``cpu`` or ``x86-avx512``)."""

    def wrap(fn: ScheduleFn) -> ScheduleFn:
        return SCHEDULES.register(_schedule_key(key, op_name), fn, override=override)

    return wrap


def register_legalize(op_name: str, override: bool = False) -> Callable[[LegalizeFn], LegalizeFn]:
    """Decorator: rewrite ``op_name`` into simpler graph-IR ops before fusion."""

    def wrap(fn: LegalizeFn) -> LegalizeFn:
        return LEGALIZERS.register(op_name, fn, override=override)

    return wrap


def get_compute(op_name: str) -> ComputeFn:
    """The compute of ``op_name`` (the error lists the ops that have one)."""
    return COMPUTES.get(op_name)


def find_schedule(op_name: str, target: Target | None = None) -> ScheduleFn | None:
    """The anchor schedule of ``op_name`` for the most specific of ``target``'s keys (only
    ``cpu`` without a target), if any."""
    keys = target.keys if target is not None else ("cpu",)
    for key in keys:
        fn = SCHEDULES.find(_schedule_key(key, op_name))
        if fn is not None:
            return fn
    return None


def _schedule_key(key: str, op_name: str) -> str:
    return f"{key}/{op_name}"


def find_legalizer(op_name: str) -> LegalizeFn | None:
    """The legalizer of ``op_name``, if any."""
    return LEGALIZERS.find(op_name)


def has_compute(op_name: str) -> bool:
    """True when ``op_name`` can be lowered (it has a compute or is legalized away)."""
    return op_name in COMPUTES or op_name in LEGALIZERS
