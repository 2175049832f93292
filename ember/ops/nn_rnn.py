"""Recurrent layers nn.rnn, nn.gru and nn.lstm: a legalizer into one input projection and
one ``nn.recurrence`` kernel, and that kernel.

The legalizer computes the input projection of every time step and both directions as ONE
matrix product ``X (S*B, I) x W^T (I, D*G*H)`` plus the biases (a constant W is transposed
and the two biases summed at build time, so it is an ``nn.matmul`` with a packed constant
weight and the tiled matmul schedule). ``nn.recurrence`` then runs all steps in one loop
nest, hand-written loop IR (``te.extern``) built by ember.ops.nn_rnn_kernel.
"""

from __future__ import annotations

import numpy as np

from ember import tir
from ember.errors import CompileError
from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.op import Attrs, OpDef
from ember.ir.ops.nn_rnn import pack_recurrent_weight, recurrence_segments
from ember.ir.types import TensorType, TupleType, Type
from ember.ops.nn_rnn_kernel import CELLS, Kernel
from ember.ops.nn_schedule_tiles import MATMUL_MIN_ROWS
from ember.ops.registry import register_compute, register_legalize
from ember.tir import te
from ember.tir.buffer import Buffer

#: column blocks tried for a constant R, widest first: the one that pads least wins.
BLOCKS: tuple[int, ...] = (64, 32, 16, 8)
#: column blocks of the input projection, widest first (the first dividing H is taken).
#: A matmul with a constant weight (K, N) walks its columns down rows N floats apart; at
#: N = 2048 (bidirectional LSTM, H 256) those rows collide in a few cache sets. Blocked
#: (N/u, K, u), measured one thread, 40 x 512 x 2048: (K, N) 2.72 ms, u = 64 2.11 ms,
#: u = 32 1.85 ms (the (8, 32) tile), u = 16 1.85 ms (6 x 16 tile); onnxruntime 1.67 ms.
#: With the weight cold (a whole model: 2 MiB per layer read once per run) u = 16 wins:
#: each 6 x 16 tile streams its block's K x 64 bytes contiguously where u = 32 read every
#: other line. One thread, CPU time, interleaved, load 7: crnn's bidirectional LSTM
#: (24 x 256, H 256) 2.15 -> 1.80 ms median (onnxruntime 2.31), crnn 11.6 -> 10.7 ms.
UNITS: tuple[int, ...] = (16, 8)


def _shape(e: Expr) -> tuple[int, ...]:
    ty = e.type
    if not isinstance(ty, TensorType):
        raise CompileError(f"recurrent op legalization expected a tensor, got {ty}")
    return tuple(int(d) for d in ty.shape)


def _cols(x: Expr, start: int, stop: int) -> Expr:
    """Columns [start, stop) of the last axis of the 2-D ``x`` (a constant stays one)."""
    if isinstance(x, Constant):
        return const(np.ascontiguousarray(np.asarray(x.data)[:, start:stop]))
    rows = _shape(x)[0]
    return call("strided_slice", x, begin=[0, start], end=[rows, stop], strides=[1, 1])


def projection_unit(hidden: int) -> int:
    """The column block of the projection: the widest of UNITS dividing H, else H."""
    return next((u for u in UNITS if hidden % u == 0), hidden)


