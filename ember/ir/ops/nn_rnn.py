"""Recurrent ops with ONNX semantics and layout 0 (time-major): nn.rnn, nn.gru, nn.lstm.

Inputs are all present in the IR (the importer fills omitted ones with zeros):
``X (S, B, I)``, ``W (D, G*H, I)``, ``R (D, G*H, H)``, ``B (D, 2*G*H)``, ``initial_h
(D, B, H)``, then for LSTM ``initial_c (D, B, H)`` and ``P (D, 3*H)``; a last optional input
``sequence_lens (B,)`` (int32/int64) gives per-batch lengths. Results are tuples
``(Y (S, D, B, H), Y_h (D, B, H)[, Y_c (D, B, H)])``; steps past a sequence's length give
zeros in ``Y`` and leave the state unchanged. ``D`` is 2 for ``bidirectional``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import check_data_dtype, check_float, tensor_arg, widen
from ember.ir.types import TensorType, TupleType, Type

Activation = Callable[[np.ndarray], np.ndarray]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # exp(-x) -> inf gives the right limit 0
        return 1.0 / (1.0 + np.exp(-x))


#: ONNX activation name -> (function of x, alpha, beta; default alpha; default beta). The
#: defaults are onnxruntime's for recurrent layers (ONNX leaves Affine and ScaledTanh open).
ACTIVATIONS: dict[str, tuple[Callable[..., np.ndarray], float | None, float | None]] = {
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "affine": (lambda x, a, b: a * x + b, 0.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 0.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 0.0, 0.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0.0, x), None, None),
}

#: cell kind -> (gates per step, activations per direction, default activations, has_c).
_CELLS = {
    "nn.rnn": (1, 1, ("Tanh",), False),
    "nn.gru": (3, 2, ("Sigmoid", "Tanh"), False),
    "nn.lstm": (4, 3, ("Sigmoid", "Tanh", "Tanh"), True),
}


def _num_dirs(attrs: Attrs) -> int:
    direction = attrs["direction"]
    if direction not in ("forward", "reverse", "bidirectional"):
        raise IRError(f"unknown direction {direction!r}; known: forward, reverse, bidirectional")
    return 2 if direction == "bidirectional" else 1


def _activations(op: str, attrs: Attrs) -> list[Activation]:
    """The activation functions of every direction, with their alpha/beta bound."""
    _, per_dir, default, _ = _CELLS[op]
    dirs = _num_dirs(attrs)
    names = list(attrs["activations"]) or list(default) * dirs
    if len(names) != per_dir * dirs:
        raise IRError(
            f"{op} needs {per_dir * dirs} activations for {dirs} direction(s), got {names}"
        )
    alphas = list(attrs["activation_alpha"])
    betas = list(attrs["activation_beta"])
    funcs: list[Activation] = []
    for name in names:
        key = name.lower()
        if key not in ACTIVATIONS:
            raise IRError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}")
        fn, da, db = ACTIVATIONS[key]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        funcs.append(functools.partial(_apply, fn, a, b))
    return funcs


def _apply(
    fn: Callable[..., np.ndarray], a: float | None, b: float | None, x: np.ndarray
) -> np.ndarray:
    return fn(x, a, b)


def _rnn_type(op: str) -> Callable[[Sequence[Type], Attrs], Type]:
    gates, _, _, has_c = _CELLS[op]
    names = ["X", "W", "R", "B", "initial_h"] + (["initial_c", "P"] if has_c else [])

    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        x = tensor_arg(types, 0, "X")
        check_float(x, "X")
        hidden = attrs["hidden_size"]
        dirs = _num_dirs(attrs)
        _activations(op, attrs)
        if x.ndim != 3:
            raise IRError(f"X must be (seq_length, batch, input_size), got {x}")
        seq, batch, inp = x.shape
        want = {
            "W": (dirs, gates * hidden, inp),
            "R": (dirs, gates * hidden, hidden),
            "B": (dirs, 2 * gates * hidden),
            "initial_h": (dirs, batch, hidden),
            "initial_c": (dirs, batch, hidden),
            "P": (dirs, 3 * hidden),
        }
        for i, name in enumerate(names[1:], start=1):
            ty = tensor_arg(types, i, name)
            check_data_dtype(x, ty, name)
            if ty.shape != want[name]:
                raise IRError(f"{name} must have shape {want[name]}, got {ty}")
        if len(types) > len(names):
            lens = tensor_arg(types, len(names), "sequence_lens")
            if lens.shape != (batch,) or lens.dtype not in ("int32", "int64"):
                raise IRError(
                    f"sequence_lens must be int32 or int64 of shape ({batch},), got {lens}"
                )
        state = TensorType((dirs, batch, hidden), x.dtype)
        y = TensorType((seq, dirs, batch, hidden), x.dtype)
        return TupleType((y, state, state) if has_c else (y, state))

    return infer


def _step(
    op: str,
    attrs: Attrs,
    acts: Sequence[Activation],
    xw: np.ndarray,
    h: np.ndarray,
    c: np.ndarray,
    r: np.ndarray,
    rb: np.ndarray,
    p: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One time step of one direction: new (h, c) from the input projection ``xw``."""
    clip = attrs["clip"]

    def gate(v: np.ndarray, fn: Activation) -> np.ndarray:
        return fn(np.clip(v, -clip, clip) if clip is not None else v)

    hidden = h.shape[-1]
    if op == "nn.rnn":
        return gate(xw + h @ r.T + rb, acts[0]), c
    if op == "nn.gru":
        rz = xw[:, : 2 * hidden] + h @ r[: 2 * hidden].T + rb[: 2 * hidden]
        z = gate(rz[:, :hidden], acts[0])
        rr = gate(rz[:, hidden:], acts[0])
        rh, rbh = r[2 * hidden :], rb[2 * hidden :]
        if attrs["linear_before_reset"]:
            cand = xw[:, 2 * hidden :] + rr * (h @ rh.T + rbh)
        else:
            cand = xw[:, 2 * hidden :] + (rr * h) @ rh.T + rbh
        hh = gate(cand, acts[1])
        return (1 - z) * hh + z * h, c
    g = xw + h @ r.T + rb
    pi, po, pf = p[:hidden], p[hidden : 2 * hidden], p[2 * hidden :]
    i = gate(g[:, :hidden] + pi * c, acts[0])
    forget = g[:, 2 * hidden : 3 * hidden] + pf * c
    f = 1 - i if attrs["input_forget"] else gate(forget, acts[0])
    cand = gate(g[:, 3 * hidden :], acts[1])
    c_new = f * c + i * cand
    o = gate(g[:, hidden : 2 * hidden] + po * c_new, acts[0])
    return o * acts[2](c_new), c_new


