"""Recurrent layers nn.rnn, nn.gru and nn.lstm: a legalizer into one input projection and
one ``nn.recurrence`` kernel, and that kernel.

The legalizer computes the input projection of every time step and both directions as ONE
matrix product ``X (S*B, I) x W^T (I, D*G*H)`` plus the biases (a constant W is transposed
and the two biases summed at build time, so it is an ``nn.matmul`` with a packed constant
weight and the tiled matmul schedule). ``nn.recurrence`` then runs all steps in one loop
nest (hand-written loop IR, ``te.extern``): per direction (a parallel loop when there are
two), per step and batch row, the recurrent product ``h x R^T`` block by block of the
packed R (accumulators of ``block`` lanes, R's rows contiguous), then every gate's
elementwise math in one vectorized loop over the hidden units (clip, the ONNX activations,
peepholes, input_forget, linear_before_reset, per-batch ``sequence_lens``), exactly as the
numpy reference of the op does (ONNX gate order i, o, f, c for LSTM and z, r, h for GRU).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ember import tir
from ember.errors import CompileError
from ember.ir.expr import Call, Constant, Expr, call, const
from ember.ir.op import Attrs, OpDef
from ember.ir.ops.nn_rnn import (
    ACTIVATIONS,
    pack_recurrent_weight,
    recurrence_segments,
)
from ember.ir.types import TensorType, TupleType, Type
from ember.ops.elemwise import FLOAT_UNARY, NUMERIC_UNARY, clamp
from ember.ops.nn_schedule import MATMUL_MIN_ROWS
from ember.ops.registry import register_compute, register_legalize
from ember.tir import PrimExpr, te
from ember.tir.buffer import Buffer

#: cell -> (gates, activations per direction, default activations).
CELLS: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "rnn": (1, 1, ("Tanh",)),
    "gru": (3, 2, ("Sigmoid", "Tanh")),
    "lstm": (4, 3, ("Sigmoid", "Tanh", "Tanh")),
}
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
#: every other product walks R's column blocks backwards: a direction's R (1 MiB at H 256,
#: LSTM) is as large as a core's L2, so walked the same way every step it missed in L2
#: throughout (LRU evicts each block just before its next use); reversed, a step first
#: reads the blocks the previous one read last, still in L2. Results are bitwise the same
#: (each block's sums are unchanged). One thread, CPU time, interleaved, load 7: crnn's
#: bidirectional LSTM 2.42 -> 2.15 ms median (best of 300 level), the bare 48 products
#: of a layer (C) 5-10% in the mean.
SNAKE = True
#: the kernel's scratch buffers (state, products) larger than this come from the heap.
STACK_BYTES = 64 << 10


# --- the legalizer -------------------------------------------------------------------------


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
STREAMED_MIN_BYTES = 256 << 10
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


# --- the nn.recurrence kernel --------------------------------------------------------------

Act = Callable[[PrimExpr], PrimExpr]


def _activation(name: str, alpha: float | None, beta: float | None) -> Act:
    """The ONNX recurrent activation ``name`` on one loop-IR value."""
    key = name.lower()
    a = 0.0 if alpha is None else alpha
    b = 0.0 if beta is None else beta

    def num(x: PrimExpr, v: float) -> PrimExpr:
        return tir.const(v, x.dtype)

    table: dict[str, Act] = {
        "sigmoid": tir.sigmoid,
        "tanh": tir.tanh,
        "relu": lambda x: NUMERIC_UNARY["relu"](x, Attrs()),
        "softsign": lambda x: FLOAT_UNARY["softsign"](x, Attrs()),
        "softplus": lambda x: FLOAT_UNARY["softplus"](x, Attrs()),
        "affine": lambda x: x * num(x, a) + num(x, b),
        "leakyrelu": lambda x: FLOAT_UNARY["leaky_relu"](x, Attrs({"alpha": a})),
        "thresholdedrelu": lambda x: tir.if_then_else(x > num(x, a), x, num(x, 0.0)),
        "scaledtanh": lambda x: num(x, a) * tir.tanh(x * num(x, b)),
        "hardsigmoid": lambda x: FLOAT_UNARY["hard_sigmoid"](x, Attrs({"alpha": a, "beta": b})),
        "elu": lambda x: FLOAT_UNARY["elu"](x, Attrs({"alpha": a})),
    }
    if key not in table:
        raise CompileError(
            f"unknown recurrent activation {name!r}; known: {', '.join(ACTIVATIONS)}"
        )
    return table[key]


Spec = tuple[str, float | None, float | None]


def _activation_specs(attrs: Attrs, dirs: int) -> list[Spec]:
    """Every direction's activations (name, alpha, beta), bound like the reference does."""
    names = list(attrs["activations"]) or list(CELLS[attrs["cell"]][2]) * dirs
    alphas = list(attrs["activation_alpha"])
    betas = list(attrs["activation_beta"])
    out = []
    for name in names:
        _, da, db = ACTIVATIONS[name.lower()]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        out.append((name.lower(), a, b))
    return out


