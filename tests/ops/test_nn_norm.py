"""nn.batch_norm, nn.instance_norm, nn.group_norm, nn.layer_norm, nn.lrn, nn.softmax and
nn.log_softmax lowered to loop IR, run by the loop-IR interpreter and compared with the numpy
references."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.ir import Attrs, Function, TensorType, Var, call, const, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_softmax_rows import MIN_ROW


def run_group(func: Function, seed: int = 0, tol: float = 1e-5, positive: bool = False) -> str:
    """Lower ``func``, interpret it, compare with evaluate; return the loop IR text."""
    rng = np.random.default_rng(seed)
    xs = []
    for p in func.params:
        data = rng.standard_normal(p.type.shape) * 2 + 0.5
        xs.append((np.abs(data) if positive else data).astype(p.type.dtype))
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    return str(prim)


def group(params: list[Var], body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def v(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var(name, TensorType(shape, dtype))


@pytest.mark.parametrize(("shape", "axis"), [((2, 3, 4, 5), 1), ((4, 6), 1), ((3, 2, 5), -1)])
def test_batch_norm(shape, axis):
    x = v("x", shape)
    c = shape[axis]
    params = [v(n, (c,)) for n in ("gamma", "beta", "mean", "var")]
    body = call("nn.batch_norm", x, *params, axis=axis, epsilon=1e-3)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(shape).astype("float32")]
    xs += [rng.standard_normal((c,)).astype("float32") for _ in range(3)]
    xs.append(rng.uniform(0.5, 2.0, (c,)).astype("float32"))
    func = group([x, *params], body)
    ref = evaluate(Function(func.params, func.body), xs)[0]
    out = np.zeros(shape, "float32")
    tir.interpret(lower_group(func, "k"), xs + [out])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shape", "groups", "layout"),
    [
        ((2, 6, 7), 3, "NCHW"),
        ((1, 8, 5, 6), 2, "NCHW"),
        ((1, 8, 40, 3), 4, "NCHW"),  # a row long enough for lane partials
        ((2, 2, 3, 4, 2), 1, "NCHW"),
        ((1, 5, 6, 8), 2, "NHWC"),
        ((2, 3, 32), 8, "NHWC"),
        ((1, 3, 4, 2, 6), 6, "NHWC"),
        ((1, 16, 1, 1), 16, "NCHW"),  # statistics of the output's shape: kept at root
        ((1, 1, 1, 16), 8, "NHWC"),
    ],
)
def test_group_norm(shape, groups, layout):
    channels = shape[1] if layout == "NCHW" else shape[-1]
    x, s, b = v("x", shape), v("s", (channels,)), v("b", (channels,))
    body = call("nn.group_norm", x, s, b, num_groups=groups, data_layout=layout, epsilon=1e-5)
    text = run_group(group([x, s, b], body), tol=1e-4)
    if layout == "NHWC":  # per-channel sums run across the channels, vectorised
        assert f"vectorized({channels})" in text, text


def test_group_norm_refuses_groups_that_do_not_divide_the_channels():
    x, s, b = v("x", (1, 6, 4, 4)), v("s", (6,)), v("b", (6,))
    with pytest.raises(IRError, match="num_groups must divide"):
        call("nn.group_norm", x, s, b, num_groups=4)


@pytest.mark.parametrize("shape", [(2, 3, 7), (1, 4, 5, 6), (2, 2, 3, 4, 2)])
def test_instance_norm(shape):
    x, s, b = v("x", shape), v("s", (shape[1],)), v("b", (shape[1],))
    run_group(group([x, s, b], call("nn.instance_norm", x, s, b, epsilon=1e-5)), tol=1e-4)


@pytest.mark.parametrize(
    ("shape", "axis", "sshape", "with_bias"),
    [
        ((4, 8), -1, (8,), True),
        ((2, 3, 6), -1, (6,), False),
        ((2, 3, 4), 1, (3, 4), True),
        ((2, 3, 4), 1, (4,), True),
        ((3, 5), 0, (3, 5), True),
    ],
)
def test_layer_norm(shape, axis, sshape, with_bias):
    x, s, b = v("x", shape), v("s", sshape), v("b", sshape)
    args = [x, s, b] if with_bias else [x, s]
    body = call("nn.layer_norm", *args, axis=axis, epsilon=1e-5)
    run_group(group(args, body), tol=1e-4)


@pytest.mark.parametrize(
    ("shape", "size", "axis"),
    [((1, 6, 3, 4), 3, 1), ((2, 5, 4, 4), 4, 1), ((2, 3, 5), 5, 1), ((2, 4, 7), 2, 2)],
)
def test_lrn(shape, size, axis):
    x = v("x", shape)
    body = call("nn.lrn", x, size=size, alpha=1e-3, beta=0.75, bias=2.0, axis=axis)
    run_group(group([x], body))


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize(
    ("shape", "axis"), [((4, 10), -1), ((4, 10), 0), ((2, 3, 4, 5), 1), ((3, 4, 5), -1), ((7,), 0)]
)
def test_softmax(op, shape, axis):
    x = v("x", shape)
    run_group(group([x], call(op, x, axis=axis)))


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("width", [197, 35, 64])
def test_softmax_rows_of_any_length_keep_lane_partials(op, width):
    """Rows no multiple of the lanes long (ViT's 197 scores): the partial maxima and sums
    still run LANES side by side, the last chunk's missing lanes reading the identity
    (-inf for the max, 0 for the sum); interpreted against the reference, with values
    far below the row's max in the last chunk."""
    x = v("x", (3, width))
    func = group([x], call(op, x, axis=-1))
    text = str(lower_group(func, "k"))
    if width >= MIN_ROW:  # row by row (nn_softmax_rows), 16 lanes
        assert 'acc = allocate(Buffer((16,), "float32"' in text, text
    else:
        assert "softmax_max_lanes" in text and "softmax_sum_lanes" in text
    data = np.random.default_rng(4).standard_normal((3, width)).astype(np.float32)
    data[:, -3:] = -50.0
    out = np.zeros((3, width), np.float32)
    tir.interpret(lower_group(func, "k"), [data, out])
    np.testing.assert_allclose(
        out, evaluate(Function(func.params, func.body), [data])[0], rtol=1e-5, atol=1e-6
    )


def test_softmax_float64_large_values_stable():
    x = v("x", (3, 8), "float64")
    func = group([x], call("nn.softmax", x, axis=1))
    data = np.linspace(500, 900, 24).reshape(3, 8)
    out = np.zeros((3, 8))
    tir.interpret(lower_group(func, "k"), [data, out])
    np.testing.assert_allclose(out, evaluate(Function(func.params, func.body), [data])[0])
    assert np.isfinite(out).all()


def test_softmax_rows_parallel_when_large():
    x = v("x", (256, 64))
    text = str(lower_group(group([x], call("nn.softmax", x, axis=-1)), "k"))
    assert "parallel" in text and "vectorized" in text


def test_batch_norm_after_conv_keeps_per_channel_scale_in_a_buffer():
    x, w = v("x", (1, 3, 6, 6)), v("w", (4, 3, 3, 3))
    stats = [v(n, (4,)) for n in ("gamma", "beta", "mean", "var")]
    conv = call("nn.conv", x, w, padding=(1, 1, 1, 1))
    func = group([x, w, *stats], call("nn.batch_norm", conv, *stats, epsilon=1e-3))
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal(p.type.shape).astype("float32") for p in func.params]
    xs[-1] = np.abs(xs[-1]) + 0.5
    ref = evaluate(Function(func.params, func.body), xs)[0]
    prim = lower_group(func, "k")
    assert "batch_norm_scale = allocate" in str(prim)
    out = np.zeros(ref.shape, "float32")
    tir.interpret(prim, xs + [out])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("op", "shape", "extra"),
    [
        ("nn.softmax", (3, 64), {"axis": -1}),
        ("nn.log_softmax", (2, 2, 40), {"axis": 2}),
        ("nn.layer_norm", (2, 3, 48), {"axis": -1}),
        ("nn.layer_norm", (2, 3, 32), {"axis": 1}),
        ("nn.instance_norm", (1, 2, 3, 32), {}),
    ],
)
def test_long_trailing_reductions_use_vector_lanes(op, shape, extra):
    x = v("x", shape)
    if op == "nn.layer_norm":
        inner = shape[extra["axis"] % len(shape) :]
        s = v("s", inner)
        func = group([x, s], call(op, x, s, **extra))
    elif op == "nn.instance_norm":
        s, b = v("s", (shape[1],)), v("b", (shape[1],))
        func = group([x, s, b], call(op, x, s, b, **extra))
    else:
        func = group([x], call(op, x, **extra))
    text = run_group(func, tol=1e-4)
    assert "_lanes" in text or "acc = allocate(Buffer((16,)" in text  # softmax: by rows


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("shape", [(2, 3, 140), (5, 1500), (4, 128)])
def test_row_softmax_matches_the_whole_tensor_softmax(shape, op, monkeypatch):
    """The row kernel (rows in parallel, 16 lanes and a tail) against te's passes."""
    from ember.ops import nn_norm

    x = v("x", shape)
    func = group([x], call(op, x, axis=-1))
    data = np.random.default_rng(5).standard_normal(shape).astype(np.float32) * 4
    outs = []
    for rows in (True, False):
        monkeypatch.setattr(nn_norm, "ROW_SOFTMAX", rows)
        text = str(lower_group(func, "k"))
        assert ("softmax_rows" in text) == rows
        out = np.zeros(shape, np.float32)
        tir.interpret(lower_group(func, "k"), [data, out])
        outs.append(out)
    np.testing.assert_allclose(outs[0], outs[1], rtol=2e-6, atol=1e-6)
    probs = np.exp(outs[0]) if op == "nn.log_softmax" else outs[0]
    np.testing.assert_allclose(probs.sum(axis=-1), 1.0, rtol=1e-5)


