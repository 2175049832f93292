"""Winograd F(m x m, 3 x 3) convolutions (ember.ops.nn_conv_winograd): the transforms, the
legalizer's choice and its switch (PassContext config ``nn.conv_winograd``), and compiled
results against a float64 numpy convolution on real 3x3 layers (ResNet-50's, resnet8's,
YOLO's) with their fused bias + ReLU, a residual add, and odd image sizes (edge tiles).

Tolerance: Winograd is not bitwise equal to the direct convolution. Measured against a
float64 convolution (He-scaled weights, ReLU'd inputs, max |error| / max |y|): direct
float32 0.4-2.1e-6, F(2,3) 0.2-0.8e-6, F(4,3) 2.8e-6 (16 channels) to 1.3e-5 (7x7 512->512):
F(4,3)'s transforms scale values by up to 5 and 8 before the sums (36 of them per output).
RTOL (of max |y|) is 8x F(4,3)'s worst.
"""

from __future__ import annotations

import numpy as np
import pytest

from ember.codegen.c.f32_winograd import TRANSFORMS
from ember.driver import build
from ember.ir import Function, IRModule, TensorType, Var, call, const
from ember.ir.ops.nn_conv_winograd_form import (
    KINDS,
    transform_weight,
    winograd_matrices,
    winograd_reference,
)
from ember.lowering.legalize import legalize
from ember.ops.nn_conv_winograd import WINOGRAD_CONFIG, winograd_scope
from ember.target import Target
from ember.testing.runners import run_artifacts
from ember.transform import PassContext


@pytest.fixture(autouse=True)
def _all_taps(monkeypatch: pytest.MonkeyPatch) -> None:
    """One-row and one-column images exercise the kernels' edges with every tap: keep the
    taps that read only padding (ember.ops.nn_conv_dead_taps would drop them)."""
    from ember.ops import nn_conv_dead_taps

    monkeypatch.setattr(nn_conv_dead_taps, "DEAD_TAPS", False)


#: the compiled comparisons' tolerance, a fraction of max |y| (see the module docstring)
RTOL = 1e-4

AVX512 = "x86-avx512" in Target.create("c").keys
needs_avx512 = pytest.mark.skipif(not AVX512, reason="Winograd convolutions need AVX-512")


def _direct64(x: np.ndarray, w: np.ndarray, pads: tuple[int, int, int, int]) -> np.ndarray:
    """The NHWC convolution (stride 1, any kernel size) in float64 (``pads``: top, left,
    bottom, right)."""
    top, left, bottom, right = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)))
    kh, kw = w.shape[2:]
    oh, ow = xp.shape[1] - kh + 1, xp.shape[2] - kw + 1
    y = np.zeros((x.shape[0], oh, ow, w.shape[0]))
    for i in range(kh):
        for j in range(kw):
            tap = w[:, :, i, j].astype(np.float64)
            y += np.einsum("nhwc,oc->nhwo", xp[:, i : i + oh, j : j + ow], tap)
    return y