class _Kernel:
    """Loop IR of one nn.recurrence call (see the module docstring)."""

    def __init__(self, attrs: Attrs, ins: list[Buffer], outs: list[Buffer]) -> None:
        self.attrs = attrs
        self.cell = str(attrs["cell"])
        self.ib = tir.IRBuilder()
        self.xw, self.rp, self.h0 = ins[:3]
        self.outs = outs
        dims = [int(d.value) for d in self.rp.shape]  # type: ignore[attr-defined]
        self.dirs, self.nblocks, self.hidden, self.block = dims
        self.unit = int(self.xw.shape[2].value)  # type: ignore[attr-defined]
        self.batch = int(self.h0.shape[1].value)  # type: ignore[attr-defined]
        self.seq = int(self.xw.shape[1].value) // self.batch  # type: ignore[attr-defined]
        self.dtype = self.xw.dtype
        self.gates = CELLS[self.cell][0]
        self.gh = self.gates * self.hidden
        self.lbr = self.cell == "gru" and bool(attrs["linear_before_reset"])
        names = ["c0", "p"] if self.cell == "lstm" else (["rbh"] if self.lbr else [])
        self.extra = dict(zip(names, ins[3:], strict=False))
        self.lens = ins[3 + len(names)] if len(ins) > 3 + len(names) else None
        self.segments = recurrence_segments(self.cell, self.hidden, self.lbr)
        self.per = CELLS[self.cell][1]
        self.specs = _activation_specs(attrs, self.dirs)

    def act(self, i: int, x: PrimExpr, d: Any) -> PrimExpr:
        """Activation ``i`` of direction ``d`` (a select when the two directions differ)."""
        first = self.specs[i]
        if self.dirs == 1 or self.specs[self.per + i] == first:
            return _activation(*first)(x)
        second = self.specs[self.per + i]
        return tir.select(tir.eq(d, 0), _activation(*first)(x), _activation(*second)(x))

    def buffer(self, count: int, name: str) -> Any:
        """A scratch buffer of ``count`` elements: on the stack up to STACK_BYTES, else
        from the workspace allocator (large batches or hidden sizes)."""
        nbytes = count * np.dtype(self.dtype).itemsize
        storage = tir.StorageKind.STACK if nbytes <= STACK_BYTES else tir.StorageKind.HEAP
        return self.ib.allocate(self.dtype, (count,), name, storage=storage)

    def zero(self) -> PrimExpr:
        return tir.const(0.0, self.dtype)

    def clip(self, x: PrimExpr) -> PrimExpr:
        limit = self.attrs["clip"]
        if limit is None:
            return x
        lo, hi = tir.const(-float(limit), self.dtype), tir.const(float(limit), self.dtype)
        return clamp(x, lo, hi)

    def gate_pos(self, gate: int) -> int:
        """Where gate ``gate``'s H columns start in the padded product buffer."""
        first_block, col = 0, 0
        for cols in self.segments:
            if gate * self.hidden < col + cols:
                return first_block * self.block + gate * self.hidden - col
            first_block += -(-cols // self.block)
            col += cols
        raise CompileError(f"gate {gate} outside the {self.cell} segments")

    def matvec(self, g: Any, src: Any, base: Any, d: Any, segment: int, back: Any = 0) -> None:
        """g[blocks of ``segment``] = src[base : base + H] x the packed R of direction d,
        the blocks in reverse order when ``back`` is 1 (see SNAKE)."""
        ib, nb, hid = self.ib, self.block, self.hidden
        first = sum(-(-c // nb) for c in self.segments[:segment])
        count = -(-self.segments[segment] // nb)
        with ib.for_range(0, count, "jo") as jo:
            jb = ib.let("jb", jo + back * (count - 1 - 2 * jo)) if SNAKE else jo
            acc = self.buffer(nb, "acc")
            with ib.for_range(0, nb, "j", kind=tir.ForKind.VECTORIZED) as j:
                acc[j] = self.zero()
            with ib.for_range(0, hid, "k") as k:
                hk = ib.let("hk", src[base + k])
                with ib.for_range(0, nb, "j", kind=tir.ForKind.VECTORIZED) as j:
                    acc[j] = acc[j] + hk * self.rp[d, first + jb, k, j]
            with ib.for_range(0, nb, "j", kind=tir.ForKind.VECTORIZED) as j:
                g[(first + jb) * nb + j] = acc[j]

    def build(self) -> tir.Stmt:
        ib = self.ib
        kind = tir.ForKind.PARALLEL if self.dirs == 2 else tir.ForKind.SERIAL
        with ib.for_range(0, self.dirs, "d", kind=kind) as d:
            self.direction(d)
        return ib.get()

    def direction(self, d: Any) -> None:
        ib, hid, batch = self.ib, self.hidden, self.batch
        h = self.buffer(batch * hid, "h")
        c = self.buffer(batch * hid, "c") if self.cell == "lstm" else None
        g = self.buffer(self.nblocks * self.block, "g")
        scratch = None
        if self.cell == "gru" and not self.lbr:  # z and r * h between the two products
            scratch = (self.buffer(hid, "z"), self.buffer(hid, "rh"))
        with ib.for_range(0, batch, "b") as b, ib.for_range(0, hid, "j", kind="vectorized") as j:
            h[b * hid + j] = self.h0[d, b, j]
            if c is not None:
                c[b * hid + j] = self.extra["c0"][d, b, j]
        direction = self.attrs["direction"]
        back: Any = d if direction == "bidirectional" else int(direction == "reverse")
        with ib.for_range(0, self.seq, "s") as s:
            t = ib.let("t", s + back * (self.seq - 1 - 2 * s))
            with ib.for_range(0, batch, "b") as b:
                row = _Row(self, d, t, b, (h, c, g), scratch)
                row.step()
        out_h = self.outs[1]
        with ib.for_range(0, batch, "b") as b, ib.for_range(0, hid, "j", kind="vectorized") as j:
            ib.emit(tir.store(out_h, h[b * hid + j], d, b, j))
            if c is not None:
                ib.emit(tir.store(self.outs[2], c[b * hid + j], d, b, j))


class _Row:
    """One step of one batch row of one direction: products, then the gates. The gates'
    loops run over the hidden units as ``jo`` blocks of ``unit`` lanes (vectorized ``ji``),
    the blocks of the projection XW."""

    def __init__(
        self, k: _Kernel, d: Any, t: Any, b: Any, state: tuple[Any, Any, Any], scratch: Any
    ) -> None:
        self.k, self.d, self.t, self.b = k, d, t, b
        self.h, self.c, self.g = state
        self.scratch = scratch
        self.base = b * k.hidden
        self.jo: Any = None
        self.ji: Any = None
        self.j: Any = None

    @contextmanager
    def units(self) -> Iterator[None]:
        """A loop over the hidden units; inside it self.j is the current one."""
        ib, unit = self.k.ib, self.k.unit
        outer = ib.for_range(0, self.k.hidden // unit, "jo")
        inner = ib.for_range(0, unit, "ji", kind=tir.ForKind.VECTORIZED)
        with outer as jo, inner as ji:
            self.jo, self.ji, self.j = jo, ji, jo * unit + ji
            yield

    def xw(self, gate: int) -> PrimExpr:
        """The input projection of gate ``gate`` at the current unit."""
        k = self.k
        per_hidden = k.hidden // k.unit
        block = (self.d * k.gates + gate) * per_hidden + self.jo
        return k.xw[block, self.t * k.batch + self.b, self.ji]

    def rec(self, gate: int) -> PrimExpr:
        """The recurrent product of gate ``gate`` at the current unit."""
        return self.g[self.k.gate_pos(gate) + self.j]

    def pre(self, gate: int) -> PrimExpr:
        """The pre-activation of gate ``gate``: projection plus recurrent product."""
        return self.xw(gate) + self.rec(gate)

    def old_h(self) -> PrimExpr:
        return self.h[self.base + self.j]

    def commit(self, h_new: PrimExpr, c_new: PrimExpr | None) -> None:
        """Store the new state (kept where the sequence has ended) and Y."""
        k, ib = self.k, self.k.ib
        at = self.base + self.j
        y = k.outs[0]
        if k.lens is None:
            self.h[at] = h_new
            if self.c is not None and c_new is not None:
                self.c[at] = c_new
            ib.emit(tir.store(y, h_new, self.t, self.d, self.b, self.j))
            return
        live = tir.cast("int64", self.t) < tir.cast("int64", k.lens[self.b])
        self.h[at] = tir.select(live, h_new, self.h[at])
        if self.c is not None and c_new is not None:
            self.c[at] = tir.select(live, c_new, self.c[at])
        ib.emit(tir.store(y, tir.select(live, h_new, k.zero()), self.t, self.d, self.b, self.j))

    def gate(self, act: int, value: PrimExpr) -> PrimExpr:
        """Activation ``act`` of the clipped ``value``."""
        return self.k.act(act, self.k.clip(value), self.d)

    def step(self) -> None:
        k, ib, d = self.k, self.k.ib, self.d
        back = (self.t * k.batch + self.b) % 2
        k.matvec(self.g, self.h, self.base, d, 0, back)
        if k.cell == "rnn":
            with self.units():
                self.commit(ib.let("h_new", self.gate(0, self.pre(0))), None)
        elif k.cell == "lstm":
            with self.units():
                self.lstm()
        elif k.lbr:
            with self.units():
                z = ib.let("z", self.gate(0, self.pre(0)))
                r = ib.let("r", self.gate(0, self.pre(1)))
                rec = self.rec(2) + k.extra["rbh"][d, self.j]
                cand = ib.let("cand", self.gate(1, self.xw(2) + r * rec))
                self.commit(self.blend(z, cand), None)
        else:
            zs, rh = self.scratch
            with self.units():
                zs[self.j] = self.gate(0, self.pre(0))
                rh[self.j] = self.gate(0, self.pre(1)) * self.old_h()
            k.matvec(self.g, rh, 0, d, 1, back)
            with self.units():
                cand = ib.let("cand", self.gate(1, self.pre(2)))
                self.commit(self.blend(zs[self.j], cand), None)

    def blend(self, z: PrimExpr, cand: PrimExpr) -> PrimExpr:
        """GRU's (1 - z) * cand + z * h."""
        one = tir.const(1.0, self.k.dtype)
        return self.k.ib.let("h_new", (one - z) * cand + z * self.old_h())

    def lstm(self) -> None:
        k, ib, d, hid, j = self.k, self.k.ib, self.d, self.k.hidden, self.j
        assert self.c is not None
        c_old = ib.let("c_old", self.c[self.base + j])
        gi, go, gf, gc = (self.pre(n) for n in range(4))
        if k.attrs["peepholes"]:
            p = k.extra["p"]
            gi = gi + p[d, j] * c_old
            gf = gf + p[d, 2 * hid + j] * c_old
        i = ib.let("i", self.gate(0, gi))
        one = tir.const(1.0, k.dtype)
        f = one - i if k.attrs["input_forget"] else self.gate(0, gf)
        c_new = ib.let("c_new", f * c_old + i * self.gate(1, gc))
        if k.attrs["peepholes"]:
            go = go + k.extra["p"][d, hid + j] * c_new
        o = self.gate(0, go)
        self.commit(ib.let("h_new", o * k.act(2, c_new, d)), c_new)


@register_compute("nn.recurrence")
def recurrence(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> list[te.Tensor]:
    """All steps of a recurrent layer in one hand-written loop nest (see _Kernel)."""
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
        return _Kernel(attrs, ins, outs).build()

    out = te.extern(shapes, inputs, body, name="recurrence", dtype=dtype)
    assert isinstance(out, list)
    return out
