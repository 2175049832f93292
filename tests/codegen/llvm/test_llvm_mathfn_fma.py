"""The float32 polynomials' Horner steps are ``llvm.fmuladd`` (one FMA each where the
target has it; yolo's SiLU epilogues spent twice the instructions on separate multiplies
and adds); their accuracy is test_llvm_target's polynomial test."""

from __future__ import annotations

import pytest

pytest.importorskip("llvmlite")

from ember.codegen.llvm.ir_text import ModuleContext  # noqa: E402
from ember.codegen.llvm.mathfn import polynomial  # noqa: E402


@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "erf"])
def test_polynomials_use_fmuladd(op):
    ctx = ModuleContext()
    name = polynomial(ctx, op, "<8 x float>")
    text = "\n".join(ctx.helpers.values())
    assert name in ctx.helpers
    assert "@llvm.fmuladd.v8f32(" in text
    assert "llvm.fmuladd.v8f32" in "\n".join(ctx.declarations.values())
