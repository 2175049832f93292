"""Golden C for small kernels: any change to the generated text must be deliberate.

Regenerate with ``EMBER_REGEN_GOLDEN=1 .venv/bin/pytest tests/codegen/test_c_golden.py`` and
explain the diff in the commit message.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ember import tir
from ember.codegen.c import generate_source
from ember.tir import te

GOLDEN = Path(__file__).parent / "golden"


def vector_add() -> tir.PrimFunc:
    """A parallel + vectorized elementwise kernel."""
    a = te.placeholder((1000,), "float32", "A")
    b = te.placeholder((1000,), "float32", "B")
    c = te.compute((1000,), lambda i: a[i] + b[i], "C")
    s = te.create_schedule(c)
    outer, inner = s[c].split(c.op.axis[0], factor=64)
    s[c].parallel(outer)
    s[c].vectorize(inner)
    return te.lower(s, [a, b, c], name="vector_add")


def dense_relu() -> tir.PrimFunc:
    """A reduction with an init nest, a fused bias and a max."""
    x = te.placeholder((4, 16), "float32", "X")
    w = te.placeholder((8, 16), "float32", "W")
    bias = te.placeholder((8,), "float32", "bias")
    k = te.reduce_axis(16, "k")
    d = te.compute((4, 8), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), "dense")
    out = te.compute((4, 8), lambda i, j: tir.max(d[i, j] + bias[j], 0.0), "out")
    s = te.create_schedule(out)
    s[d].compute_at(s[out], out.op.axis[0])
    return te.lower(s, [x, w, bias, out], name="dense_relu")


def scaled_reverse() -> tir.PrimFunc:
    """Symbolic extent, scalar parameter, heap workspace, integer floor division."""
    n = tir.Var("n")
    a = tir.decl_buffer((n,), "float32", "A")
    b = tir.decl_buffer((n,), "float32", "B")
    t = tir.decl_buffer((n,), "float32", "T", scope="local")
    scale = tir.Var("scale", "float32")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.Allocate(
        t,
        tir.seq(
            tir.for_range(i, n, tir.store(t, a[i] * scale, i)),
            tir.for_range(j, n, tir.store(b, t[n - 1 - j] + tir.cast("float32", (j - 3) // 2), j)),
        ),
        tir.StorageKind.HEAP,
    )
    return tir.PrimFunc("scaled_reverse", (a, b, scale), body)


def parallel_rows() -> tir.PrimFunc:
    """A parallel loop worth threads: a range lambda with a closure of buffers and scalars."""
    a = tir.decl_buffer((2048, 1024), "float32", "A")
    c = tir.decl_buffer((2048, 1024), "float32", "C")
    scale = tir.Var("scale", "float32")
    i, j, off = tir.Var("i"), tir.Var("j"), tir.Var("off", "float32")
    value = a[i, j] * scale + tir.cast("float32", i) + off
    row = tir.for_range(j, 1024, tir.store(c, value, i, j), tir.ForKind.VECTORIZED)
    body = tir.LetStmt(off, scale * 2.0, tir.for_range(i, 2048, row, tir.ForKind.PARALLEL))
    return tir.PrimFunc("parallel_rows", (a, c, scale), body)


def _relu(t: te.Tensor, name: str) -> te.Tensor:
    return te.compute(t.shape, lambda i: tir.if_then_else(t[i] < 0.0, 0.0, t[i]), name)


def relu_chain() -> tir.PrimFunc:
    """Inlined producers read twice (select ReLUs) bound once by Let; a checked gather."""
    x = te.placeholder((64,), "float32", "X")
    idx = te.placeholder((64,), "int64", "I")
    t = te.compute((64,), lambda i: x[tir.index_check(idx[i], 64, "the test's indices")], "G")
    for k in range(3):
        t = _relu(t, f"R{k}")
    s = te.create_schedule(t)
    for op in s.ops:
        if op is not t.op and isinstance(op, te.ComputeOp):
            s[op].compute_inline()
    s[t].vectorize(t.op.axis[0])
    return te.lower(s, [x, idx, t], name="relu_chain")


KERNELS: list[Callable[[], tir.PrimFunc]] = [
    vector_add,
    dense_relu,
    scaled_reverse,
    relu_chain,
    parallel_rows,
]


@pytest.mark.parametrize("make", KERNELS, ids=lambda f: f.__name__)
def test_golden_c(make: Callable[[], tir.PrimFunc]) -> None:
    text = generate_source([make()])
    path = GOLDEN / f"{make.__name__}.c"
    if os.environ.get("EMBER_REGEN_GOLDEN") == "1":
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with EMBER_REGEN_GOLDEN=1"
    assert text == path.read_text(), f"generated C for {make.__name__} changed; see {path}"


@pytest.mark.parametrize("make", KERNELS, ids=lambda f: f.__name__)
def test_golden_kernel_text_is_deterministic(make: Callable[[], tir.PrimFunc]) -> None:
    assert generate_source([make()]) == generate_source([make()])
