"""ember.tir.te: the tensor-expression DSL (placeholder, compute, reductions, schedules, lower).

Example::

    from ember.tir import te
    A = te.placeholder((64,), "float32", "A")
    B = te.compute((64,), lambda i: A[i] * 2.0, "B")
    s = te.create_schedule(B)
    s[B].vectorize(B.op.axis[0])
    func = te.lower(s, [A, B], name="double")
"""

from __future__ import annotations

from ember.tir.op import if_then_else
from ember.tir.te.lower import lower
from ember.tir.te.schedule import Schedule, Stage, create_schedule
from ember.tir.te.tensor import (
    ComputeOp,
    ExternOp,
    IterVar,
    PlaceholderOp,
    Reduce,
    Tensor,
    TensorLoad,
    compute,
    extern,
    max,
    min,
    placeholder,
    reduce_axis,
    sum,
)

__all__ = [
    "ComputeOp", "ExternOp", "IterVar", "PlaceholderOp", "Reduce", "Schedule", "Stage", "Tensor",
    "TensorLoad", "compute", "create_schedule", "extern", "if_then_else", "lower", "max", "min",
    "placeholder", "reduce_axis", "sum",
]  # fmt: skip
