"""convert_layout's channels-last forms of nn.conv_transpose (kernel == stride: a 1x1 NHWC
conv and an NHWC depth-to-space) and of nn.depth_to_space: where the transposes go, and
equality with the unconverted graph in the reference evaluator and compiled."""

from __future__ import annotations

import numpy as np
import pytest

from ember.driver import build
from ember.errors import IRError
from ember.ir import Call, Expr, Function, IRModule, Var, call, const, post_order
from ember.ir.evaluate import evaluate
from ember.ir.types import TensorType
from ember.testing.runners import run_artifacts
from ember.transform import PassContext, convert_layout

F32 = "float32"
RNG = np.random.default_rng


def _w(*shape: int, seed: int = 0) -> Expr:
    """A seeded constant weight of ``shape``, scaled to keep the outputs near 1."""
    return const((RNG(seed).standard_normal(shape) * 0.3).astype(F32))


def _conv(x: Expr, cin: int, cout: int, seed: int = 0) -> Call:
    """A 3x3 same-padded convolution (laid out channels last by the pass)."""
    return call("nn.conv", x, _w(cout, cin, 3, 3, seed=seed), padding=[1] * 4)


def _calls(mod: IRModule) -> list[Call]:
    return [n for n in post_order(mod.main.body) if isinstance(n, Call)]


def _count(mod: IRModule) -> dict[str, int]:
    ops = [n.op_name for n in _calls(mod)]
    return {op: ops.count(op) for op in set(ops)}


def _check_same(mod: IRModule, out: IRModule, x: Var) -> None:
    """``out`` (converted) evaluates like ``mod`` on one seeded input."""
    data = RNG(7).standard_normal(x.type.shape).astype(F32)  # type: ignore[union-attr]
    np.testing.assert_allclose(evaluate(out, [data])[0], evaluate(mod, [data])[0], atol=1e-5)


def _up(x: Expr, cin: int, cout: int, s: int = 2, seed: int = 0) -> Call:
    """A kernel == stride transposed conv (DBNet's head) with a per-channel bias."""
    y = call("nn.conv_transpose", x, _w(cin, cout, s, s, seed=seed), strides=[s, s])
    return call("add", y, _w(cout, 1, 1, seed=seed + 100))


def _head(c: int = 16) -> tuple[IRModule, Var]:
    """conv -> up (c -> c, relu) -> up (c -> 1, sigmoid): DBNet's detection head, small."""
    x = Var("x", TensorType((1, 3, 6, 5), F32))
    y = call("relu", _up(call("relu", _conv(x, 3, c)), c, c, seed=1))
    return IRModule({"main": Function((x,), call("sigmoid", _up(y, c, 1, seed=2)))}), x


def test_head_runs_channels_last_between_one_transpose_in_and_out() -> None:
    mod, x = _head()
    out = convert_layout(mod)
    _check_same(mod, out, x)
    counts = _count(out)
    assert counts["transpose"] == 2
    assert "nn.conv_transpose" not in counts
    d2s = [n for n in _calls(out) if n.op_name == "nn.depth_to_space"]
    assert [(n.attrs["data_layout"], n.attrs["mode"]) for n in d2s] == [("NHWC", "DCR")] * 2
    convs = [n for n in _calls(out) if n.op_name == "nn.conv"]
    assert all(n.attrs["data_layout"] == "NHWC" for n in convs)
    # the 1-channel head's 4 pointwise outputs padded to 8 (a packed block), sliced back
    assert [n.args[1].type.shape[0] for n in convs[1:]] == [64, 8]  # type: ignore[union-attr]
    (sl,) = [n for n in _calls(out) if n.op_name == "strided_slice"]
    assert tuple(sl.attrs["end"])[-1] == 4


@pytest.mark.parametrize("s", [2, 3])
def test_transposed_conv_of_any_stride_matches(s: int) -> None:
    x = Var("x", TensorType((1, 4, 5, 4), F32))
    mod = IRModule({"main": Function((x,), _up(_conv(x, 4, 8), 8, 3, s=s, seed=3))})
    out = convert_layout(mod)
    _check_same(mod, out, x)
    assert _count(out)["transpose"] == 2


def test_padded_transposed_convs_take_the_phase_form_channels_last() -> None:
    """Padding and kernel != stride: one convolution of the phases, a depth-to-space and a
    crop, all channels last."""
    x = Var("x", TensorType((1, 4, 5, 5), F32))
    w = _w(8, 4, 3, 3, seed=4)
    y = call("nn.conv_transpose", _conv(x, 4, 8), w, strides=[2, 2], padding=[1, 1, 1, 1])
    mod = IRModule({"main": Function((x,), y)})
    out = convert_layout(mod)
    _check_same(mod, out, x)
    counts = _count(out)
    assert "nn.conv_transpose" not in counts and counts["strided_slice"] == 1
    assert counts["transpose"] == 2  # the input's and the result's


def test_other_transposed_convs_read_through_a_transpose() -> None:
    """A grouped (or dilated) transposed conv has no phase form: the border, as before."""
    x = Var("x", TensorType((1, 4, 5, 5), F32))
    w = _w(8, 2, 3, 3, seed=4)
    y = call("nn.conv_transpose", _conv(x, 4, 8), w, strides=[2, 2], groups=2)
    mod = IRModule({"main": Function((x,), y)})
    out = convert_layout(mod)
    _check_same(mod, out, x)
    assert _count(out)["nn.conv_transpose"] == 1


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_takes_the_channels_last_form(mode: str) -> None:
    x = Var("x", TensorType((1, 4, 5, 6), F32))
    y = call("nn.depth_to_space", _conv(x, 4, 16), block_size=2, mode=mode)
    mod = IRModule({"main": Function((x,), call("relu", y))})
    out = convert_layout(mod)
    _check_same(mod, out, x)
    (d2s,) = [n for n in _calls(out) if n.op_name == "nn.depth_to_space"]
    assert d2s.attrs["data_layout"] == "NHWC"
    assert d2s.type.shape == (1, 10, 12, 4)  # type: ignore[union-attr]


def test_depth_to_space_unknown_layout_says_what_is_known() -> None:
    x = Var("x", TensorType((1, 8, 2, 2), F32))
    with pytest.raises(IRError, match="known: NCHW, NHWC"):
        call("nn.depth_to_space", x, block_size=2, data_layout="NCHW8c")


def test_compiled_head_equals_the_pass_off() -> None:
    mod, x = _head(24)
    data = {"x": RNG(1).standard_normal(x.type.shape).astype(F32)}  # type: ignore[union-attr]
    on, off = ({"convert_layout": layout} for layout in ("NHWC", "NCHW"))
    want = run_artifacts(build(mod, "c", pass_context=PassContext(opt_level=3, config=off)), data)
    got = run_artifacts(build(mod, "c", pass_context=PassContext(opt_level=3, config=on)), data)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(want[0], evaluate(mod, [data["x"]])[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_compiled_channels_last_depth_to_space_equals_the_pass_off(mode: str) -> None:
    x = Var("x", TensorType((1, 4, 5, 6), F32))
    y = call("nn.depth_to_space", _conv(x, 4, 32), block_size=2, mode=mode)
    mod = IRModule({"main": Function((x,), call("relu", y))})
    data = {"x": RNG(2).standard_normal((1, 4, 5, 6)).astype(F32)}
    on = build(mod, "c", pass_context=PassContext(opt_level=3, config={"convert_layout": "NHWC"}))
    got = run_artifacts(on, data)[0]
    np.testing.assert_allclose(got, evaluate(mod, [data["x"]])[0], rtol=1e-5, atol=1e-5)
