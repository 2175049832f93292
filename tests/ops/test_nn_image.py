"""image.resize, nn.depth_to_space and nn.space_to_depth lowered to loop IR, run by the
loop-IR interpreter and compared with the graph-IR numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import CompileError
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.ops.nn_image import _Axis

COORD_MODES = [
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_half_pixel_for_nn",
    "tf_crop_and_resize",
]


def check(func: Function, xs: list[np.ndarray], tol: float = 1e-5) -> str:
    """Lower ``func``, interpret it on ``xs``, compare with evaluate; return the loop IR."""
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel")
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    return str(prim)


def group(params: list[Var], body) -> Function:
    return Function(tuple(params), body, Attrs({"Primitive": 1}))


def _resize(shape, sizes, dtype="float32", **attrs) -> tuple[Function, list[np.ndarray]]:
    x = Var("x", TensorType(shape, dtype))
    rng = np.random.default_rng(0)
    if dtype.startswith("float"):
        data = rng.standard_normal(shape).astype(dtype)
    else:
        data = rng.integers(0, 100, shape).astype(dtype)
    return group([x], call("image.resize", x, sizes=sizes, **attrs)), [data]


# The interpreter computes float32 arithmetic in float64, so nearest-neighbour cases here
# use power-of-two ratios (exact in both precisions: ties break alike); arbitrary ratios,
# where float32 rounding decides ties, are checked compiled against onnxruntime.
@pytest.mark.parametrize("mode", COORD_MODES)
@pytest.mark.parametrize(
    "nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
)
@pytest.mark.parametrize(
    ("shape", "sizes", "scales"),
    [
        ((1, 1, 4, 4), (1, 1, 8, 8), (1.0, 1.0, 2.0, 2.0)),
        ((1, 2, 6, 4), (1, 2, 3, 2), (1.0, 1.0, 0.5, 0.5)),
        ((1, 1, 2, 8), (1, 1, 8, 2), ()),
    ],
)
def test_resize_nearest(mode, nearest_mode, shape, sizes, scales):
    roi = (0, 0, 0.25, 0.125, 1, 1, 0.75, 1.25) if mode == "tf_crop_and_resize" else ()
    func, xs = _resize(
        shape,
        sizes,
        scales=scales,
        roi=roi,
        method="nearest",
        coordinate_transformation_mode=mode,
        nearest_mode=nearest_mode,
        extrapolation_value=-3.0,
    )
    check(func, xs)


@pytest.mark.parametrize("mode", COORD_MODES)
@pytest.mark.parametrize(
    ("shape", "sizes", "scales"),
    [
        ((1, 1, 4, 4), (1, 1, 8, 8), (1.0, 1.0, 2.0, 2.0)),
        ((2, 1, 6, 5), (2, 1, 3, 2), ()),
        ((1, 2, 5), (1, 2, 9), ()),
        ((2, 3, 4), (4, 3, 2), ()),
    ],
)
@pytest.mark.parametrize("method", ["linear", "cubic"])
def test_resize_linear_cubic(mode, shape, sizes, scales, method):
    rank = len(shape)
    roi = (0.0,) * (rank - 1) + (0.2,) + (1.0,) * (rank - 1) + (1.1,)
    func, xs = _resize(
        shape,
        sizes,
        scales=scales,
        roi=roi if mode == "tf_crop_and_resize" else (),
        method=method,
        coordinate_transformation_mode=mode,
        extrapolation_value=2.5,
    )
    check(func, xs, tol=1e-4)


def test_resized_axes_read_their_taps_from_tables():
    """A channels-last bilinear resize: each resized axis's source indices and weights are
    tables over its output indices (TAP_TABLES), so the channels loop reads two rows of the
    input at indices it does not compute; an integer nearest factor keeps its division."""
    func, xs = _resize(
        (1, 5, 6, 3), (1, 10, 12, 3), method="linear", coordinate_transformation_mode="half_pixel"
    )
    text = check(func, xs, tol=1e-5)
    for name in ("resize_axis1_index0", "resize_axis1_weight1", "resize_axis2_index1"):
        assert f"{name} = allocate(" in text
    func, xs = _resize((1, 5, 6, 3), (1, 10, 12, 3), method="nearest")
    assert "resize_axis" not in check(func, xs)


@pytest.mark.parametrize(
    ("shape", "sizes", "first"),
    [
        ((1, 3, 4, 4), (1, 3, 32, 32), "resize_along3"),  # equal growth: W (innermost) first
        ((1, 3, 16, 4), (1, 3, 8, 12), "resize_along2"),  # H shrinks: H first
        ((1, 4, 4, 8), (1, 12, 12, 8), "resize_along2"),  # channels last: W, then H
    ],
)
@pytest.mark.parametrize("method", ["linear", "cubic"])
def test_weighted_resize_runs_one_axis_at_a_time(shape, sizes, first, method):
    """SEPARABLE: a weighted resize of two axes is a materialized stage along the axis that
    grows least (then the innermost), then the other axis over its rows, as the reference
    computes it (DeepLabV3's 8x bilinear logits: 6.9 -> 0.5 ms in its int8 form)."""
    func, xs = _resize(shape, sizes, method=method, coordinate_transformation_mode="half_pixel")
    text = check(func, xs, tol=1e-5)
    assert f"{first} = allocate(" in text
    assert text.count("resize_along") >= 2


@pytest.mark.parametrize("mode", ["align_corners", "tf_crop_and_resize", "half_pixel"])
@pytest.mark.parametrize("method", ["linear", "cubic"])
def test_resize_unrounded_scales(mode, method):
    # sizes are floor(in * scale); align_corners / tf_crop_and_resize use in * scale itself
    roi = (0.0, 0.0, 0.1, 0.2, 1.0, 1.0, 0.9, 0.7) if mode == "tf_crop_and_resize" else ()
    func, xs = _resize(
        (1, 1, 4, 5),
        (1, 1, 6, 3),
        scales=(1.0, 1.0, 1.7, 0.7),
        roi=roi,
        method=method,
        coordinate_transformation_mode=mode,
    )
    check(func, xs, tol=1e-4)


@pytest.mark.parametrize("method", ["linear", "cubic"])
@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.parametrize(
    ("shape", "sizes", "scales"),
    [((1, 1, 8, 9), (1, 1, 3, 4), ()), ((1, 2, 6, 4), (1, 2, 3, 8), (1.0, 1.0, 0.5, 2.0))],
)
def test_resize_antialias(method, exclude, shape, sizes, scales):
    func, xs = _resize(
        shape, sizes, scales=scales, method=method, antialias=True, exclude_outside=exclude
    )
    check(func, xs, tol=1e-4)


@pytest.mark.parametrize("exclude", [False, True])
def test_resize_cubic_coeff_and_exclude_outside(exclude):
    func, xs = _resize(
        (1, 1, 4, 5),
        (1, 1, 7, 3),
        method="cubic",
        cubic_coeff_a=-0.5,
        exclude_outside=exclude,
        coordinate_transformation_mode="half_pixel",
    )
    check(func, xs, tol=1e-4)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float64"])
def test_resize_nearest_dtypes(dtype):
    func, xs = _resize(
        (1, 2, 3, 3),
        (1, 2, 6, 5),
        dtype,
        method="nearest",
        coordinate_transformation_mode="asymmetric",
    )
    check(func, xs, tol=1e-12)


def test_resize_nearest_int_with_extrapolation():
    func, xs = _resize(
        (1, 1, 4, 4),
        (1, 1, 5, 5),
        "int32",
        method="nearest",
        coordinate_transformation_mode="tf_crop_and_resize",
        roi=(0, 0, -0.5, 0.25, 1, 1, 1.5, 0.75),
        extrapolation_value=7.0,
    )
    check(func, xs)


def test_resize_linear_int_refused():
    func, _ = _resize((1, 1, 2, 2), (1, 1, 2, 2), "int32", method="nearest")
    lower_group(func, "k")  # identity nearest on ints is fine
    x = Var("x", TensorType((1, 1, 2, 2), "float16"))
    bad = group([x], call("image.resize", x, sizes=(1, 1, 4, 4), method="linear"))
    with pytest.raises(CompileError, match="image.resize: float16"):
        lower_group(bad, "k")


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize(
    ("shape", "bs"), [((1, 8, 2, 3), 2), ((2, 18, 2, 2), 3), ((1, 4, 1, 1), 1)]
)
def test_depth_to_space(mode, shape, bs):
    x = Var("x", TensorType(shape, "float32"))
    data = np.random.default_rng(0).standard_normal(shape).astype("float32")
    check(group([x], call("nn.depth_to_space", x, block_size=bs, mode=mode)), [data])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize(("shape", "bs"), [((1, 2, 4, 6), 2), ((2, 3, 6, 3), 3)])
def test_space_to_depth(mode, shape, bs):
    x = Var("x", TensorType(shape, "int64"))
    data = np.arange(np.prod(shape)).reshape(shape).astype("int64")
    check(group([x], call("nn.space_to_depth", x, block_size=bs, mode=mode)), [data])


def test_depth_to_space_fused_with_relu():
    x = Var("x", TensorType((1, 8, 4, 4), "float32"))
    data = np.random.default_rng(0).standard_normal((1, 8, 4, 4)).astype("float32")
    body = call("relu", call("nn.depth_to_space", x, block_size=2))
    text = check(group([x], body), [data])
    assert "allocate" not in text  # the injective op is inlined into the relu


def test_resize_antialias_crop_and_resize_extrapolates():
    func, xs = _resize(
        (1, 1, 9, 6),
        (1, 1, 4, 5),
        method="linear",
        antialias=True,
        coordinate_transformation_mode="tf_crop_and_resize",
        roi=(0.0, 0.0, -0.2, 0.1, 1.0, 1.0, 1.1, 0.8),
        extrapolation_value=4.0,
    )
    check(func, xs, tol=1e-4)


@pytest.mark.parametrize(
    ("mode", "nearest_mode", "n_in", "n_out", "factor"),
    [
        ("half_pixel", "round_prefer_floor", 10, 80, 8),  # ONNX's defaults, FPN upsampling
        ("half_pixel", "round_prefer_ceil", 5, 15, 3),
        ("asymmetric", "floor", 7, 28, 4),
        ("tf_half_pixel_for_nn", "floor", 4, 8, 2),
        ("asymmetric", "ceil", 4, 8, 0),  # ceil(o / 2) is not o // 2
        ("align_corners", "floor", 4, 8, 0),  # mode without the shortcut
        ("half_pixel", "round_prefer_floor", 8, 4, 0),  # downsampling
    ],
)
def test_resize_nearest_integer_factor(mode, nearest_mode, n_in, n_out, factor):
    """Nearest upsampling by an integer factor indexes ``o // k`` (no float math per element)
    exactly when the float32 formula gives those indices, and still matches."""
    attrs = {
        "scales": (),
        "method": "nearest",
        "coordinate_transformation_mode": mode,
        "nearest_mode": nearest_mode,
    }
    assert _Axis(2, n_in, n_out, Attrs(attrs)).integer_factor() == factor
    func, xs = _resize((1, 2, n_in, n_in), (1, 2, n_out, n_out), roi=(), **attrs)
    text = check(func, xs)
    assert ("float32(" not in text and "ceil" not in text and "floor" not in text) == bool(factor)


@pytest.mark.cc
@pytest.mark.parametrize(
    ("mode", "nearest_mode", "size", "scale"),
    [
        ("half_pixel", "round_prefer_floor", 10, 8.0),
        ("half_pixel", "round_prefer_ceil", 7, 3.0),
        ("asymmetric", "floor", 6, 5.0),
        ("pytorch_half_pixel", "floor", 5, 6.0),
    ],
)
def test_resize_nearest_integer_factor_matches_onnxruntime(mode, nearest_mode, size, scale):
    from ember.testing import assert_matches_onnxruntime
    from ember.testing.onnx_models import build_model, node

    scales = np.array([1, 1, scale, scale], np.float32)
    resize = node(
        "Resize", ["x", "", "s"], "y", mode="nearest", coordinate_transformation_mode=mode,
        nearest_mode=nearest_mode,
    )  # fmt: skip
    model = build_model([resize], {"x": ("float32", (1, 3, size, size))}, ["y"], {"s": scales})
    x = np.random.default_rng(1).standard_normal((1, 3, size, size)).astype(np.float32)
    assert_matches_onnxruntime(model, {"x": x}, rtol=0, atol=0, target="c")
