"""Recurrent ops with ONNX semantics and layout 0 (time-major): nn.rnn, nn.gru, nn.lstm.

Inputs are all present in the IR (the importer fills omitted ones with zeros):
``X (S, B, I)``, ``W (D, G*H, I)``, ``R (D, G*H, H)``, ``B (D, 2*G*H)``, ``initial_h
(D, B, H)``, then for LSTM ``initial_c (D, B, H)`` and ``P (D, 3*H)``; a last optional input
``sequence_lens (B,)`` (int32/int64) gives per-batch lengths. Results are tuples
``(Y (S, D, B, H), Y_h (D, B, H)[, Y_c (D, B, H)])``; steps past a sequence's length give
zeros in ``Y`` and leave the state unchanged. ``D`` is 2 for ``bidirectional``.

``nn.recurrence`` is what they legalize into (ember/ops/nn_rnn.py): the steps alone, after
the input projection, with packed recurrent weights (described before its definition).
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


def _check_inputs(
    types: Sequence[Type],
    names: Sequence[str],
    want: dict[str, tuple[int, ...]],
    data: TensorType,
    batch: int,
) -> None:
    """Inputs 1.. named ``names[1:]`` have the data's dtype and the ``want`` shapes; a
    further input is sequence_lens (B,) of int32 or int64."""
    for i, name in enumerate(names[1:], start=1):
        ty = tensor_arg(types, i, name)
        check_data_dtype(data, ty, name)
        if ty.shape != want[name]:
            raise IRError(f"{name} must have shape {want[name]}, got {ty}")
    if len(types) > len(names):
        lens = tensor_arg(types, len(names), "sequence_lens")
        if lens.shape != (batch,) or lens.dtype not in ("int32", "int64"):
            raise IRError(f"sequence_lens must be int32 or int64 of shape ({batch},), got {lens}")


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
        _check_inputs(types, names, want, x, batch)
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


def _run_directions(
    op: str,
    attrs: Attrs,
    xw: Sequence[np.ndarray],
    r: np.ndarray,
    rb: np.ndarray,
    states: tuple[np.ndarray, np.ndarray, np.ndarray],
    lens: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every direction's steps: ``xw[d]`` (S, B, G*H) is its input projection with the input
    bias, ``rb`` (D, G*H) the recurrent bias, ``states`` (h0, c0, P); returns (Y, Y_h, Y_c)."""
    h0, c0, p = states
    per_dir = _CELLS[op][1]
    acts = _activations(op, attrs)
    seq, batch = xw[0].shape[:2]
    y = np.zeros((seq, len(xw), batch, h0.shape[2]), dtype=h0.dtype)
    h_out, c_out = np.empty_like(h0), np.empty_like(c0)
    for d, xw_d in enumerate(xw):
        backward = attrs["direction"] == "reverse" or d == 1
        h, c = h0[d], c0[d]
        for t in range(seq - 1, -1, -1) if backward else range(seq):
            d_acts = acts[d * per_dir : (d + 1) * per_dir]
            h_new, c_new = _step(op, attrs, d_acts, xw_d[t], h, c, r[d], rb[d], p[d])
            live = (t < lens)[:, None]
            h = np.where(live, h_new, h)
            c = np.where(live, c_new, c)
            y[t, d] = np.where(live, h_new, 0)
        h_out[d], c_out[d] = h, c
    return y, h_out, c_out


def _rnn_reference(op: str) -> Callable[[Sequence[np.ndarray], Attrs], tuple[np.ndarray, ...]]:
    gates, _, _, has_c = _CELLS[op]
    n_main = 7 if has_c else 5

    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
        dtype = xs[0].dtype
        x, w, r, b, h0 = (widen(v) for v in xs[:5])
        c0 = widen(xs[5]) if has_c else np.zeros_like(h0)
        p = widen(xs[6]) if has_c else np.zeros((h0.shape[0], 3 * h0.shape[2]), h0.dtype)
        seq, batch, _ = x.shape
        lens = xs[n_main].astype(np.int64) if len(xs) > n_main else np.full(batch, seq)
        half = gates * h0.shape[2]
        xw = [x @ w[d].T + b[d, :half] for d in range(_num_dirs(attrs))]
        y, h_out, c_out = _run_directions(op, attrs, xw, r, b[:, half:], (h0, c0, p), lens)
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


