"""Check one fused group's lowering without a C compiler: lower it to loop IR, verify it,
run it in the loop-IR interpreter and compare every output with the graph-IR reference.

Example::

    v = Var("x", TensorType((3, 5), "float32"))
    check_lowered(primitive([v], call("cumsum", v, axis=1)), [x])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ember import tir
from ember.ir import Attrs, Expr, Function, Var, evaluate
from ember.lowering.lower_group import lower_group
from ember.tir import PrimFunc


def primitive(params: Sequence[Var], body: Expr) -> Function:
    """``body`` over ``params`` as a fused group (``Primitive=1``), what lower_group takes."""
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def check_lowered(
    func: Function,
    inputs: Sequence[np.ndarray],
    rtol: float = 1e-5,
    atol: float = 1e-5,
    externs: Mapping[str, Callable[..., Any]] | None = None,
) -> PrimFunc:
    """Lower the group ``func``, verify and interpret it on ``inputs``, and check every
    output's dtype and values (NaNs equal) against the reference evaluator; return the
    PrimFunc for further checks of its text."""
    refs = evaluate(Function(func.params, func.body), list(inputs))
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, [np.array(x, order="C") for x in inputs] + outs, externs=externs)
    for i, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        assert out.dtype == ref.dtype, f"output {i}: dtype {out.dtype} != {ref.dtype}"
        np.testing.assert_allclose(
            out, ref, rtol=rtol, atol=atol, equal_nan=True, err_msg=f"output {i}"
        )
    return prim
