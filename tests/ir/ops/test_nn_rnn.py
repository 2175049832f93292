"""Recurrent ops (nn.rnn, nn.gru, nn.lstm): type rules, error messages, numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import TensorType, TupleType, call
from ember.ir.ops.nn_rnn import (
    pack_recurrent_weight,
    recurrence_segments,
    unpack_recurrent_weight,
)

from .ir_check import run as _run
from .ir_check import var as _var


def test_lstm_gru_types_and_single_step() -> None:
    rng = np.random.default_rng(5)
    seq, batch, inp, hid = 1, 2, 3, 4
    x = rng.standard_normal((seq, batch, inp)).astype(np.float32)
    w = rng.standard_normal((1, 3 * hid, inp)).astype(np.float32)
    r = rng.standard_normal((1, 3 * hid, hid)).astype(np.float32)
    b = np.zeros((1, 6 * hid), np.float32)
    h0 = np.zeros((1, batch, hid), np.float32)
    vs = [_var(a.shape, name=f"v{i}") for i, a in enumerate((x, w, r, b, h0))]
    gru = call("nn.gru", *vs, hidden_size=hid)
    assert gru.type == TupleType(
        (TensorType((seq, 1, batch, hid), "float32"), TensorType((1, batch, hid), "float32"))
    )
    y, yh = _run(gru, vs, [x, w, r, b, h0])
    z = 1 / (1 + np.exp(-(x[0] @ w[0, :hid].T)))
    hh = np.tanh(x[0] @ w[0, 2 * hid :].T)
    np.testing.assert_allclose(yh[0], (1 - z) * hh, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(y[0], yh)
    with pytest.raises(IRError, match="W must have shape \\(2, 12, 3\\)"):
        call("nn.gru", *vs, hidden_size=hid, direction="bidirectional")
    with pytest.raises(IRError, match="unknown activation 'Swish'"):
        call("nn.gru", *vs, hidden_size=hid, activations=("Swish", "Tanh"))


def test_rnn_sequence_lens_type_rule() -> None:
    vs = [
        _var((3, 2, 4), name="x"),
        _var((1, 5, 4), name="w"),
        _var((1, 5, 5), name="r"),
        _var((1, 10), name="b"),
        _var((1, 2, 5), name="h"),
    ]
    out = call("nn.rnn", *vs, _var((2,), "int32", "lens"), hidden_size=5)
    assert out.type.fields[0] == TensorType((3, 1, 2, 5), "float32")  # type: ignore[attr-defined]
    with pytest.raises(IRError, match="sequence_lens must be int32 or int64 of shape \\(2,\\)"):
        call("nn.rnn", *vs, _var((3,), "int32", "lens"), hidden_size=5)
    with pytest.raises(IRError, match="unknown direction 'up'"):
        call("nn.rnn", *vs, hidden_size=5, direction="up")


def test_recurrent_weight_packing_round_trips_with_padding() -> None:
    r = np.arange(2 * 15 * 5, dtype=np.float32).reshape(2, 15, 5)  # GRU, H = 5
    segments = recurrence_segments("gru", 5, linear_before_reset=False)
    assert segments == [10, 5]
    rp = pack_recurrent_weight(r, segments, 8)
    assert rp.shape == (2, 3, 5, 8)  # 10 columns -> 2 blocks, 5 -> 1 block
    assert rp[1, 2, 3, 4] == r[1, 14, 3] and rp[1, 2, 3, 5] == 0  # padding is zero
    np.testing.assert_array_equal(unpack_recurrent_weight(rp, segments), r)


def test_recurrence_type_errors_say_what_is_expected() -> None:
    xw, rp, h0 = _var((4, 6, 4)), _var((1, 1, 4, 16)), _var((1, 2, 4))
    attrs = {"hidden_size": 4, "cell": "lstm", "block": 16}
    out = call("nn.recurrence", xw, rp, h0, _var((1, 2, 4)), _var((1, 12)), **attrs)
    assert out.type.fields[0] == TensorType((3, 1, 2, 4), "float32")
    with pytest.raises(IRError, match="XW must be"):
        call("nn.recurrence", _var((4, 6, 3)), rp, h0, _var((1, 2, 4)), _var((1, 12)), **attrs)
    with pytest.raises(IRError, match="unknown recurrent cell"):
        call("nn.recurrence", xw, rp, h0, **{**attrs, "cell": "qrnn"})
    with pytest.raises(IRError, match="RP must have shape"):
        call("nn.recurrence", xw, _var((1, 2, 4, 8)), h0, _var((1, 2, 4)), _var((1, 12)), **attrs)
