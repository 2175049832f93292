"""image.grid_sample, vision.roi_align, nn.deform_conv and nn.col2im lowered to loop IR,
run by the loop-IR interpreter and compared with the graph-IR numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.testing.lowering import check_lowered, primitive

RNG = np.random.default_rng(11)


def _f32(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sample_2d(mode: str, padding_mode: str, align_corners: bool) -> None:
    x = Var("x", TensorType((2, 3, 5, 4), "float32"))
    g = Var("g", TensorType((2, 3, 7, 2), "float32"))
    body = call(
        "image.grid_sample", x, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners
    )
    check_lowered(primitive([x, g], body), [_f32(2, 3, 5, 4), _f32(2, 3, 7, 2, low=-1.6, high=1.6)])


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_grid_sample_volumetric(mode: str) -> None:
    x = Var("x", TensorType((1, 2, 3, 4, 5), "float32"))
    g = Var("g", TensorType((1, 2, 3, 2, 3), "float32"))
    body = call("image.grid_sample", x, g, mode=mode, padding_mode="reflection")
    check_lowered(
        primitive([x, g], body), [_f32(1, 2, 3, 4, 5), _f32(1, 2, 3, 2, 3, low=-2, high=2)]
    )


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("half_pixel", [False, True])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align(mode: str, half_pixel: bool, ratio: int) -> None:
    x = Var("x", TensorType((2, 3, 8, 9), "float32"))
    r = Var("r", TensorType((4, 4), "float32"))
    b = Var("b", TensorType((4,), "int64"))
    rois = np.array([[0, 0, 8, 7], [1.5, 2, 4, 8.5], [-3, -2, 3, 2], [7, 6, 15, 12]], np.float32)
    body = call(
        "vision.roi_align", x, r, b, output_height=3, output_width=2, sampling_ratio=ratio,
        spatial_scale=0.8, mode=mode, half_pixel=half_pixel,
    )  # fmt: skip
    check_lowered(primitive([x, r, b], body), [_f32(2, 3, 8, 9), rois, np.array([0, 1, 1, 0])])


def test_deform_conv_grouped() -> None:
    shapes = {"x": (2, 4, 6, 5), "w": (4, 2, 2, 3), "off": (2, 2 * 2 * 3 * 2, 3, 4)}
    shapes |= {"b": (4,), "m": (2, 2 * 2 * 3, 3, 4)}
    params = [Var(k, TensorType(v, "float32")) for k, v in shapes.items()]
    body = call(
        "nn.deform_conv", *params, strides=[2, 1], pads=[0, 1, 1, 0], dilations=[1, 1],
        group=2, offset_group=2,
    )  # fmt: skip
    data = [_f32(*s, low=-2, high=2) for s in shapes.values()]
    check_lowered(primitive(params, body), data, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("image", "block", "dil", "pads", "strides"),
    [
        ((5, 6), (2, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
        ((7, 5), (3, 2), (2, 1), (1, 0, 2, 1), (2, 2)),
        ((3, 4, 5), (2, 2, 2), (1, 2, 2), (0, 0, 0, 0, 0, 0), (1, 1, 1)),
    ],
)
def test_col2im(image: tuple, block: tuple, dil: tuple, pads: tuple, strides: tuple) -> None:
    nd = len(image)
    blocks = [
        (image[i] + pads[i] + pads[i + nd] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1
        for i in range(nd)
    ]
    shape = (2, 3 * int(np.prod(block)), int(np.prod(blocks)))
    x = Var("x", TensorType(shape, "float32"))
    body = call(
        "nn.col2im", x, image_shape=image, block_shape=block, dilations=dil, pads=pads,
        strides=strides,
    )  # fmt: skip
    check_lowered(primitive([x], body), [_f32(*shape)])
