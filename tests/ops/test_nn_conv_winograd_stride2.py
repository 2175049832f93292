"""Stride-2 3x3 convolutions as Winograd F(4 x 4, 2 x 2) over the input's four phases
(ember.ir.ops.nn_conv_winograd_form.stride2_weight, ember_f32_winograd with r = 2)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.driver import build
from ember.errors import IRError
from ember.ir import TensorType, Var, call, const
from ember.ir.ops.nn_conv_winograd_form import (
    phase_padding,
    space_to_depth,
    stride2_weight,
    transform_weight,
    winograd_reference,
)
from ember.ops.nn_conv_winograd import WINOGRAD_CONFIG, stride2_pays
from ember.testing.runners import run_artifacts
from ember.transform import PassContext

from .test_nn_conv_winograd import (
    RTOL,
    _calls_winograd,
    _conv_module,
    _data,
    _direct64,
    _ops,
    check_forced_batch,
    needs_avx512,
)

#: (top, left, bottom, right) paddings of a stride-2 3x3 convolution
PADS = [(1, 1, 1, 1), (0, 0, 1, 1), (1, 0, 0, 1), (0, 1, 1, 0), (2, 2, 2, 2), (0, 0, 0, 0)]


def _direct_s2(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    """The stride-2 convolution in float64: every other output of the stride-1 one."""
    return _direct64(x, w, pads)[:, ::2, ::2]


@pytest.mark.parametrize("pads", PADS)
@pytest.mark.parametrize(("h", "w"), [(16, 16), (10, 6), (8, 12)])
def test_the_phases_hold_the_stride2_convolution(
    pads: tuple[int, int, int, int], h: int, w: int
) -> None:
    rng = np.random.default_rng(h + w)
    x = rng.standard_normal((1, h, w, 8))
    wt = rng.standard_normal((12, 8, 3, 3))
    want = _direct_s2(x, wt, pads)
    pads2 = phase_padding(pads, (h, w), want.shape[1:3])
    assert min(pads2) >= 0
    got = _direct64(space_to_depth(x), stride2_weight(wt, pads[0], pads[1]), pads2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_space_to_depth_orders_the_phases() -> None:
    x = np.arange(2 * 4 * 6 * 3).reshape(2, 4, 6, 3)
    q = space_to_depth(x)
    assert q.shape == (2, 2, 3, 12)
    for dr in range(2):
        for dc in range(2):
            phase = q[..., (2 * dr + dc) * 3 : (2 * dr + dc + 1) * 3]
            np.testing.assert_array_equal(phase, x[:, dr::2, dc::2])


def test_the_reference_is_the_convolution() -> None:
    x, wt = _data(16, 16, 32, 40)
    want = _direct_s2(x, wt, (1, 1, 1, 1))
    u = transform_weight(stride2_weight(wt, 1, 1), 4)
    assert u.shape[0] == 25  # (4 + 2 - 1)^2 points
    pads2 = phase_padding((1, 1, 1, 1), (16, 16), (8, 8))
    got = winograd_reference(space_to_depth(x), u, 4, pads2, (8, 8), r=2)
    np.testing.assert_allclose(got[..., :40], want, atol=RTOL * np.abs(want).max(), rtol=0)


def _check(
    h: int,
    w: int,
    c: int,
    o: int,
    pads: tuple[int, int, int, int] = (1, 1, 1, 1),
    *,
    residual: bool = False,
    config: object = 4,
) -> np.ndarray:
    x, wt = _data(h, w, c, o, seed=h * w + c)
    mod = _conv_module(h, w, wt, residual=residual, strides=[2, 2], padding=list(pads))
    art = build(mod, "c", pass_context=PassContext(config={WINOGRAD_CONFIG: config}))
    assert _calls_winograd(art)
    bias = np.random.default_rng(7).standard_normal((1, 1, o)).astype(np.float32) * 0.1
    want = _direct_s2(x, wt, pads) + bias
    inputs = {"x": x}
    if residual:
        inputs["r"] = np.random.default_rng(8).standard_normal(want.shape).astype(np.float32)
        want = want + inputs["r"]
    want = np.maximum(want, 0)
    got = run_artifacts(art, inputs)[0]
    np.testing.assert_allclose(got, want, atol=RTOL * np.abs(want).max(), rtol=0)
    return art


@needs_avx512
@pytest.mark.parametrize(
    ("h", "w", "c", "o"),
    [
        (32, 32, 16, 32),  # resnet8's stride-2 layers
        (16, 16, 32, 64),
        (56, 56, 128, 128),  # ResNet-50's first
        (40, 40, 64, 128),  # YOLO-like
        (12, 10, 16, 40),  # 40 channels padded to 48, edge tiles
    ],
)
def test_real_layers_with_bias_relu_match_float64(h: int, w: int, c: int, o: int) -> None:
    _check(h, w, c, o, config="auto" if h >= 16 else 4)


@needs_avx512
@pytest.mark.parametrize("pads", PADS)
def test_paddings_and_a_residual(pads: tuple[int, int, int, int]) -> None:
    _check(10, 14, 16, 32, pads, residual=True)


@needs_avx512
@pytest.mark.parametrize(
    ("h", "w", "c", "o"), [(32, 32, 16, 32), (16, 16, 32, 64), (12, 10, 16, 40)]
)
def test_two_threads_give_one_threads_bits(h: int, w: int, c: int, o: int) -> None:
    from ember.runtime import num_threads

    x, wt = _data(h, w, c, o, seed=3)
    mod = _conv_module(h, w, wt, strides=[2, 2])
    art = build(mod, "c", pass_context=PassContext(config={WINOGRAD_CONFIG: 4}))
    assert _calls_winograd(art)
    with num_threads(1):
        one = run_artifacts(art, {"x": x})[0]
    with num_threads(2):
        for _ in range(3):
            np.testing.assert_array_equal(run_artifacts(art, {"x": x})[0], one)


@needs_avx512
def test_the_legalizer_picks_the_phases_where_they_pay() -> None:
    def picks(h: int, w: int, c: int, o: int, config: object = None, **attrs: object) -> bool:
        _, wt = _data(h, w, c, o)
        mod = _conv_module(h, w, wt, strides=[2, 2], **attrs)
        cfg = {} if config is None else {WINOGRAD_CONFIG: config}
        return "nn.conv_winograd" in _ops(mod, cfg)

    assert picks(32, 32, 16, 32)  # resnet8: measured 0.79x the direct kernel's time
    assert picks(56, 56, 128, 128)  # 6.5 MB of transformed weight: 0.74x
    assert not picks(28, 28, 256, 256)  # 26 MB: 1.06x
    assert picks(28, 28, 256, 256, True)  # forced: every eligible layer
    assert not picks(32, 32, 16, 32, 2)  # F(2,3) asked for: no F(2,2) kernel
    assert not picks(32, 32, 16, 32, False)
    assert not picks(15, 16, 16, 32, True)  # odd height: no phases
    assert not picks(32, 32, 8, 32, True)  # phases of 8 channels straddle vector blocks
    assert not picks(32, 32, 16, 32, True, dilation=[2, 2])
    assert stride2_pays(16, 32, 16, 16, batch=2) == 0  # only batch 1 measured


def test_the_op_checks_its_stride_and_shapes() -> None:
    x = Var("x", TensorType((1, 8, 8, 16), "float32"))
    u = const(np.zeros((25, 1, 64, 16), np.float32))
    y = call("nn.conv_winograd", x, u, padding=(1, 1, 1, 1), tile=4, strides=2)
    assert tuple(y.type.shape) == (1, 4, 4, 16)  # type: ignore[union-attr]
    with pytest.raises(IRError, match="none of"):
        call("nn.conv_winograd", x, u, padding=(1, 1, 1, 1), tile=2, strides=2)
    odd = Var("x", TensorType((1, 7, 8, 16), "float32"))
    with pytest.raises(IRError, match="even height"):
        call("nn.conv_winograd", odd, u, padding=(1, 1, 1, 1), tile=4, strides=2)
    one = const(np.zeros((25, 1, 16, 16), np.float32))  # 16 channels: stride 1's count
    with pytest.raises(IRError, match="4 x the channels"):
        call("nn.conv_winograd", x, one, padding=(1, 1, 1, 1), tile=4, strides=2)
    # the op's reference: the convolution of x, not of its phases
    data, wt = _data(8, 8, 16, 16)
    real = transform_weight(stride2_weight(wt, 1, 1), 4)
    got = y.op.reference([data, real], y.attrs)  # type: ignore[union-attr]
    want = _direct_s2(data, wt, (1, 1, 1, 1))
    np.testing.assert_allclose(got, want, atol=RTOL * np.abs(want).max(), rtol=0)


@needs_avx512
def test_a_batch_of_three_when_forced() -> None:
    """The phases of each image start at its own offset in x (the kernel's image stride)."""
    check_forced_batch((3, 10, 12, 32), 48, stride=2)
