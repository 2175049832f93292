"""nn.rnn, nn.gru and nn.lstm legalized (one input projection and one nn.recurrence): the
legalized graph evaluates to what the recurrent op's numpy reference gives, and the
nn.recurrence kernel's loop IR to what its reference gives."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Function, IRModule, TensorType, TupleGetItem, Var, call, const, evaluate
from ember.ir.expr import Call, post_order
from ember.ir.op import Attrs
from ember.ir.ops.nn_rnn import (
    pack_recurrent_weight,
    recurrence_segments,
    unpack_recurrent_weight,
)
from ember.lowering.legalize import legalize
from ember.lowering.lower_group import lower_group
from ember.ops import nn_rnn_kernel
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.ops.nn_rnn import projection_unit
from ember.ops.registry import find_legalizer

GATES = {"nn.rnn": 1, "nn.gru": 3, "nn.lstm": 4}


def _build(op, seq, batch, inp, hidden, dirs, lens=None, const_lens=False, zero_p=False, **attrs):
    g = GATES[op]
    rng = np.random.default_rng(7)
    shapes = [
        (seq, batch, inp),
        (dirs, g * hidden, inp),
        (dirs, g * hidden, hidden),
        (dirs, 2 * g * hidden),
        (dirs, batch, hidden),
    ]
    if op == "nn.lstm":
        shapes += [(dirs, batch, hidden), (dirs, 3 * hidden)]
    names = ["X", "W", "R", "B", "h0", "c0", "P"]
    params = []
    args = []
    values = []
    for name, shape in zip(names, shapes, strict=False):
        data = (rng.standard_normal(shape) * 0.5).astype("float32")
        if name == "P" and zero_p:
            args.append(const(np.zeros(shape, "float32")))
            continue
        var = Var(name, TensorType(shape, "float32"))
        params.append(var)
        args.append(var)
        values.append(data)
    if lens is not None:
        arr = np.asarray(lens, dtype="int32")
        if const_lens:
            args.append(const(arr))
        else:
            var = Var("lens", TensorType(arr.shape, "int32"))
            params.append(var)
            args.append(var)
            values.append(arr)
    direction = {1: "forward", 2: "bidirectional"}[dirs] if "direction" not in attrs else None
    if direction is not None:
        attrs["direction"] = direction
    node = call(op, *args, hidden_size=hidden, **attrs)
    return params, node, values


def check_unrolled(params, node, values, tol=1e-5):
    ref = evaluate(Function(tuple(params), node), values)
    legal = find_legalizer(node.op.name)(node)
    assert not any(isinstance(n, Call) and n.op.name in GATES for n in post_order(legal)), (
        "the recurrent op must be gone"
    )
    got = evaluate(Function(tuple(params), legal), values)
    assert len(got) == len(ref)
    for a, b in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["nn.rnn", "nn.gru", "nn.lstm"])
@pytest.mark.parametrize("dirs", [1, 2])
def test_unrolled_matches_reference(op, dirs):
    check_unrolled(*_build(op, 4, 3, 5, 6, dirs))


@pytest.mark.parametrize("op", ["nn.rnn", "nn.gru", "nn.lstm"])
def test_reverse_direction(op):
    check_unrolled(*_build(op, 3, 2, 4, 3, 1, direction="reverse"))


@pytest.mark.parametrize("op", ["nn.rnn", "nn.gru", "nn.lstm"])
@pytest.mark.parametrize("const_lens", [False, True])
def test_sequence_lens(op, const_lens):
    check_unrolled(*_build(op, 5, 3, 4, 3, 2, lens=[5, 2, 3], const_lens=const_lens))


def test_lstm_clip_input_forget_and_zero_peepholes():
    check_unrolled(*_build("nn.lstm", 3, 2, 4, 5, 2, clip=0.3, input_forget=True))
    params, node, values = _build("nn.lstm", 3, 2, 4, 5, 1, zero_p=True)
    check_unrolled(params, node, values)
    legal = find_legalizer("nn.lstm")(node)
    assert sum(1 for n in post_order(legal) if isinstance(n, Call)) < 150


@pytest.mark.parametrize("lbr", [False, True])
def test_gru_linear_before_reset(lbr):
    check_unrolled(*_build("nn.gru", 3, 2, 4, 5, 2, linear_before_reset=lbr, clip=2.0))


@pytest.mark.parametrize(
    ("op", "acts", "alpha", "beta"),
    [
        ("nn.rnn", ["Relu", "Affine"], [0.5], [0.1]),
        (
            "nn.gru",
            ["HardSigmoid", "LeakyRelu", "Sigmoid", "ScaledTanh"],
            [0.3, 0.1, 0.8],
            [0.4, 1.2],
        ),
        ("nn.lstm", ["Sigmoid", "Elu", "Softsign"], [0.7], []),
        ("nn.lstm", ["ThresholdedRelu", "Softplus", "Tanh"], [0.2], []),
    ],
)
def test_activations(op, acts, alpha, beta):
    dirs = 2 if len(acts) in (2, 4) and op != "nn.lstm" else 1
    check_unrolled(
        *_build(
            op, 3, 2, 3, 4, dirs, activations=acts, activation_alpha=alpha, activation_beta=beta
        )
    )


def test_legalize_pass_removes_lstm_and_returns_tuple_fields():
    params, node, values = _build("nn.lstm", 2, 1, 3, 2, 1)
    body = call("add", TupleGetItem(node, 1), TupleGetItem(node, 2))
    mod = IRModule({"main": Function(tuple(params), body)})
    out = legalize(mod)
    assert all(
        not (isinstance(n, Call) and n.op.name == "nn.lstm") for n in post_order(out.main.body)
    )
    np.testing.assert_allclose(
        evaluate(out.main, values)[0], evaluate(mod.main, values)[0], rtol=1e-6
    )


def test_constant_weights_become_matmuls_of_constant_slices():
    rng = np.random.default_rng(3)
    seq, batch, inp, hidden = 3, 2, 4, 5
    x = Var("X", TensorType((seq, batch, inp), "float32"))
    consts = [
        const((rng.standard_normal(s) * 0.5).astype("float32"))
        for s in [(2, 4 * hidden, inp), (2, 4 * hidden, hidden), (2, 8 * hidden)]
    ]
    zeros = [const(np.zeros(s, "float32")) for s in [(2, batch, hidden)] * 2 + [(2, 3 * hidden)]]
    node = call("nn.lstm", x, *consts, *zeros, hidden_size=hidden, direction="bidirectional")
    body = TupleGetItem(node, 0)
    mod = IRModule({"main": Function((x,), body)})
    out = legalize(mod)
    names = [n.op.name for n in post_order(out.main.body) if isinstance(n, Call)]
    assert "nn.dense" not in names and "nn.matmul" in names
    xs = [rng.standard_normal((seq, batch, inp)).astype("float32")]
    np.testing.assert_allclose(
        evaluate(out.main, xs)[0], evaluate(mod.main, xs)[0], rtol=1e-5, atol=1e-6
    )


# --- the legalized form: one projection, one nn.recurrence, and its kernel --------------


def _legal_ops(params, node):
    legal = legalize(IRModule({"main": Function(tuple(params), TupleGetItem(node, 0))}))
    return [n for n in post_order(legal.main.body) if isinstance(n, Call)]


def test_constant_weights_become_one_packed_projection_and_one_recurrence():
    rng = np.random.default_rng(4)
    seq, batch, inp, hid = 5, 2, 3, 16
    x = Var("X", TensorType((seq, batch, inp), "float32"))
    w, r, b = (
        const((rng.standard_normal(s) * 0.5).astype("float32"))
        for s in [(2, 4 * hid, inp), (2, 4 * hid, hid), (2, 8 * hid)]
    )
    zeros = [const(np.zeros(s, "float32")) for s in [(2, batch, hid)] * 2 + [(2, 3 * hid)]]
    node = call("nn.lstm", x, w, r, b, *zeros, hidden_size=hid, direction="bidirectional")
    calls = _legal_ops([x], node)
    names = [n.op.name for n in calls]
    assert names.count("nn.matmul") == 1 and names.count("nn.recurrence") == 1
    assert "nn.dense" not in names and "strided_slice" not in names
    (mm,) = (n for n in calls if n.op.name == "nn.matmul")
    assert mm.args[1].type.shape == (8 * hid // 16, inp, 16)  # (D*G*H/u, I, u), u = 16
    (rec,) = (n for n in calls if n.op.name == "nn.recurrence")
    assert rec.attrs["block"] == 64 and not rec.attrs["peepholes"]
    assert rec.args[1].type.shape == (2, 1, hid, 64)


@pytest.mark.parametrize(
    ("op", "attrs"),
    [
        ("nn.lstm", {"clip": 0.8}),
        ("nn.gru", {}),
        ("nn.gru", {"linear_before_reset": True}),
        ("nn.rnn", {"activations": ["Relu", "Tanh"]}),
    ],
)
def test_recurrence_kernel_in_the_interpreter(op, attrs):
    """The loop IR of nn.recurrence (run by the reference interpreter) equals its numpy
    reference, with sequence_lens and two directions."""
    params, node, values = _build(op, 3, 2, 3, 5, 2, lens=[3, 1], **attrs)
    calls = _legal_ops(params, node)
    (rec,) = (n for n in calls if n.op.name == "nn.recurrence")
    args = [evaluate(Function(tuple(params), a), values)[0] for a in rec.args]
    segments = recurrence_segments(rec.attrs["cell"], 5, rec.attrs["linear_before_reset"])
    r = unpack_recurrent_weight(args[1], segments)
    args[1] = pack_recurrent_weight(r, segments, 8)  # the columns padded to blocks of 8
    attrs = {**dict(rec.attrs), "block": 8}
    want = rec.op.reference(args, Attrs(attrs))
    fparams = [Var(f"a{i}", TensorType(a.shape, a.dtype.name)) for i, a in enumerate(args)]
    body = call("nn.recurrence", *fparams, **attrs)
    func = lower_group(Function(tuple(fparams), body), "recurrence")
    outs = [np.zeros_like(w) for w in want]
    tir.interpret(func, [np.ascontiguousarray(a) for a in args] + outs)
    for got, ref in zip(outs, want, strict=True):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_input_projection_tiles_call_the_kernel_on_avx2_c():
    # the projection's packed (blocks, K, 32) matmul: 6-row x 16-column tiles as kernel calls
    a = Var("a", TensorType((12, 20), "float32"))
    b = Var("b", TensorType((4, 20, 32), "float32"))
    body = call("add", call("nn.matmul", a, b), const(np.float32(0.5)))
    func = Function((a, b), body, Attrs({"Primitive": 1}))
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(p.type.shape).astype(np.float32) for p in (a, b)]
    (ref,) = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel", "c -mcpu=haswell")
    out = np.zeros(ref.shape, ref.dtype)
    tir.interpret(prim, [*xs, out], externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    assert "ember_f32_conv_tile" in str(prim)
    assert "ember_f32_conv_tile" not in str(lower_group(func, "kernel", "llvm -mcpu=haswell"))


def test_recurrent_products_alternate_block_order_with_equal_results(monkeypatch):
    """Every other step walks R's column blocks backwards (nn_rnn_kernel.SNAKE), with bitwise
    the same outputs as the forward walk."""
    params, node, values = _build("nn.lstm", 4, 1, 3, 24, 2)
    calls = _legal_ops(params, node)
    (rec,) = (n for n in calls if n.op.name == "nn.recurrence")
    args = [evaluate(Function(tuple(params), a), values)[0] for a in rec.args]
    segments = recurrence_segments("lstm", 24, False)
    args[1] = pack_recurrent_weight(unpack_recurrent_weight(args[1], segments), segments, 8)
    attrs = {**dict(rec.attrs), "block": 8}
    fparams = [Var(f"a{i}", TensorType(a.shape, a.dtype.name)) for i, a in enumerate(args)]
    body = call("nn.recurrence", *fparams, **attrs)
    results = []
    for snake in (False, True):
        monkeypatch.setattr(nn_rnn_kernel, "SNAKE", snake)
        func = lower_group(Function(tuple(fparams), body), "recurrence")
        assert ("jb: int32 = " in str(func)) == snake
        want = rec.op.reference(args, Attrs(attrs))
        outs = [np.zeros_like(w) for w in want]
        tir.interpret(func, [np.ascontiguousarray(a) for a in args] + outs)
        results.append(outs)
    for forward, snaking in zip(*results, strict=True):
        np.testing.assert_array_equal(forward, snaking)


def test_projection_unit_is_sixteen_columns_where_it_divides():
    assert projection_unit(256) == 16 and projection_unit(24) == 8 and projection_unit(5) == 5


def test_large_constant_matmul_of_few_rows_is_streamed_in_column_blocks():
    """nn.matmul's legalizer packs a large constant rhs times few rows in column blocks of
    16 (nn_rnn.streamed_matmul) and transposes back; the values stay."""
    rng = np.random.default_rng(2)
    x = Var("x", TensorType((24, 1, 512), "float32"))
    big = rng.standard_normal((512, 256)).astype("float32")
    node = call("nn.matmul", x, const(big))
    legal = legalize(IRModule({"main": Function((x,), node)}))
    calls = [n for n in post_order(legal.main.body) if isinstance(n, Call)]
    (mm,) = (n for n in calls if n.op.name == "nn.matmul")
    assert mm.args[1].type.shape == (16, 512, 16)
    xs = rng.standard_normal((24, 1, 512)).astype("float32")
    (got,) = evaluate(legal.main, [xs])
    np.testing.assert_allclose(got, xs @ big, rtol=1e-4, atol=1e-4)
    # a small weight (256 KiB: L2-resident, BERT's FFN), or many rows, keep the plain
    # (K, N) product
    for rows, cols in [(24, 64), (24, 128), (256, 256)]:
        y = Var("y", TensorType((rows, 512), "float32"))
        w = const(rng.standard_normal((512, cols)).astype("float32"))
        out = legalize(IRModule({"main": Function((y,), call("nn.matmul", y, w))}))
        mms = [n for n in post_order(out.main.body) if isinstance(n, Call)]
        assert [n.args[1].type.shape for n in mms if n.op.name == "nn.matmul"] == [(512, cols)]