def _rnn_reference(op: str) -> Callable[[Sequence[np.ndarray], Attrs], tuple[np.ndarray, ...]]:
    gates, per_dir, _, has_c = _CELLS[op]
    n_main = 7 if has_c else 5

    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
        dtype = xs[0].dtype
        x, w, r, b, h0 = (widen(v) for v in xs[:5])
        c0 = widen(xs[5]) if has_c else np.zeros_like(h0)
        p = widen(xs[6]) if has_c else np.zeros((h0.shape[0], 3 * h0.shape[2]), h0.dtype)
        seq, batch, _ = x.shape
        lens = xs[n_main].astype(np.int64) if len(xs) > n_main else np.full(batch, seq)
        acts = _activations(op, attrs)
        dirs = _num_dirs(attrs)
        half = gates * h0.shape[2]
        y = np.zeros((seq, dirs, batch, h0.shape[2]), dtype=x.dtype)
        h_out, c_out = np.empty_like(h0), np.empty_like(c0)
        for d in range(dirs):
            backward = attrs["direction"] == "reverse" or d == 1
            xw = x @ w[d].T + b[d, :half]
            h, c = h0[d], c0[d]
            steps = range(seq - 1, -1, -1) if backward else range(seq)
            for t in steps:
                h_new, c_new = _step(
                    op,
                    attrs,
                    acts[d * per_dir : (d + 1) * per_dir],
                    xw[t],
                    h,
                    c,
                    r[d],
                    b[d, half:],
                    p[d],
                )
                live = (t < lens)[:, None]
                h = np.where(live, h_new, h)
                c = np.where(live, c_new, c)
                y[t, d] = np.where(live, h_new, 0)
            h_out[d], c_out[d] = h, c
        outs = (y, h_out, c_out) if has_c else (y, h_out)
        return tuple(o.astype(dtype, copy=False) for o in outs)

    return run


_RNN_ATTRS = {
    "hidden_size": Attr("int", doc="number of hidden units H"),
    "direction": Attr("str", "forward", "forward, reverse or bidirectional"),
    "activations": Attr("strs", (), "ONNX activation names (empty: the defaults)"),
    "activation_alpha": Attr("floats", ()),
    "activation_beta": Attr("floats", ()),
    "clip": Attr("float", None, "clip gate pre-activations to [-clip, clip] (None: off)"),
}

register_op(
    OpDef(
        name="nn.rnn",
        num_inputs=(5, 6),
        infer_type=_rnn_type("nn.rnn"),
        reference=_rnn_reference("nn.rnn"),
        pattern=OpPattern.OPAQUE,
        attrs=_RNN_ATTRS,
        doc="Elman RNN (ONNX RNN), returns (Y, Y_h).",
    )
)

register_op(
    OpDef(
        name="nn.gru",
        num_inputs=(5, 6),
        infer_type=_rnn_type("nn.gru"),
        reference=_rnn_reference("nn.gru"),
        pattern=OpPattern.OPAQUE,
        attrs={**_RNN_ATTRS, "linear_before_reset": Attr("bool", False)},
        doc="GRU (ONNX GRU, gate order z, r, h), returns (Y, Y_h).",
    )
)

register_op(
    OpDef(
        name="nn.lstm",
        num_inputs=(7, 8),
        infer_type=_rnn_type("nn.lstm"),
        reference=_rnn_reference("nn.lstm"),
        pattern=OpPattern.OPAQUE,
        attrs={**_RNN_ATTRS, "input_forget": Attr("bool", False)},
        doc="LSTM (ONNX LSTM, gate order i, o, f, c; peepholes P), returns (Y, Y_h, Y_c).",
    )
)
