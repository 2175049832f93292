"""Legalization of the recurrent ops nn.rnn, nn.gru and nn.lstm: each is unrolled over its
static sequence into graph-IR ops the code generator already lowers (nn.dense, add,
multiply, subtract, strided_slice, reshape, concatenate, where, clip and the activations).

Per direction, the input projection of every time step is ONE dense over the whole
sequence (``(S*B, I) x (G*H, I)``); each step then adds the recurrent projection
``dense(h, R)`` and applies the gates exactly as the numpy reference does (ONNX gate order
i, o, f, c for LSTM and z, r, h for GRU; optional clip, peepholes, input_forget,
linear_before_reset, per-batch ``sequence_lens``). Constant weights are sliced here, so
their ``nn.dense`` calls legalize further into matmuls of pre-transposed weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import CompileError
from ember.ir.expr import Call, Constant, Expr, Tuple, call, const
from ember.ir.op import Attrs, OpDef
from ember.ir.ops.nn_rnn import ACTIVATIONS
from ember.ir.types import TensorType
from ember.ops.registry import register_legalize

Act = Callable[[Expr], Expr]

#: cell -> (gates, activations per direction, default activations).
CELLS: dict[str, tuple[int, int, tuple[str, ...]]] = {
    "nn.rnn": (1, 1, ("Tanh",)),
    "nn.gru": (3, 2, ("Sigmoid", "Tanh")),
    "nn.lstm": (4, 3, ("Sigmoid", "Tanh", "Tanh")),
}


def _shape(e: Expr) -> tuple[int, ...]:
    ty = e.type
    if not isinstance(ty, TensorType):
        raise CompileError(f"recurrent op legalization expected a tensor, got {ty}")
    return tuple(int(d) for d in ty.shape)


def _slice(x: Expr, axis: int, start: int, stop: int) -> Expr:
    shape = _shape(x)
    if isinstance(x, Constant):  # constant weights stay constants (nn.dense then legalizes)
        index = [slice(None)] * len(shape)
        index[axis] = slice(start, stop)
        return const(np.ascontiguousarray(np.asarray(x.data)[tuple(index)]))
    begin = [0] * len(shape)
    end = list(shape)
    begin[axis], end[axis] = start, stop
    return call("strided_slice", x, begin=begin, end=end, strides=[1] * len(shape))


def _reshape(x: Expr, shape: Sequence[int]) -> Expr:
    if _shape(x) == tuple(shape):
        return x
    if isinstance(x, Constant):
        return const(np.asarray(x.data).reshape(tuple(shape)))
    return call("reshape", x, newshape=tuple(shape))


def _scalar(value: float, dtype: str) -> Expr:
    return const(np.asarray(value, dtype=dtype))


def _activation(name: str, alpha: float | None, beta: float | None, dtype: str) -> Act:
    """The ONNX recurrent activation ``name`` as a builder of graph-IR ops."""
    key = name.lower()
    a = 0.0 if alpha is None else alpha
    b = 0.0 if beta is None else beta
    simple = {
        "sigmoid": "sigmoid",
        "tanh": "tanh",
        "relu": "relu",
        "softsign": "softsign",
        "softplus": "softplus",
    }
    if key in simple:
        return lambda x: call(simple[key], x)
    if key == "affine":
        return lambda x: call("add", call("multiply", x, _scalar(a, dtype)), _scalar(b, dtype))
    if key == "leakyrelu":
        return lambda x: call("leaky_relu", x, alpha=a)
    if key == "thresholdedrelu":
        return lambda x: call(
            "where", call("greater", x, _scalar(a, dtype)), x, _scalar(0.0, dtype)
        )
    if key == "scaledtanh":
        return lambda x: call(
            "multiply", call("tanh", call("multiply", x, _scalar(b, dtype))), _scalar(a, dtype)
        )
    if key == "hardsigmoid":
        return lambda x: call("hard_sigmoid", x, alpha=a, beta=b)
    if key == "elu":
        return lambda x: call("elu", x, alpha=a)
    raise CompileError(f"unknown recurrent activation {name!r}; known: {', '.join(ACTIVATIONS)}")


def _activations(op: str, attrs: Attrs, dirs: int, dtype: str) -> list[Act]:
    """Every direction's activations with alpha/beta bound like the reference does."""
    _, per_dir, default = CELLS[op]
    names = list(attrs["activations"]) or list(default) * dirs
    alphas = list(attrs["activation_alpha"])
    betas = list(attrs["activation_beta"])
    out = []
    for name in names:
        _, da, db = ACTIVATIONS[name.lower()]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        out.append(_activation(name, a, b, dtype))
    return out