def _data(h: int, w: int, c: int, o: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.standard_normal((1, h, w, c)), 0).astype(np.float32)
    wt = (rng.standard_normal((o, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    return x, wt


@pytest.mark.parametrize(("m", "r"), KINDS)
def test_the_kernel_tables_are_the_transform_matrices(m: int, r: int) -> None:
    bt, g, at = winograd_matrices(m, r)
    np.testing.assert_array_equal(np.array(TRANSFORMS[(m, r)][0], float), bt)
    np.testing.assert_array_equal(np.array(TRANSFORMS[(m, r)][1], float), at)
    # Y = A^T [(G g) * (B^T d)] is the correlation of d by g, exactly (float64)
    rng = np.random.default_rng(m + r)
    d, taps = rng.standard_normal(m + r - 1), rng.standard_normal(r)
    want = np.correlate(d, taps, "valid")
    np.testing.assert_allclose(at @ ((g @ taps) * (bt @ d)), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize(("h", "w", "pads"), [(9, 11, (1, 1, 1, 1)), (7, 6, (0, 1, 2, 0))])
def test_reference_is_the_convolution(m: int, h: int, w: int, pads: tuple[int, ...]) -> None:
    x, wt = _data(h, w, 32, 48)
    want = _direct64(x, wt, pads)  # type: ignore[arg-type]
    got = winograd_reference(x, transform_weight(wt, m), m, pads, want.shape[1:3])  # type: ignore[arg-type]
    np.testing.assert_allclose(got, want, atol=RTOL * np.abs(want).max())


def _conv_module(
    h: int, w: int, wt: np.ndarray, *, relu: bool = True, residual: bool = False, **attrs: object
) -> IRModule:
    c, o = wt.shape[1], wt.shape[0]
    x = Var("x", TensorType((1, h, w, c), "float32"))
    bias = np.random.default_rng(7).standard_normal((1, 1, o)).astype(np.float32) * 0.1
    attrs = {"padding": [1, 1, 1, 1], **attrs}
    y = call("add", call("nn.conv", x, const(wt), data_layout="NHWC", **attrs), const(bias))
    params = [x]
    if residual:
        r = Var("r", TensorType(tuple(int(d) for d in y.type.shape) if y.type else (), "float32"))
        params.append(r)
        y = call("add", y, r)
    if relu:
        y = call("relu", y)
    return IRModule({"main": Function(tuple(params), y)})


def _ops(mod: IRModule, config: dict[str, object], target: str = "c") -> list[str]:
    from ember.ir.expr import Call, post_order

    with winograd_scope(Target.create(target), config):
        body = legalize(mod).main.body
    return [n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")]


@needs_avx512
def test_the_legalizer_picks_winograd_where_selected() -> None:
    _, wt = _data(14, 14, 64, 64)
    mod = _conv_module(14, 14, wt)
    assert "nn.conv_winograd" in _ops(mod, {})  # default: measured faster at this size
    assert "nn.conv_winograd" not in _ops(mod, {WINOGRAD_CONFIG: False})
    assert "nn.conv_winograd" in _ops(mod, {}, "llvm")  # the runtime's AVX-512 copy
    # an llvm target without AVX-512: the runtime has no AVX2 copy of the kernel
    assert "nn.conv_winograd" not in _ops(mod, {WINOGRAD_CONFIG: True}, "llvm -mcpu=haswell")
    strided = _conv_module(14, 14, wt, strides=[2, 2])  # F(4,2) of its phases: see *_stride2.py
    assert "nn.conv_winograd" in _ops(strided, {WINOGRAD_CONFIG: True})
    strided3 = _conv_module(15, 15, wt, strides=[3, 3])
    assert "nn.conv_winograd" not in _ops(strided3, {WINOGRAD_CONFIG: True})
    _, narrow = _data(14, 14, 8, 64)  # input channels not a multiple of 16
    assert "nn.conv_winograd" not in _ops(_conv_module(14, 14, narrow), {WINOGRAD_CONFIG: True})
    # output channels padded to a multiple of 16 where at most a quarter is padding
    _, dbnet = _data(80, 80, 96, 24)
    assert "nn.conv_winograd" in _ops(_conv_module(80, 80, dbnet), {})
    _, eight = _data(14, 14, 64, 8)
    assert "nn.conv_winograd" not in _ops(_conv_module(14, 14, eight), {WINOGRAD_CONFIG: True})
    _, big = _data(7, 7, 512, 512)
    assert "nn.conv_winograd" in _ops(_conv_module(7, 7, big), {WINOGRAD_CONFIG: 4})
    assert "nn.conv_winograd" not in _ops(_conv_module(7, 7, big), {WINOGRAD_CONFIG: 0})
    # outside a build (no target): never
    from ember.ir.expr import Call, post_order

    names = [n.op.name for n in post_order(legalize(mod).main.body) if isinstance(n, Call)]
    assert "nn.conv_winograd" not in names


def _calls_winograd(art: object) -> bool:
    contents = [a.content for a in art.artifacts]  # type: ignore[attr-defined]
    return any(b"ember_f32_winograd(" in c for c in contents)


def _check(
    h: int, w: int, c: int, o: int, m: object, *, residual: bool = False, threads: int = 1
) -> None:
    from ember.runtime import num_threads

    x, wt = _data(h, w, c, o, seed=h * w + c)
    mod = _conv_module(h, w, wt, residual=residual)
    art = build(mod, "c", pass_context=PassContext(config={WINOGRAD_CONFIG: m}))
    assert _calls_winograd(art)
    bias = np.random.default_rng(7).standard_normal((1, 1, o)).astype(np.float32) * 0.1
    want = _direct64(x, wt, (1, 1, 1, 1)) + bias
    inputs = {"x": x}
    if residual:
        r = np.random.default_rng(8).standard_normal(want.shape).astype(np.float32)
        inputs["r"] = r
        want = want + r
    want = np.maximum(want, 0)
    with num_threads(threads):
        got = run_artifacts(art, inputs)[0]
    np.testing.assert_allclose(got, want, atol=RTOL * np.abs(want).max(), rtol=0)


@needs_avx512
@pytest.mark.parametrize(
    ("h", "w", "c", "o"),
    [
        (56, 56, 64, 64),  # ResNet-50
        (28, 28, 128, 128),
        (14, 14, 256, 256),
        (7, 7, 512, 512),
        (32, 32, 16, 16),  # resnet8
        (16, 16, 32, 32),
        (8, 8, 64, 64),
        (10, 10, 256, 80),  # YOLO: 80 channels, blocks of 16
        (4, 25, 128, 256),  # CRNN
        (80, 80, 96, 24),  # DBNet: 24 channels padded to 32
        (9, 11, 32, 40),  # 40 padded to 48, edge tiles
    ],
)
def test_real_layers_with_bias_relu_match_float64(h: int, w: int, c: int, o: int) -> None:
    _check(h, w, c, o, 4)


@needs_avx512
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize(("h", "w"), [(9, 11), (13, 7), (1, 5), (6, 6)])
def test_odd_sizes_edge_tiles(m: int, h: int, w: int) -> None:
    _check(h, w, 32, 48, m)


@needs_avx512
def test_residual_epilogue_two_threads() -> None:
    _check(20, 20, 64, 96, 4, residual=True, threads=2)


@needs_avx512
@pytest.mark.parametrize(
    ("h", "w", "c", "o", "m"),
    [
        (32, 32, 16, 16, 4),  # resnet8: tiles through all phases per task (small weight)
        (9, 11, 32, 48, 4),  # edge tiles and a panel's padding tiles in the last task
        (14, 14, 256, 256, 2),  # ResNet-50's F(2,3) layer: the weight outweighs V and M
        (56, 56, 64, 64, 4),  # ResNet-50's 56x56: tile tasks of several panels
    ],
)
def test_two_threads_give_one_threads_bits(h: int, w: int, c: int, o: int, m: int) -> None:
    """At 2 threads ember_f32_winograd runs each task's tiles through all three phases
    (or the three phases split by tiles and points where the weight is the larger): the
    same calls on the same panels, so the bytes of one thread."""
    from ember.runtime import num_threads

    x, wt = _data(h, w, c, o, seed=h + w + c)
    art = build(_conv_module(h, w, wt), "c", pass_context=PassContext(config={WINOGRAD_CONFIG: m}))
    assert _calls_winograd(art)
    with num_threads(1):
        one = run_artifacts(art, {"x": x})[0]
    with num_threads(2):
        two = [run_artifacts(art, {"x": x})[0] for _ in range(3)]
    for got in two:
        np.testing.assert_array_equal(got, one)


@needs_avx512
def test_builds_are_deterministic() -> None:
    _, wt = _data(16, 16, 32, 32)
    mod = _conv_module(16, 16, wt)
    cfg = PassContext(config={WINOGRAD_CONFIG: 4})
    a = build(mod, "c", pass_context=cfg)
    b = build(mod, "c", pass_context=cfg)
    assert a.content_hash() == b.content_hash()


def test_default_choice_follows_the_measurements() -> None:
    from ember.ops.nn_conv_winograd import winograd_pays

    assert winograd_pays(64, 64, 56, 56) == 4  # ResNet-50, measured 0.47-0.55x
    assert winograd_pays(128, 256, 4, 25) == 4  # CRNN: 7 tiles, 4.7 MB weight
    # 16 tiles or fewer and a F(4,3) weight over 8 MiB: F(2,3) (ResNet-50 7x7 512->512 0.77x
    # with cold weights, F(4,3) 0.96x)
    assert winograd_pays(256, 256, 14, 14) == 2
    assert winograd_pays(512, 512, 7, 7) == 2
    assert winograd_pays(64, 64, 8, 8) == 4  # resnet8's: 4 tiles but a 0.6 MB weight
    assert winograd_pays(64, 64, 224, 224) == 0  # 55 MiB of scratch: not measured
    assert winograd_pays(64, 64, 56, 56, batch=2) == 0  # only batch 1 measured


@needs_avx512
def check_forced_batch(shape: tuple[int, ...], out_channels: int, stride: int = 1) -> None:
    """A batch of seeded NHWC data through a forced Winograd conv (padding 1) against
    float64: the kernel's image stride."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    wt = (rng.standard_normal((out_channels, shape[3], 3, 3)) * 0.1).astype(np.float32)
    xv = Var("x", TensorType(x.shape, "float32"))
    y = call(
        "nn.conv", xv, const(wt), data_layout="NHWC", padding=[1, 1, 1, 1], strides=[stride] * 2
    )
    mod = IRModule({"main": Function((xv,), y)})
    art = build(mod, "c", pass_context=PassContext(config={WINOGRAD_CONFIG: True}))
    assert _calls_winograd(art)
    want = _direct64(x, wt, (1, 1, 1, 1))[:, ::stride, ::stride]
    got = run_artifacts(art, {"x": x})[0]
    np.testing.assert_allclose(got, want, atol=RTOL * np.abs(want).max(), rtol=0)


def test_batch_of_two_when_forced() -> None:
    check_forced_batch((2, 9, 10, 32), 32)


@needs_avx512
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (0, 1, 2, 0), (2, 2, 2, 2)])
def test_other_paddings(m: int, pads: tuple[int, int, int, int]) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 11, 9, 16)).astype(np.float32)
    wt = (rng.standard_normal((32, 16, 3, 3)) * 0.2).astype(np.float32)
    xv = Var("x", TensorType(x.shape, "float32"))
    onnx_pads = [pads[0], pads[1], pads[2], pads[3]]  # top, left, bottom, right
    y = call("nn.conv", xv, const(wt), data_layout="NHWC", padding=onnx_pads)
    art = build(
        IRModule({"main": Function((xv,), y)}),
        "c",
        pass_context=PassContext(config={WINOGRAD_CONFIG: m}),
    )
    assert _calls_winograd(art)
    want = _direct64(x, wt, pads)
    got = run_artifacts(art, {"x": x})[0]
    np.testing.assert_allclose(got, want, atol=RTOL * np.abs(want).max(), rtol=0)


@pytest.mark.parametrize("o", [24, 40])
def test_output_channels_padded_with_zero_filters(o: int) -> None:
    from ember.ir.ops.nn_conv_winograd_form import padded_channels
    from ember.ops.nn_conv_winograd import padding_pays

    x, wt = _data(9, 10, 32, o)
    u = transform_weight(wt, 4)
    assert u.shape[1] * u.shape[3] == padded_channels(o) == -(-o // 16) * 16
    got = winograd_reference(x, u, 4, (1, 1, 1, 1), (9, 10))
    want = _direct64(x, wt, (1, 1, 1, 1))
    np.testing.assert_allclose(got[..., :o], want, atol=RTOL * np.abs(want).max())
    np.testing.assert_array_equal(got[..., o:], 0)  # the zero filters
    assert padding_pays(o) and padding_pays(32) and not padding_pays(8)
