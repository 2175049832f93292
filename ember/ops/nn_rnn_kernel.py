"""The ``nn.recurrence`` kernel of ember.ops.nn_rnn as hand-written loop IR: per direction
(a parallel loop when there are two), per step and batch row, the recurrent product
``h x R^T`` block by block of the packed R (accumulators of ``block`` lanes, R's rows
contiguous), then every gate's elementwise math in one vectorized loop over the hidden units
(clip, the ONNX activations, peepholes, input_forget, linear_before_reset, per-batch
``sequence_lens``), exactly as the numpy reference of the op does (ONNX gate order i, o, f, c
for LSTM and z, r, h for GRU)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ember import tir
from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.ops.nn_rnn import ACTIVATIONS, recurrence_segments
from ember.ops.elemwise import FLOAT_UNARY, NUMERIC_UNARY, clamp
from ember.tir import PrimExpr
from ember.tir.buffer import Buffer

#: cell -> (gates, activations per direction, default activations).
CELLS: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "rnn": (1, 1, ("Tanh",)),
    "gru": (3, 2, ("Sigmoid", "Tanh")),
    "lstm": (4, 3, ("Sigmoid", "Tanh", "Tanh")),
}
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


class Kernel:
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
        self, k: Kernel, d: Any, t: Any, b: Any, state: tuple[Any, Any, Any], scratch: Any
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
