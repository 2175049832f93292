"""Constant folding is bounded: no folded result larger than MAX_FOLD_OUTPUT_ELEMENTS.

Before, a folded broadcast could materialize any size a model declared (an ``Expand`` to
[2**18, 2**18] spent 84 s); now such a call stays a call and runs at run time.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ember.ir import Call, Function, IRModule, TensorType, Var, call, const, post_order
from ember.transform import fold_constant

#: the module (``ember.transform.fold_constant`` the attribute is the function)
FOLD_MODULE = sys.modules["ember.transform.fold_constant"]


def _module() -> IRModule:
    x = Var("x", TensorType((2, 3), "float32"))
    folded = call("negative", const(np.ones((2, 3), np.float32)))
    return IRModule.from_expr(Function((x,), call("add", x, folded)))


def _ops(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def test_fold_output_size_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ops(fold_constant(_module())) == ["add"]
    # a 6-element result is now too large, though no larger than its input
    monkeypatch.setattr(FOLD_MODULE, "MAX_FOLD_OUTPUT_ELEMENTS", 4)
    assert _ops(fold_constant(_module())) == ["negative", "add"]
