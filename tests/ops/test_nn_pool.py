"""nn.max_pool, nn.avg_pool and the global pools lowered to loop IR, run by the loop-IR
interpreter and compared with the graph-IR numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group


def run_group(func: Function, seed: int = 0, tol: float = 1e-5) -> str:
    """Lower ``func``, interpret it, compare with evaluate; return the loop IR text."""
    rng = np.random.default_rng(seed)
    xs = []
    for p in func.params:
        ty = p.type
        if ty.dtype.startswith("float"):
            xs.append(rng.standard_normal(ty.shape).astype(ty.dtype))
        else:
            xs.append(rng.integers(-100, 100, ty.shape).astype(ty.dtype))
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


POOL_CASES = [
    ((1, 2, 9), {"pool_size": (3,)}),
    ((2, 3, 8, 7), {"pool_size": (2, 2), "strides": (2, 2)}),
    ((1, 2, 7, 7), {"pool_size": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
    ((1, 2, 8, 9), {"pool_size": (3, 2), "strides": (2, 3), "ceil_mode": True}),
    (
        (1, 1, 10, 9),
        {"pool_size": (3, 3), "strides": (3, 2), "padding": (1, 0, 2, 1), "ceil_mode": True},
    ),
    ((1, 2, 9, 9), {"pool_size": (2, 3), "dilation": (2, 2), "padding": (1, 1, 1, 1)}),
    (
        (1, 2, 5, 6, 4),
        {"pool_size": (2, 2, 2), "strides": (1, 2, 2), "padding": (1, 0, 0, 0, 1, 1)},
    ),
    ((1, 1, 5, 5), {"pool_size": (5, 5), "padding": (2, 2, 2, 2)}),
]


@pytest.mark.parametrize(("shape", "attrs"), POOL_CASES)
def test_max_pool(shape, attrs):
    x = v("x", shape)
    run_group(group([x], call("nn.max_pool", x, **attrs)))


@pytest.mark.parametrize(("shape", "attrs"), POOL_CASES)
@pytest.mark.parametrize("include", [False, True])
def test_avg_pool(shape, attrs, include):
    x = v("x", shape)
    run_group(group([x], call("nn.avg_pool", x, count_include_pad=include, **attrs)))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float64"])
def test_max_pool_dtypes_padding_never_wins(dtype):
    x = v("x", (1, 2, 6, 6), dtype)
    body = call("nn.max_pool", x, pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))
    run_group(group([x], body))


def test_max_pool_all_negative_input_with_padding():
    x = v("x", (1, 1, 4, 4))
    func = group([x], call("nn.max_pool", x, pool_size=(3, 3), padding=(1, 1, 1, 1)))
    data = -np.arange(1, 17, dtype="float32").reshape(1, 1, 4, 4)
    out = np.zeros((1, 1, 4, 4), "float32")
    tir.interpret(lower_group(func, "k"), [data, out])
    np.testing.assert_array_equal(out, evaluate(Function(func.params, func.body), [data])[0])
    assert out.max() < 0


def test_avg_pool_with_epilogue_is_one_nest():
    x, b = v("x", (2, 8, 16, 16)), v("b", (8, 1, 1))
    pool = call("nn.avg_pool", x, pool_size=(3, 3), padding=(1, 1, 1, 1))
    text = run_group(group([x, b], call("relu", call("add", pool, b))))
    assert "parallel" in text and "vectorized" in text


@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 6, 7), (2, 2, 3, 4, 5)])
@pytest.mark.parametrize("op", ["nn.global_avg_pool", "nn.global_max_pool"])
def test_global_pools(shape, op):
    x = v("x", shape)
    run_group(group([x], call(op, x)))


@pytest.mark.parametrize(
    ("op", "attrs", "columns"),
    [
        ("nn.avg_pool", {"pool_size": (25, 5)}, True),  # ds_cnn_kws's whole-map window
        ("nn.avg_pool", {"pool_size": (25, 5), "count_include_pad": True}, True),
        ("nn.avg_pool", {"pool_size": (24, 5)}, False),  # two windows
        ("nn.avg_pool", {"pool_size": (25, 5), "padding": (1, 0, 1, 0)}, False),
        ("nn.global_avg_pool", {}, True),
        ("nn.global_max_pool", {}, True),
    ],
)
def test_whole_map_pools_reduce_columns_first(op, attrs, columns):
    x = v("x", (2, 3, 25, 5))
    text = run_group(group([x], call(op, x, **attrs)))
    assert ("_cols" in text) is columns


def test_global_pool_of_narrow_rows_is_one_reduction():
    x = v("x", (1, 4, 6, 3))
    assert "_cols" not in run_group(group([x], call("nn.global_avg_pool", x)))


def test_global_avg_pool_float64():
    x = v("x", (2, 3, 7, 7), "float64")
    run_group(group([x], call("nn.global_avg_pool", x)), tol=1e-12)


@pytest.mark.parametrize(("shape", "attrs"), POOL_CASES)
@pytest.mark.parametrize("p", [1.0, 2.0, 3.0])
def test_lp_pool(shape, attrs, p):
    x = v("x", shape)
    run_group(group([x], call("nn.lp_pool", x, p=p, **attrs)), tol=1e-4)


@pytest.mark.parametrize(("shape", "attrs"), POOL_CASES)
@pytest.mark.parametrize("order", [0, 1])
def test_max_pool_argmax(shape, attrs, order):
    x = v("x", shape)
    run_group(group([x], call("nn.max_pool_argmax", x, storage_order=order, **attrs)))


def test_max_pool_argmax_ties_pick_first_tap():
    x = v("x", (1, 1, 4, 4), "int32")
    func = group([x], call("nn.max_pool_argmax", x, pool_size=(2, 2), strides=(2, 2)))
    data = np.zeros((1, 1, 4, 4), "int32")
    out = np.zeros((1, 1, 2, 2), "int64")
    tir.interpret(lower_group(func, "k"), [data, out])
    np.testing.assert_array_equal(out, [[[[0, 2], [8, 10]]]])


@pytest.mark.cc
@pytest.mark.parametrize(
    ("node", "attrs"),
    [
        ("AveragePool", {"kernel_shape": [25, 5]}),
        ("GlobalAveragePool", {}),
        ("GlobalMaxPool", {}),
    ],
)
def test_compiled_whole_map_pools_match_onnxruntime(node, attrs):
    from onnx import TensorProto, helper

    from ember.testing import assert_matches_onnxruntime

    graph = helper.make_graph(
        [helper.make_node(node, ["x"], ["y"], **attrs)],
        "pool",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 25, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 1, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.random.default_rng(2).standard_normal((1, 64, 25, 5)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-5, atol=1e-6, target="c")


@pytest.mark.parametrize("op", ["nn.max_pool", "nn.avg_pool"])
def test_padded_channels_first_pools_read_a_padded_copy(op):
    """Regression: a padded 3x3 pool over NCHW read its taps through bounds checks, which
    gcc vectorized as masked gathers (max pool 3x3/2 of 1x64x112x112 at 0.15x onnxruntime,
    avg pool 3x3/1 at 0.08x): padded NCHW pools read a materialized ``pool_pad`` copy
    without conditions; unpadded and channels-last ones read their input."""
    x = v("x", (1, 3, 11, 12))
    padded = run_group(group([x], call(op, x, pool_size=(3, 3), strides=(2, 2), padding=(1,) * 4)))
    assert "pool_pad" in padded
    plain = run_group(group([x], call(op, x, pool_size=(3, 3), strides=(2, 2))))
    assert "pool_pad" not in plain
    y = v("y", (1, 11, 12, 3))
    last = call(op, y, pool_size=(3, 3), padding=(1,) * 4, data_layout="NHWC")
    assert "pool_pad" not in run_group(group([y], last))


@pytest.mark.parametrize(
    ("channels", "expect", "absent"),
    [
        (64, ("in unrolled(4)", "in vectorized(16)"), ()),  # ds_cnn_kws's and resnet8's
        (128, ("in unrolled(8)", "in vectorized(16)"), ()),
        (24, ("in vectorized(24)",), ("in unrolled(",)),  # not whole blocks of 16
        (1280, ("in vectorized(1280)",), ("in unrolled(",)),  # more blocks than registers
    ],
)
def test_whole_window_channels_last_sums_keep_short_rows_in_blocks(channels, expect, absent):
    """A channels-last average pool over its whole map sums each block of 16 channels as
    one vector under an unrolled loop of blocks (nn_schedule.vectorize_blocks), so that the
    sums stay in registers: the same additions in the same order."""
    x = v("x", (1, 5, 3, channels))
    text = run_group(group([x], call("nn.avg_pool", x, pool_size=(5, 3), data_layout="NHWC")))
    assert all(e in text for e in expect), text
    assert not any(a in text for a in absent), text
