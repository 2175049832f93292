"""The float32 polynomials' Horner steps are ``llvm.fmuladd`` (one FMA each where the
target has it: yolo's SiLU epilogues spent twice the instructions on separate multiplies
and adds), and sigmoid's shorter exp gives the general exp's bits; their accuracy is
test_llvm_target's polynomial test."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.tir.buffer import decl_buffer
from ember.tir.expr import IntImm, Var
from ember.tir.op import sigmoid
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc

pytest.importorskip("llvmlite")

from ember.codegen.llvm import mathfn  # noqa: E402
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


def _sigmoid_func(n: int) -> PrimFunc:
    a, b = decl_buffer((n,), "float32", "a"), decl_buffer((n,), "float32", "b")
    i = Var("i", "int32")
    body = BufferStore(b, sigmoid(a[i]), (i,))
    loop = For(i, IntImm("int32", 0), IntImm("int32", n), ForKind.VECTORIZED, body)
    return PrimFunc("sig", (a, b), loop)


def _run(mod, x: np.ndarray) -> np.ndarray:
    out = ember.nd.array(np.zeros_like(x))
    mod["ember_sig"](ember.nd.array(x), out)
    return out.numpy()


def test_sigmoid_exp_of_nonpositive_equals_the_general_exp(build, monkeypatch):
    """sigmoid takes exp(-|x|) from the shorter exp_nonpositive (no upper clamp, one
    scale): bit for bit what the general exp gave, specials and random bit patterns."""
    n = 1 << 16
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32).copy()
    x[:20000] = np.linspace(-100, 100, 20000, dtype=np.float32)
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 87.33654, -87.33654, -87.3366, 1e-45]
    x[20000 : 20000 + len(specials)] = specials
    new = _run(build([_sigmoid_func(n)]), x)
    monkeypatch.setattr(mathfn, "_exp_nonpositive", mathfn._exp)
    old = _run(build([_sigmoid_func(n)]), x)
    np.testing.assert_array_equal(new.view(np.uint32), old.view(np.uint32))