def blocked_matmul(x2: Expr, wt: np.ndarray, unit: int) -> Expr:
    """``x2`` (M, K) times the constant ``wt`` (K, N) as the batched product (N/unit, M,
    unit) of wt's column blocks, each block's K x unit floats contiguous (see UNITS)."""
    k, n = wt.shape
    packed = wt.reshape(k, n // unit, unit).transpose(1, 0, 2)
    return call("nn.matmul", x2, const(np.ascontiguousarray(packed)))


#: nn.matmul's legalizer takes streamed_matmul for a float32 constant rhs of at least this
#: many bytes times at most STREAMED_MAX_ROWS rows (from MATMUL_MIN_ROWS, the tiled
#: schedule's): a weight that a run reads once from L3 or memory. Measured in crnn (one
#: thread, CPU time, interleaved, load 6.7; its two 24 x 512 x 256 linear layers): the
#: model 11.60 -> 11.16 ms median, 8.81 -> 8.15 best; the layers 0.34 -> 0.26 ms.
#: Raised from 256 KiB to 512 KiB (Zen 5's L2 is 1 MiB): BERT's 64 x 128 @ 128 x 512 and
#: 64 x 512 @ 512 x 128 FFN products (256 KiB) ran at ~42% of the FMA limit blocked, the
#: plain product's 8 x 64 tiles at ~84% (one thread, thread CPU time, A/B interleaved in one
#: process, 500 rounds, load 2, the same bits): bert 0.336 -> 0.289 ms (c, 0.859x), c
#: -mcpu=haswell 0.575 -> 0.534 (0.928x), llvm 0.525 -> 0.397 (0.757x); crnn (512 KiB)
#: unchanged.
STREAMED_MIN_BYTES = 512 << 10
STREAMED_MAX_ROWS = 64


def streamed_matmul(x2: Expr, w: Expr, rows: int) -> Expr | None:
    """``x2`` (rows, K) times a constant ``w`` (K, N) that a run reads once from beyond L2
    (few rows, a large weight; crnn's 24 x 512 x 256 linear layers) in column blocks of 16
    (blocked_matmul, as the recurrent projection) transposed back to (rows, N); None when
    the product is not one (see STREAMED_MIN_BYTES)."""
    if not isinstance(w, Constant) or not MATMUL_MIN_ROWS <= rows <= STREAMED_MAX_ROWS:
        return None
    data = np.asarray(w.data)
    if data.dtype != np.float32 or data.ndim != 2 or data.nbytes < STREAMED_MIN_BYTES:
        return None
    if data.shape[1] % 16:
        return None
    blocks = blocked_matmul(x2, data, 16)
    return call(
        "reshape", call("transpose", blocks, axes=(1, 0, 2)), newshape=(rows, data.shape[1])
    )


def choose_block(segments: list[int]) -> int:
    """The block of BLOCKS that pads the segments least (the widest among equals)."""
    padded = {b: sum(-(-cols // b) * b for cols in segments) for b in BLOCKS}
    return min(BLOCKS, key=lambda b: (padded[b], -b))


class _Legalizer:
    """The projection + nn.recurrence graph of one recurrent call."""

    def __init__(self, node: Call) -> None:
        assert isinstance(node.op, OpDef)
        self.cell = node.op.name.removeprefix("nn.")
        self.node = node
        self.attrs = node.attrs
        self.hidden = int(self.attrs["hidden_size"])
        self.gh = CELLS[self.cell][0] * self.hidden
        self.lbr = self.cell == "gru" and bool(self.attrs["linear_before_reset"])
        self.seq, self.batch, self.inp = _shape(node.args[0])
        self.dirs = _shape(node.args[1])[0]
        self.unit = projection_unit(self.hidden)

    def projection(self) -> Expr:
        """X W^T + biases for every step and direction, in column blocks of ``unit``
        (projection_unit): (D*G*H / unit, S*B, unit). A constant W is packed at build time
        to (D*G*H / unit, I, unit), each block's rows contiguous for the matmul."""
        x, w, _, b = self.node.args[:4]
        rows, cols, unit = self.seq * self.batch, self.dirs * self.gh, self.unit
        x2 = call("reshape", x, newshape=(rows, self.inp))
        bias = self.input_bias(b)
        no_bias = isinstance(bias, Constant) and not np.asarray(bias.data).any()
        if isinstance(w, Constant):
            proj = blocked_matmul(x2, np.asarray(w.data).reshape(cols, self.inp).T, unit)
            if no_bias:
                return proj
            assert isinstance(bias, Constant)
            blocked = np.asarray(bias.data).reshape(cols // unit, 1, unit)
            return call("add", proj, const(blocked))
        proj = call("nn.dense", x2, call("reshape", w, newshape=(cols, self.inp)))
        if not no_bias:
            proj = call("add", proj, bias)
        blocks = call("reshape", proj, newshape=(rows, cols // unit, unit))
        return call("transpose", blocks, axes=(1, 0, 2))

    def input_bias(self, b: Expr) -> Expr:
        """The bias added to the projection, (D*G*H,): W's bias plus R's, except GRU's
        h-gate recurrent bias under linear_before_reset (the kernel adds it)."""
        gh = self.gh
        width = 2 * self.hidden if self.lbr else gh  # R's bias columns folded in
        if isinstance(b, Constant):
            data = np.asarray(b.data)
            total = data[:, :gh].copy()
            total[:, :width] += data[:, gh : gh + width]
            return const(total.reshape(-1))
        summed = call("add", _cols(b, 0, width), _cols(b, gh, gh + width))
        if self.lbr:
            summed = call("concatenate", summed, _cols(b, width, gh), axis=1)
        return call("reshape", summed, newshape=(self.dirs * gh,))

    def recurrent_weight(self) -> tuple[Expr, int]:
        """R packed for the kernel and its block (build time for a constant R)."""
        r = self.node.args[2]
        segments = recurrence_segments(self.cell, self.hidden, self.lbr)
        if isinstance(r, Constant):
            block = choose_block(segments)
            return const(pack_recurrent_weight(np.asarray(r.data), segments, block)), block
        gates, hid = CELLS[self.cell][0], self.hidden
        blocks = call("reshape", r, newshape=(self.dirs, gates, hid, hid))
        return call("transpose", blocks, axes=(0, 1, 3, 2)), hid  # one block per gate

    def run(self) -> Expr:
        args = self.node.args
        rp, block = self.recurrent_weight()
        inputs = [self.projection(), rp, args[4]]
        peepholes = False
        if self.cell == "lstm":
            p = args[6]
            peepholes = not (isinstance(p, Constant) and not np.asarray(p.data).any())
            inputs += [args[5], p]
        if self.lbr:
            b = args[3]
            rbh = _cols(b, 2 * self.gh - self.hidden, 2 * self.gh)
            inputs.append(rbh)
        n_main = 7 if self.cell == "lstm" else 5
        inputs.extend(args[n_main:])  # sequence_lens
        given = dict(self.attrs)
        extra = {k: given[k] for k in ("input_forget", "linear_before_reset") if k in given}
        return call(
            "nn.recurrence",
            *inputs,
            name=self.node.name,
            cell=self.cell,
            block=block,
            peepholes=peepholes,
            hidden_size=self.hidden,
            direction=self.attrs["direction"],
            activations=self.attrs["activations"],
            activation_alpha=self.attrs["activation_alpha"],
            activation_beta=self.attrs["activation_beta"],
            clip=self.attrs["clip"],
            **extra,
        )


def legalize_recurrent(node: Call) -> Expr:
    """nn.rnn / nn.gru / nn.lstm -> one input projection and one nn.recurrence."""
    return _Legalizer(node).run()


for _op in ("nn.rnn", "nn.gru", "nn.lstm"):
    register_legalize(_op)(legalize_recurrent)


@register_compute("nn.recurrence")
def recurrence(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """All steps of a recurrent layer in one hand-written loop nest (see Kernel)."""
    if not isinstance(out_type, TupleType):
        raise CompileError(f"nn.recurrence must return a tuple, got {out_type}")
    shapes = []
    for field in out_type.fields:
        assert isinstance(field, TensorType)
        shapes.append(field.shape)
    dtype = inputs[0].dtype
    if dtype not in ("float32", "float64"):
        raise CompileError(f"nn.recurrence computes float32 or float64, got {dtype}")

    def body(ins: list[Buffer], outs: list[Buffer]) -> tir.Stmt:
        return Kernel(attrs, ins, outs).build()

    out = te.extern(shapes, inputs, body, name="recurrence", dtype=dtype)
    assert isinstance(out, list)
    return out