# --- nn.recurrence: the recurrent part alone, after the input projection -------------------
#
# The legalizer of nn.rnn / nn.gru / nn.lstm computes every step's input projection as one
# matrix product and hands the steps to ``nn.recurrence``, one kernel for all of them:
#
#   XW (D*G*H/u, S*B, u) input projection of every step in column blocks of u (u divides
#                     H): XW[c // u, t*B + b, c % u] is column c of step t, batch row b;
#                     every bias is folded in except GRU's recurrent bias of the h gate
#                     under linear_before_reset
#   RP (D, NB, H, nb) recurrent weights, packed: the G*H gate columns split into segments
#                     (recurrence_segments), each zero-padded to whole blocks of ``block``
#                     columns; block j, row k holds R[d, col, k] for its nb columns
#   initial_h (D, B, H), then for lstm initial_c (D, B, H) and P (D, 3*H), for gru under
#   linear_before_reset its h-gate recurrent bias RBH (D, H), then optional sequence_lens.


def recurrence_segments(cell: str, hidden: int, linear_before_reset: bool) -> list[int]:
    """The column counts of the packed segments of R, in gate order: each segment is one
    matrix-vector product per step (GRU's h gate needs its own when the reset gate scales h
    before the product)."""
    gates = _CELLS[f"nn.{cell}"][0]
    if cell == "gru" and not linear_before_reset:
        return [2 * hidden, hidden]
    return [gates * hidden]


