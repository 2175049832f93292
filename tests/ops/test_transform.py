"""Layout computes (reshape, transpose, concatenate, split, strided_slice, broadcast_to, tile,
nn.pad), lowered and interpreted, against the graph-IR numpy references."""

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Tuple, TupleGetItem, Var, call, evaluate
from ember.ir.ops.transform import normalize_slice
from ember.lowering.lower_group import lower_group
from ember.tir.functor import free_vars
from ember.tir.simplify import _collect, simplify


def _group(params, body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def check(func: Function, xs: list[np.ndarray]) -> None:
    """Lower ``func``, interpret it and compare every output bit for bit."""
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, [np.array(x, order="C") for x in xs] + outs)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_array_equal(out, ref)


def _x(shape, dtype="float32", seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return (rng.standard_normal(shape) * 10).astype(dtype)


def _one(op: str, x: np.ndarray, **attrs) -> None:
    v = Var("x", TensorType(x.shape, x.dtype.name))
    check(_group([v], call(op, v, **attrs)), [x])


@pytest.mark.parametrize(
    "src,dst",
    [((2, 3, 4), (6, 4)), ((2, 3, 4), (4, 3, 2)), ((24,), (2, 3, 4)), ((2, 3, 4), (2, 12)),
     ((1, 5), (5,)), ((2, 3, 4), (2, 3, 4)), ((), (1, 1)), ((2, 6), (2, 2, 3))],
)  # fmt: skip
def test_reshape(src, dst):
    _one("reshape", _x(src), newshape=dst)


@pytest.mark.parametrize("axes", [(1, 0), (0, 2, 1), (2, 0, 1), (3, 1, 0, 2)])
def test_transpose(axes):
    shape = (2, 3, 4, 5)[: len(axes)]
    _one("transpose", _x(shape, "int64" if len(axes) == 3 else "float32"), axes=axes)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_concatenate(axis):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    sizes = [1, 3, 2]
    xs = []
    for k, n in enumerate(sizes):
        s = list(shapes[k])
        s[axis] = n
        xs.append(_x(tuple(s), seed=k))
    vs = [Var(f"x{k}", TensorType(x.shape, "float32")) for k, x in enumerate(xs)]
    check(_group(vs, call("concatenate", *vs, axis=axis)), xs)


def test_concatenate_with_empty_part_and_bools():
    xs = [_x((2, 0), "bool"), _x((2, 3), "bool", 1), _x((2, 1), "bool", 2)]
    vs = [Var(f"x{k}", TensorType(x.shape, "bool")) for k, x in enumerate(xs)]
    check(_group(vs, call("concatenate", *vs, axis=1)), xs)


def test_split_into_tuple():
    x = _x((3, 7))
    v = Var("x", TensorType(x.shape, "float32"))
    s = call("split", v, sizes=(2, 0, 5), axis=1)
    body = Tuple((TupleGetItem(s, 0), TupleGetItem(s, 2)))
    check(_group([v], body), [x])
    check(_group([v], call("split", v, sizes=(1, 2), axis=0)), [x])


@pytest.mark.parametrize(
    "spec",
    [
        [(0, 5, 1), (1, 4, 2)],
        [(-1, -100, -1), (0, 100, 3)],
        [(4, 0, -2), (5, -6, -1)],
        [(2, 2, 1), (0, 6, 1)],
    ],
)
def test_strided_slice_including_negative_steps(spec):
    shape = (5, 6)
    begin, end, strides = [], [], []
    for (b, e, s), d in zip(spec, shape, strict=True):
        nb, ne = normalize_slice(b, e, s, d)
        begin.append(nb)
        end.append(ne)
        strides.append(s)
    _one("strided_slice", _x(shape), begin=begin, end=end, strides=strides)


def test_broadcast_to_and_tile():
    _one("broadcast_to", _x((3, 1)), shape=(2, 3, 4))
    _one("broadcast_to", _x(()), shape=(2, 2))
    _one("tile", _x((2, 3)), reps=(2, 3))
    _one("tile", _x((1, 3), "int32"), reps=(3, 1))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_pad(mode, dtype):
    _one("nn.pad", _x((3, 4), dtype), pad_width=(1, 2, 2, 3), pad_mode=mode, pad_value=1.5)
    _one("nn.pad", _x((2, 3, 4), dtype), pad_width=(0, 1, 0, 0, 2, 1), pad_mode=mode)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "wrap"])