class _Unroller:
    """Builds the unrolled graph of one recurrent call."""

    def __init__(self, node: Call) -> None:
        assert isinstance(node.op, OpDef)
        self.op = node.op.name
        self.attrs = node.attrs
        self.args = list(node.args)
        self.gates = CELLS[self.op][0]
        self.seq, self.batch, self.inp = _shape(self.args[0])
        self.hidden = int(self.attrs["hidden_size"])
        ty = self.args[0].type
        assert isinstance(ty, TensorType)
        self.dtype = ty.dtype
        self.dirs = 2 if self.attrs["direction"] == "bidirectional" else 1
        self.acts = _activations(self.op, self.attrs, self.dirs, self.dtype)
        self.has_c = self.op == "nn.lstm"
        n_main = 7 if self.has_c else 5
        self.lens = self.args[n_main] if len(self.args) > n_main else None

    def clip(self, x: Expr) -> Expr:
        limit = self.attrs["clip"]
        if limit is None:
            return x
        return call("clip", x, a_min=-float(limit), a_max=float(limit))

    def gate(self, x: Expr, act: Act) -> Expr:
        return act(self.clip(x))

    def cols(self, x: Expr, k: int, n: int = 1) -> Expr:
        """Gate block(s) ``k .. k+n-1`` (each of width H) of the last axis of ``x``."""
        axis = len(_shape(x)) - 1
        return _slice(x, axis, k * self.hidden, (k + n) * self.hidden)

    def per_dir(self, x: Expr, d: int, shape: Sequence[int]) -> Expr:
        return _reshape(_slice(x, 0, d, d + 1), shape)

    def mask(self, t: int) -> Expr | None:
        """(B, 1) bool: which batch entries are still inside their sequence at step t."""
        if self.lens is None:
            return None
        if isinstance(self.lens, Constant):
            live = np.asarray(self.lens.data).astype(np.int64) > t
            if live.all():
                return None
            return const(live.reshape(self.batch, 1))
        lens_ty = self.lens.type
        assert isinstance(lens_ty, TensorType)
        live_expr = call("less", _scalar(t, lens_ty.dtype), self.lens)
        return _reshape(live_expr, (self.batch, 1))

    def run(self) -> Expr:
        ys, hs, cs = [], [], []
        for d in range(self.dirs):
            y, h, c = self.direction(d)
            ys.append(y)
            hs.append(_reshape(h, (1, self.batch, self.hidden)))
            if c is not None:
                cs.append(_reshape(c, (1, self.batch, self.hidden)))
        outs = [_concat(ys, 1), _concat(hs, 0)]
        if self.has_c:
            outs.append(_concat(cs, 0))
        return Tuple(tuple(outs))

    def direction(self, d: int) -> tuple[Expr, Expr, Expr | None]:
        g, hid, seq, batch = self.gates, self.hidden, self.seq, self.batch
        x, w, r, b, h0 = self.args[:5]
        wd = self.per_dir(w, d, (g * hid, self.inp))
        rd = self.per_dir(r, d, (g * hid, hid))
        bd = self.per_dir(b, d, (2 * g * hid,))
        wb, rb = _slice(bd, 0, 0, g * hid), _slice(bd, 0, g * hid, 2 * g * hid)
        xw: Expr = call("add", call("nn.dense", _reshape(x, (seq * batch, self.inp)), wd), wb)
        if self.op != "nn.gru":
            xw = call("add", xw, rb)
        xw = _reshape(xw, (seq, batch, g * hid))
        h = self.per_dir(h0, d, (batch, hid))
        c = self.per_dir(self.args[5], d, (batch, hid)) if self.has_c else None
        peep = self.peepholes(d) if self.has_c else None
        per = CELLS[self.op][1]
        acts = self.acts[d * per : (d + 1) * per]
        backward = self.attrs["direction"] == "reverse" or d == 1
        steps = range(seq - 1, -1, -1) if backward else range(seq)
        ys: list[Expr] = [xw] * seq
        for t in steps:
            xw_t = _reshape(_slice(xw, 0, t, t + 1), (batch, g * hid))
            if self.op == "nn.rnn":
                h_new = self.gate(call("add", xw_t, call("nn.dense", h, rd)), acts[0])
                c_new = c
            elif self.op == "nn.gru":
                h_new, c_new = self.gru_step(xw_t, h, rd, rb, acts), c
            else:
                assert c is not None
                h_new, c_new = self.lstm_step(xw_t, h, c, rd, peep, acts)
            live = self.mask(t)
            if live is None:
                h, c, y = h_new, c_new, h_new
            else:
                h = call("where", live, h_new, h)
                if c is not None and c_new is not None:
                    c = call("where", live, c_new, c)
                y = call("where", live, h_new, _scalar(0.0, self.dtype))
            ys[t] = _reshape(y, (1, 1, batch, hid))
        return _concat(ys, 0), h, c

    def peepholes(self, d: int) -> list[Expr] | None:
        """The (i, o, f) peephole vectors of direction d, or None when they are all zero."""
        p = self.args[6]
        if isinstance(p, Constant) and not np.asarray(p.data).any():
            return None
        pd = self.per_dir(p, d, (3 * self.hidden,))
        return [self.cols(pd, k) for k in range(3)]

    def lstm_step(
        self, xw_t: Expr, h: Expr, c: Expr, rd: Expr, peep: list[Expr] | None, acts: list[Act]
    ) -> tuple[Expr, Expr]:
        g = call("add", xw_t, call("nn.dense", h, rd))
        gi, go, gf, gc = (self.cols(g, k) for k in range(4))
        if peep is not None:
            gi = call("add", gi, call("multiply", peep[0], c))
            gf = call("add", gf, call("multiply", peep[2], c))
        i = self.gate(gi, acts[0])
        f: Expr
        if self.attrs["input_forget"]:
            f = call("subtract", _scalar(1.0, self.dtype), i)
        else:
            f = self.gate(gf, acts[0])
        cand = self.gate(gc, acts[1])
        c_new = call("add", call("multiply", f, c), call("multiply", i, cand))
        if peep is not None:
            go = call("add", go, call("multiply", peep[1], c_new))
        o = self.gate(go, acts[0])
        return call("multiply", o, acts[2](c_new)), c_new

    def gru_step(self, xw_t: Expr, h: Expr, rd: Expr, rb: Expr, acts: list[Act]) -> Expr:
        hid = self.hidden
        r_zr, r_h = _slice(rd, 0, 0, 2 * hid), _slice(rd, 0, 2 * hid, 3 * hid)
        b_zr, b_h = self.cols(rb, 0, 2), self.cols(rb, 2)
        zr = call("add", call("add", self.cols(xw_t, 0, 2), call("nn.dense", h, r_zr)), b_zr)
        z = self.gate(self.cols(zr, 0), acts[0])
        reset = self.gate(self.cols(zr, 1), acts[0])
        if self.attrs["linear_before_reset"]:
            rec = call("multiply", reset, call("add", call("nn.dense", h, r_h), b_h))
        else:
            rec = call("add", call("nn.dense", call("multiply", reset, h), r_h), b_h)
        cand = self.gate(call("add", self.cols(xw_t, 2), rec), acts[1])
        keep = call("subtract", _scalar(1.0, self.dtype), z)
        return call("add", call("multiply", keep, cand), call("multiply", z, h))


def _concat(parts: list[Expr], axis: int) -> Expr:
    return parts[0] if len(parts) == 1 else call("concatenate", *parts, axis=axis)


def legalize_recurrent(node: Call) -> Expr:
    """Unroll an nn.rnn / nn.gru / nn.lstm call into a Tuple of (Y, Y_h[, Y_c])."""
    return _Unroller(node).run()


for _op in CELLS:
    register_legalize(_op)(legalize_recurrent)