def _blocks(cols: int, block: int) -> int:
    return -(-cols // block)


def pack_recurrent_weight(r: np.ndarray, segments: Sequence[int], block: int) -> np.ndarray:
    """R (D, G*H, H) -> (D, NB, H, block): the columns of each segment zero-padded to whole
    blocks, every block's rows contiguous."""
    parts, start = [], 0
    dirs, _, hidden = r.shape
    for cols in segments:
        seg = r[:, start : start + cols]
        pad = _blocks(cols, block) * block - cols
        seg = np.concatenate([seg, np.zeros((dirs, pad, hidden), r.dtype)], axis=1)
        parts.append(seg.reshape(dirs, -1, block, hidden).transpose(0, 1, 3, 2))
        start += cols
    return np.ascontiguousarray(np.concatenate(parts, axis=1))


def unpack_recurrent_weight(rp: np.ndarray, segments: Sequence[int]) -> np.ndarray:
    """The inverse of pack_recurrent_weight: (D, NB, H, block) -> R (D, G*H, H)."""
    dirs, _, hidden, block = rp.shape
    parts, first = [], 0
    for cols in segments:
        n = _blocks(cols, block)
        seg = rp[:, first : first + n].transpose(0, 1, 3, 2).reshape(dirs, n * block, hidden)
        parts.append(seg[:, :cols])
        first += n
    return np.concatenate(parts, axis=1)


def _recurrence_inputs(attrs: Attrs) -> list[str]:
    cell = attrs["cell"]
    names = ["XW", "RP", "initial_h"]
    if cell == "lstm":
        names += ["initial_c", "P"]
    if cell == "gru" and attrs["linear_before_reset"]:
        names.append("RBH")
    return names


def _recurrence_type(types: Sequence[Type], attrs: Attrs) -> Type:
    cell = attrs["cell"]
    if cell not in ("rnn", "gru", "lstm"):
        raise IRError(f"unknown recurrent cell {cell!r}; known: rnn, gru, lstm")
    op = f"nn.{cell}"
    gates = _CELLS[op][0]
    names = _recurrence_inputs(attrs)
    if len(types) not in (len(names), len(names) + 1):
        raise IRError(f"nn.recurrence ({cell}) takes {names} and optional sequence_lens")
    xw = tensor_arg(types, 0, "XW")
    check_float(xw, "XW")
    hidden, dirs, block = attrs["hidden_size"], _num_dirs(attrs), attrs["block"]
    _activations(op, attrs)
    cols = dirs * gates * hidden
    h0 = tensor_arg(types, 2, "initial_h")
    batch = h0.shape[1] if h0.ndim == 3 else 0
    ok = xw.ndim == 3 and batch > 0 and xw.shape[1] % batch == 0
    if not ok or hidden % xw.shape[2] or xw.shape[0] * xw.shape[2] != cols:
        raise IRError(
            f"XW must be (D*G*H/u, seq*batch, u) with u dividing H = {hidden} and "
            f"D*G*H = {cols}, got {xw} (initial_h {h0})"
        )
    seq = xw.shape[1] // batch
    segs = recurrence_segments(cell, hidden, attrs["linear_before_reset"])
    nb = sum(_blocks(c, block) for c in segs) if block > 0 else 0
    want = {
        "RP": (dirs, nb, hidden, block),
        "initial_h": (dirs, batch, hidden),
        "initial_c": (dirs, batch, hidden),
        "P": (dirs, 3 * hidden),
        "RBH": (dirs, hidden),
    }
    _check_inputs(types, names, want, xw, batch)
    state = TensorType((dirs, batch, hidden), xw.dtype)
    y = TensorType((seq, dirs, batch, hidden), xw.dtype)
    return TupleType((y, state, state) if cell == "lstm" else (y, state))


def _recurrence_reference(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    cell = attrs["cell"]
    op = f"nn.{cell}"
    names = _recurrence_inputs(attrs)
    dtype = xs[0].dtype
    xw, rp, h0 = (widen(v) for v in xs[:3])
    hidden, dirs = int(attrs["hidden_size"]), _num_dirs(attrs)
    gh = _CELLS[op][0] * hidden
    r = unpack_recurrent_weight(rp, recurrence_segments(cell, hidden, attrs["linear_before_reset"]))
    rb = np.zeros((dirs, gh), xw.dtype)
    c0, p = np.zeros_like(h0), np.zeros((dirs, 3 * hidden), xw.dtype)
    if cell == "lstm":
        c0 = widen(xs[3])
        if attrs["peepholes"]:
            p = widen(xs[4])
    if "RBH" in names:
        rb[:, 2 * hidden :] = widen(xs[names.index("RBH")])
    batch = h0.shape[1]
    seq = xw.shape[1] // batch
    plain = xw.transpose(1, 0, 2).reshape(seq, batch, dirs * gh)
    lens = xs[len(names)].astype(np.int64) if len(xs) > len(names) else np.full(batch, seq)
    per_dir = [plain[:, :, d * gh : (d + 1) * gh] for d in range(dirs)]
    y, h_out, c_out = _run_directions(op, attrs, per_dir, r, rb, (h0, c0, p), lens)
    outs = (y, h_out, c_out) if cell == "lstm" else (y, h_out)
    return tuple(o.astype(dtype, copy=False) for o in outs)


register_op(
    OpDef(
        name="nn.recurrence",
        num_inputs=(3, 6),
        infer_type=_recurrence_type,
        reference=_recurrence_reference,
        pattern=OpPattern.OPAQUE,
        attrs={
            **_RNN_ATTRS,
            "cell": Attr("str", doc="rnn, gru or lstm"),
            "block": Attr("int", doc="columns per packed block of RP"),
            "input_forget": Attr("bool", False),
            "linear_before_reset": Attr("bool", False),
            "peepholes": Attr("bool", False, "lstm: read P (else P is taken as zero)"),
        },
        doc="The steps of nn.rnn / nn.gru / nn.lstm after the input projection (one kernel).",
    )
)
