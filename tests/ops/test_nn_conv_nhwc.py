"""Channels-last convolutions (data_layout "NHWC", ember.ops.nn_conv_nhwc): the type rule and
reference, the legalizer's fallback, compiled kernels against the NCHW ones, and the
convert_layout pass compiled: equal results with the pass on and off, byte-identical builds.

Tolerance: the NHWC kernels run the same micro-kernels and reductions as the NCHW ones
except where the NCHW path picks another tiling (position lanes, channels-outer copies), so
results are bitwise equal or within float32 rounding of a reordered sum (rtol/atol 1e-5 of
values of magnitude ~10)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.backends.onednn.compile import conv_ok
from ember.driver import build
from ember.errors import IRError
from ember.ir import Function, IRModule, TensorType, Var, call, const, evaluate
from ember.ops.nn_conv import conv_to_packed
from ember.ops.nn_conv_nhwc import flat_fits
from ember.testing.runners import run_artifacts
from ember.transform import PassContext

F32 = "float32"
TOL = {"rtol": 1e-5, "atol": 1e-5}
TO_LAST = (0, 2, 3, 1)
TO_FIRST = (0, 3, 1, 2)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


def _conv_module(xshape: tuple[int, ...], w: np.ndarray, layout: str, **attrs: object) -> IRModule:
    shape = xshape if layout == "NCHW" else tuple(xshape[a] for a in TO_LAST)
    x = Var("x", TensorType(shape, F32))
    bias = _rand(w.shape[0], 1, 1, seed=9)
    bias = bias if layout == "NCHW" else bias.reshape(1, 1, -1)
    y = call("nn.conv", x, const(w), data_layout=layout, **attrs)  # type: ignore[arg-type]
    y = call("clip", call("add", y, const(bias)), a_min=0.0, a_max=6.0)
    return IRModule({"main": Function((x,), y)})


def test_type_rule_and_reference_are_the_nchw_ones_transposed() -> None:
    x = _rand(1, 3, 7, 6)
    w = _rand(8, 3, 3, 3, seed=1)
    nchw = _conv_module(x.shape, w, "NCHW", padding=[1, 1, 1, 1], strides=[2, 2])
    nhwc = _conv_module(x.shape, w, "NHWC", padding=[1, 1, 1, 1], strides=[2, 2])
    assert nhwc.main.body.type == TensorType((1, 4, 3, 8), F32)
    want = evaluate(nchw, [x])[0]
    got = evaluate(nhwc, [np.ascontiguousarray(x.transpose(TO_LAST))])[0]
    np.testing.assert_allclose(got.transpose(TO_FIRST), want, **TOL)


def test_unknown_data_layout_is_an_error() -> None:
    x = Var("x", TensorType((1, 3, 5, 5), F32))
    with pytest.raises(IRError, match="unknown data_layout 'NCWH'; known: NCHW, NHWC"):
        call("nn.conv", x, const(_rand(4, 3, 1, 1)), data_layout="NCWH")


def test_unpackable_nhwc_conv_legalizes_between_transposes() -> None:
    x = Var("x", TensorType((1, 5, 5, 3), F32))
    w = Var("w", TensorType((4, 3, 3, 3), F32))  # not a constant: not packed
    node = call("nn.conv", x, w, data_layout="NHWC")
    out = conv_to_packed(node)
    assert out.op_name == "transpose" and out.args[0].attrs["data_layout"] == "NCHW"  # type: ignore[attr-defined]
    assert out.type == node.type
    xs = [_rand(1, 5, 5, 3), _rand(4, 3, 3, 3, seed=2)]
    fn = Function((x, w), out)
    want = evaluate(Function((x, w), node), xs)[0]
    np.testing.assert_allclose(evaluate(fn, xs)[0], want, **TOL)


#: (input NCHW, weight, attrs): the micro-kernel's rows, flattened 1x1s, narrow blocks of 8
#: and 24, grouped, depthwise (stride 1 and 2, narrow and wide), a stem of 3 channels.
CASES = [
    ((1, 8, 20, 20), (32, 8, 1, 1), {}),
    ((1, 96, 14, 14), (192, 96, 1, 1), {}),
    ((1, 16, 14, 14), (32, 16, 3, 3), {"padding": [1, 1, 1, 1]}),
    ((1, 32, 28, 28), (64, 32, 3, 3), {"padding": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 24, 12, 12), (24, 24, 3, 3), {"padding": [1, 1, 1, 1]}),
    ((1, 16, 10, 10), (8, 16, 1, 1), {}),
    ((1, 12, 10, 10), (24, 4, 3, 3), {"padding": [1, 1, 1, 1], "groups": 3}),
    ((1, 32, 30, 30), (32, 1, 3, 3), {"padding": [1, 1, 1, 1], "groups": 32}),
    ((1, 48, 9, 9), (48, 1, 3, 3), {"padding": [1, 1, 1, 1], "strides": [2, 2], "groups": 48}),
    ((1, 16, 8, 8), (16, 1, 5, 5), {"padding": [2, 2, 2, 2], "groups": 16}),
    ((1, 3, 16, 16), (10, 3, 3, 3), {"padding": [1, 1, 1, 1]}),
    ((1, 3, 34, 64), (16, 3, 3, 3), {"padding": [1, 1, 1, 1], "strides": [2, 2]}),  # a stem
    # 1x1s over more than WHOLE_IMAGE_POSITIONS flattened positions: loop-IR tiles with a
    # tail (17x17), kernel tiles of a divisor (16x16 of 64 channels) or with a tail (15x15)
    ((1, 16, 17, 17), (96, 16, 1, 1), {}),
    ((1, 64, 16, 16), (64, 64, 1, 1), {}),
    ((1, 96, 15, 15), (32, 96, 1, 1), {}),
    ((1, 256, 16, 16), (64, 256, 1, 1), {}),
]


@pytest.mark.parametrize(("xshape", "wshape", "attrs"), CASES)
def test_compiled_nhwc_conv_matches_nchw(xshape, wshape, attrs) -> None:  # type: ignore[no-untyped-def]
    x, w = _rand(*xshape), _rand(*wshape, seed=1)
    want = run_artifacts(build(_conv_module(xshape, w, "NCHW", **attrs), "c"), {"x": x})[0]
    nhwc = build(_conv_module(xshape, w, "NHWC", **attrs), "c")
    got = run_artifacts(nhwc, {"x": np.ascontiguousarray(x.transpose(TO_LAST))})[0]
    np.testing.assert_allclose(got.transpose(TO_FIRST), want, **TOL)


def _mobile_block() -> tuple[IRModule, dict[str, np.ndarray]]:
    """conv -> depthwise -> 1x1 -> residual add -> SE scale -> max pool -> resize -> concat."""
    x = Var("x", TensorType((1, 8, 16, 16), F32))

    def conv(v, cin, cout, k=1, groups=1, seed=0):  # type: ignore[no-untyped-def]
        p = k // 2
        w = const(_rand(cout, cin // groups, k, k, seed=seed))
        b = const(_rand(cout, 1, 1, seed=seed + 50))
        y = call("nn.conv", v, w, padding=[p, p, p, p], groups=groups)
        return call("add", y, b)

    a = call("clip", conv(x, 8, 32, 3, seed=1), a_min=0.0, a_max=6.0)
    d = call("clip", conv(a, 32, 32, 3, groups=32, seed=2), a_min=0.0, a_max=6.0)
    r = call("add", conv(d, 32, 32, seed=3), a)
    s = call("hard_sigmoid", conv(call("nn.global_avg_pool", r), 32, 32, seed=4))
    m = call("nn.max_pool", call("multiply", r, s), pool_size=[2, 2], strides=[2, 2])
    up = call("image.resize", m, sizes=[1, 32, 16, 16], method="nearest")
    out = conv(call("concatenate", up, r, axis=1), 64, 16, 3, seed=5)
    return IRModule({"main": Function((x,), out)}), {"x": _rand(1, 8, 16, 16, seed=7)}


def test_convert_layout_compiled_equals_the_pass_off_and_builds_deterministically() -> None:
    mod, inputs = _mobile_block()
    off = build(mod, "c", pass_context=PassContext(opt_level=3, config={"convert_layout": "NCHW"}))
    on_ctx = {"convert_layout": "NHWC"}
    on = build(mod, "c", pass_context=PassContext(opt_level=3, config=on_ctx))
    again = build(mod, "c", pass_context=PassContext(opt_level=3, config=on_ctx))
    assert [a.content for a in on] == [a.content for a in again]
    assert [a.content for a in on] != [a.content for a in off]
    want = run_artifacts(off, inputs)[0]
    # the block's last conv sums 576 products of values up to ~100 into outputs up to ~900;
    # NHWC and NCHW tiles sum in other orders, so the float32 rounding of those sums (a few
    # ulps of the largest partial sums, ~1e-4-1e-3) lands on small outputs too: the
    # absolute tolerance follows the output's scale, not a fixed 1e-5
    atol = 2e-6 * float(np.abs(want).max())
    np.testing.assert_allclose(run_artifacts(on, inputs)[0], want, rtol=1e-5, atol=atol)


def test_onednn_leaves_channels_last_convolutions_to_ember() -> None:
    x = Var("x", TensorType((1, 3, 8, 8), F32))
    w = const(_rand(8, 3, 3, 3))
    assert conv_ok([call("nn.conv", x, w)])
    xl = Var("x", TensorType((1, 8, 8, 3), F32))
    assert not conv_ok([call("nn.conv", xl, w, data_layout="NHWC")])


def test_flat_positions_at_any_image_size() -> None:
    # 1x1 stride-1 unpadded convs flatten their positions at any size (FLAT_ANY_SIZE)
    assert flat_fits((1, 1), (1, 1), (0, 0, 0, 0), (1, 112, 112, 96), 1)
    assert not flat_fits((1, 1), (2, 2), (0, 0, 0, 0), (1, 56, 56, 96), 1)
    assert not flat_fits((3, 3), (1, 1), (1, 1, 1, 1), (1, 56, 56, 96), 1)
    assert not flat_fits((1, 1), (1, 1), (0, 0, 0, 0), (1, 56, 56, 96), 2)


@pytest.mark.parametrize("target", ["c -mcpu=skylake-avx512", "c -mcpu=haswell"])
def test_few_channel_padded_copy_is_one_vectorized_row(target: str) -> None:
    # a 3-channel stem's padded copy: columns and channels fused into one vector loop
    # (a scalar loop of 3 channels per column took 3.6x as long), checked by interpretation
    from ember import tir
    from ember.lowering.lower_group import lower_group
    from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
    from ember.testing.lowering import primitive

    x, wp = Var("x", TensorType((1, 9, 8, 3), F32)), Var("wp", TensorType((1, 3, 3, 3, 16), F32))
    attrs = {"padding": (1, 1, 1, 1), "strides": (2, 2), "data_layout": "NHWC"}
    body = call("relu", call("nn.conv_packed", x, wp, **attrs))
    prim = lower_group(primitive((x, wp), body), "kernel", target)
    assert "for i2_i3_fused in vectorized(30):" in str(prim)
    xs = [_rand(1, 9, 8, 3), _rand(1, 3, 3, 3, 16, seed=1)]
    (want,) = evaluate(Function((x, wp), body), xs)
    got = np.zeros(want.shape, F32)
    tir.interpret(prim, [*xs, got], externs=INTERPRET_EXTERNS)
    np.testing.assert_allclose(got, want, **TOL)