@pytest.mark.parametrize(
    "width", [(0, 0, 1, 1, 0, 0, 1, 1), (0, 0, 0, 3, 0, 0, 0, 2), (0, 1, 2, 0, 0, 0, 1, 0)]
)
def test_pad_rows_copy_their_interior_without_selects(mode, width):
    """The padded last axis runs as border loops and a plain vectorized interior copy
    (tir.transform.partition_loops): reflect of 1x64x128x128 by 1 326 -> 68 us at one
    thread (onnxruntime 111), edge 319 -> 67, wrap 327 -> 80; values as the reference."""
    x = _x((1, 3, 6, 20))
    v = Var("x", TensorType(x.shape, "float32"))
    func = _group([v], call("nn.pad", v, pad_width=width, pad_mode=mode, pad_value=2.5))
    check(func, [x])
    loops: list[tir.For] = []
    prim = lower_group(func, "kernel")
    tir.post_order_visit(prim.body, lambda n: loops.append(n) if isinstance(n, tir.For) else None)
    vector = [f for f in loops if f.kind == tir.ForKind.VECTORIZED]
    assert len(vector) == 1
    j = vector[0].loop_var
    loads: list[tir.BufferLoad] = []
    decisions: list[tir.PrimExpr] = []

    def visit(n):
        if isinstance(n, tir.BufferLoad):
            loads.append(n)
        elif isinstance(n, tir.Select):
            decisions.append(n.condition)
        elif isinstance(n, tir.Min | tir.Max | tir.LT | tir.GE):
            decisions.append(n)

    tir.post_order_visit(vector[0].body, visit)
    (load,) = loads
    terms, _ = _collect(simplify(load.indices[-1]))
    assert terms == {j: 1}  # x[.., j + k]: contiguous
    assert all(j not in free_vars(d) for d in decisions)
    wide = _x((1, 2, 3, 4))
    w = Var("x", TensorType(wide.shape, "float32"))
    pads = (0, 0, 0, 9, 0, 0, 0, 11)  # wrap beyond the axis: modulo, kept whole
    if mode == "wrap":
        check(_group([w], call("nn.pad", w, pad_width=pads, pad_mode=mode)), [wide])


def test_fused_layout_chain_is_one_kernel():
    x = _x((2, 3, 4))
    v = Var("x", TensorType(x.shape, "float32"))
    t = call("transpose", v, axes=(2, 0, 1))
    r = call("reshape", t, newshape=(4, 6))
    body = call("relu", call("nn.pad", r, pad_width=(1, 0, 0, 1), pad_mode="reflect"))
    check(_group([v], body), [x])


@pytest.mark.parametrize("mode", ["reflect", "wrap", "edge"])
def test_pad_widths_up_to_the_axis_length(mode):
    x = _x((4, 5))
    top = 3 if mode == "reflect" else 4
    _one("nn.pad", x, pad_width=(top, 0, 0, top), pad_mode=mode)
    if mode == "wrap":
        _one("nn.pad", x, pad_width=(9, 1, 2, 11), pad_mode=mode)


def test_concatenate_with_scalar_bool_constant():
    from ember.ir import const

    x = _x((2, 3), "bool")
    v = Var("x", TensorType(x.shape, "bool"))
    c = call("broadcast_to", const(np.array(True)), shape=(2, 1))
    check(_group([v], call("concatenate", v, c, axis=1)), [x])


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(
    ("shape", "dtype"),
    [
        ((1, 3, 5, 20), "float32"),
        ((2, 4, 6, 40), "float16"),
        ((1, 2, 3, 17), "int8"),
        ((1, 3, 4, 33), "bool"),
    ],
)
def test_compiled_channels_last_transpose_of_few_channels(shape, dtype, target):
    """An image to NHWC with rows of 2-4 channels, compiled: the width as the vector lanes,
    the channels unrolled (lower_group.INTERLEAVE_SHORT_ROWS), tails of the width
    included; the bits of numpy's transpose."""
    from onnx import TensorProto, helper

    from ember.testing import run_onnx_compiled

    elem = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}.get(dtype)
    elem = elem or {"int8": TensorProto.INT8, "bool": TensorProto.BOOL}[dtype]
    out_shape = (shape[0], shape[2], shape[3], shape[1])
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])],
        "nhwc",
        [helper.make_tensor_value_info("x", elem, shape)],
        [helper.make_tensor_value_info("y", elem, out_shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = _x(shape, dtype)
    (y,) = run_onnx_compiled(model, {"x": x}, target=target)
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1))
