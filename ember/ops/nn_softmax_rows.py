"""A float32 softmax over the last axis, row by row (hand-written loop IR, ``te.extern``).

The te softmax (ember.ops.nn_norm) computes its statistics for the whole tensor at root:
the max, the exponentials, their sum and the quotient are passes over all of it, the
exponentials in a buffer of the tensor's size. For attention over long sequences that
tensor leaves the caches (Whisper's encoder: 6 heads x 1500 x 1500 scores, 54 MB), and
every pass streams it from memory: 24 ms a layer at one thread.

Here each row is finished before the next: its max in LANES partial maxima, then
``exp(x - max)`` written to the output while LANES partial sums gather, then the output
row scaled by the reciprocal of the sum. A row's last ``n % LANES`` elements take one
vector step over its last LANES (overlapping: the maximum is idempotent, and the sum adds
only the new lanes), and the LANES partials fold in vector halvings: with the inline exp
(ember.codegen.c.vecmath.exp_inline_helper), ViT's 12 x 197 x 197 softmax 171 -> 140 us
and Whisper's 6 x 1500 x 1500 5.3 -> 4.5 ms at one thread (onnxruntime 115 us, 3.5 ms:
its exp hides under the row's first read, ours follows it). A row (6 KB at 1500 scores)
stays in the L1 between its three passes, so the tensor is read once and written once.
Rows run in parallel. The numbers equal the te softmax's up to the summation order.
``nn.log_softmax`` takes the same kernel, summing the exponentials without storing them
and writing ``x - (max + log(sum))`` in the last pass (64 x 1000, one thread: 31 -> 19 us;
onnxruntime 17).

``nn.softmax_rows`` takes the first ``width`` elements of longer rows: the legalizer gives
it the zero-padded product of attention scores (ember.ops.nn_conv's padded rhs) instead of
its slice, which was one more pass over the scores (Whisper-tiny's encoder: 2.6 ms of a
layer's 50).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember import tir
from ember.errors import CompileError
from ember.ops.common import static_shape, unflatten
from ember.ops.nn_common import product
from ember.tir import te
from ember.tir.ir_builder import BufferProxy

#: partial maxima and sums kept side by side (one AVX-512 vector of float32). Four
#: vectors (independent chains) were 10% slower on 1500-score rows.
LANES = 16
#: rows at least this long take the row softmax; shorter ones stay with te's compute,
#: whose passes stay in the caches anyway (A/B, one thread: bert's 64 scores 0.97x,
#: bert_large's 128 1.04x, ViT-Tiny's 197 1.035x faster by rows).
MIN_ROW = 128
#: below this many elements the rows run on one thread.
MIN_PARALLEL = 4096

F32 = "float32"


def row_softmax(x: te.Tensor, width: int = 0, log: bool = False) -> te.Tensor:
    """Softmax of float32 ``x`` over its last axis, row by row (see the module docstring);
    with ``width``, over the first ``width`` elements of each row only (the result's rows
    are ``width`` long); with ``log``, the log-softmax ``x - max - log(sum(exp(x - max)))``
    (the exponentials summed, not stored)."""
    shape = static_shape(x)
    lead, n = tuple(shape[:-1]), width or shape[-1]
    rows = product(lead)

    def build(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
        return _rows_body(ins[0], outs[0], lead, rows, n, log)

    name = "log_softmax_rows" if log else "softmax_rows"
    out = te.extern((*lead, n), [x], build, name=name, dtype=F32)
    assert isinstance(out, te.Tensor)
    return out


def _rows_body(
    x: tir.Buffer, out: tir.Buffer, lead: tuple[int, ...], rows: int, n: int, log: bool
) -> tir.Stmt:
    if n < LANES:
        raise CompileError(f"row_softmax: rows of {n} are shorter than LANES ({LANES})")
    ib = tir.IRBuilder()
    y = ib.buffer(out)
    whole, tail, last = n // LANES, n % LANES, n - LANES
    kind = tir.ForKind.PARALLEL if rows > 1 and rows * n >= MIN_PARALLEL else tir.ForKind.SERIAL
    vector = tir.ForKind.VECTORIZED
    with ib.for_range(0, rows, "row", kind=kind) as r:
        idx = unflatten(r, lead)
        acc = ib.allocate(F32, (LANES,), "acc")
        with ib.for_range(0, LANES, "l", kind=vector) as lane:
            acc[lane] = x[(*idx, lane)]
        with ib.for_range(1, whole, "j") as j, ib.for_range(0, LANES, "l", vector) as lane:
            acc[lane] = tir.max(acc[lane], x[(*idx, j * LANES + lane)])
        if tail:  # the row's last LANES elements, overlapping whole ones: max is idempotent
            with ib.for_range(0, LANES, "l", kind=vector) as lane:
                acc[lane] = tir.max(acc[lane], x[(*idx, last + lane)])
        peak = ib.let("peak", _fold(ib, acc, tir.max))
        with ib.for_range(0, LANES, "l", kind=vector) as lane:
            acc[lane] = tir.const(0.0, F32)
        with ib.for_range(0, whole, "j") as j, ib.for_range(0, LANES, "l", vector) as lane:
            e = tir.exp(x[(*idx, j * LANES + lane)] - peak)
            if not log:
                y[(*idx, j * LANES + lane)] = e
                e = y[(*idx, j * LANES + lane)]
            acc[lane] = acc[lane] + e
        if tail:  # rewrites the overlap with the same values, sums only the new lanes
            with ib.for_range(0, LANES, "l", kind=vector) as lane:
                e = tir.exp(x[(*idx, last + lane)] - peak)
                if not log:
                    y[(*idx, last + lane)] = e
                    e = y[(*idx, last + lane)]
                acc[lane] = acc[lane] + tir.if_then_else(
                    lane >= LANES - tail, e, tir.const(0.0, F32)
                )
        total = _fold(ib, acc, lambda a, b: a + b)
        if log:
            shift = ib.let("shift", peak + tir.log(total))
            with ib.for_range(0, n, "k", kind=vector) as k:
                y[(*idx, k)] = x[(*idx, k)] - shift
        else:
            inv = ib.let("inv", tir.const(1.0, F32) / total)
            with ib.for_range(0, n, "k", kind=vector) as k:
                y[(*idx, k)] = y[(*idx, k)] * inv
    return ib.get()


def _fold(ib: tir.IRBuilder, acc: BufferProxy, op: Callable[[Any, Any], Any]) -> tir.PrimExpr:
    """``acc``'s LANES values combined by ``op`` pairwise, halving in vector steps (8, 4, 2
    and 1 instead of 15 dependent scalar steps); the result in acc[0]."""
    half = LANES // 2
    while half:
        with ib.for_range(0, half, "l", kind=tir.ForKind.VECTORIZED) as lane:
            acc[lane] = op(acc[lane], acc[lane + half])
        half //= 2
    return acc[0]