def test_softmax_rows_reads_the_first_width_elements_of_padded_rows():
    """nn.softmax_rows: rows of 136 (a product padded from 130) normalised over their first
    130, the padding ignored whatever it holds."""
    x = v("x", (2, 3, 136))
    func = group([x], call("nn.softmax_rows", x, width=130))
    assert func.body.type == TensorType((2, 3, 130), "float32")
    run_group(func)
    with pytest.raises(IRError, match="must lie in 1..136"):
        call("nn.softmax_rows", x, width=140)


def test_softmax_of_a_padded_products_slice_legalizes_to_softmax_rows():
    """softmax(slice(P) * c) over long rows -> softmax_rows(P * c): no slice pass."""
    from ember.ops.nn_norm import softmax_of_padded_rows

    p = v("p", (1, 2, 200, 224))
    sliced = call("strided_slice", p, begin=(0, 0, 0, 0), end=(1, 2, 200, 200), strides=(1,) * 4)
    node = call("nn.softmax", call("multiply", sliced, const(np.float32(0.125))), axis=-1)
    out = softmax_of_padded_rows(node)
    assert out.op_name == "nn.softmax_rows" and out.attrs["width"] == 200
    assert out.args[0].op_name == "multiply" and out.args[0].args[0] is p
    data = np.random.default_rng(2).standard_normal((1, 2, 200, 224)).astype(np.float32)
    want = evaluate(Function((p,), node), [data])[0]
    np.testing.assert_allclose(evaluate(Function((p,), out), [data])[0], want, rtol=1e-6)
    rows = call("strided_slice", p, begin=(0, 0, 0, 0), end=(1, 2, 100, 224), strides=(1,) * 4)
    kept = call("nn.softmax", rows, axis=-1)  # a slice of rows, not of columns
    assert softmax_of_padded_rows(kept) is kept


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("width", [130, 143, 144])
def test_row_softmax_tail_overlaps_the_last_whole_lanes(width, op):
    """A row's tail is one vector step over its last 16 elements: the max there counts
    (here the row's max is its last element), and the sum adds only the lanes not summed
    before (rows of 143 would otherwise count 15 elements twice). The log-softmax by rows
    sums the exponentials without storing them."""
    x = v("x", (3, width))
    func = group([x], call(op, x, axis=-1))
    text = str(lower_group(func, "k"))
    assert "softmax_rows" in text and (f"_8 >= {16 - width % 16}," in text) == bool(width % 16)
    data = np.random.default_rng(6).standard_normal((3, width)).astype(np.float32)
    data[:, -1] = 6.0
    out = np.zeros((3, width), np.float32)
    tir.interpret(lower_group(func, "k"), [data, out])
    np.testing.assert_allclose(
        out, evaluate(Function(func.params, func.body), [data])[0], rtol=2e-6, atol=1e-8
    )
