"""optimize: the standard graph optimisation pipeline, IRModule (+ params) -> IRModule.

Binds ``params`` as constants (when given), then runs
:data:`~ember.transform.pass_manager.STANDARD_PIPELINE` at ``opt_level`` (plus
``convert_layout`` when the context selects it): level 0 runs
nothing, 1 constant folding and dead-code elimination, 2 (the default) adds
simplification (batch-norm folding, no-op reshapes/transposes/casts) and common
subexpression elimination. Fusion is not part of it: the build driver runs
``fuse_ops`` right before lowering.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ember.ir.module import IRModule
from ember.transform.bind_params import bind_params
from ember.transform.pass_manager import PassContext, pipeline, standard_pipeline


def optimize(
    mod: IRModule,
    params: Mapping[str, np.ndarray] | None = None,
    opt_level: int = 2,
    required: Sequence[str] = (),
    disabled: Sequence[str] = (),
    debug: bool = False,
    ctx: PassContext | None = None,
) -> IRModule:
    """Bind ``params`` and run the standard pipeline; pass ``ctx`` to get the report."""
    if params:
        mod = bind_params(mod, params)
    if ctx is None:
        ctx = PassContext(opt_level, tuple(required), tuple(disabled), debug)
    return pipeline(standard_pipeline(ctx), ctx.opt_level)(mod, ctx)
