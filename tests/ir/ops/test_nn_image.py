"""nn_image ops (image.resize, nn.depth_to_space, nn.space_to_depth): type rules, error
messages and numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import call

from .ir_check import run as _run
from .ir_check import var as _var


def test_image_ops() -> None:
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    xv = _var(x.shape)
    nearest = call("image.resize", xv, sizes=(1, 1, 8, 8), scales=(1, 1, 2, 2))
    (y,) = _run(nearest, [xv], [x])
    np.testing.assert_array_equal(y[0, 0, ::2, ::2], x[0, 0])
    lin = call(
        "image.resize",
        xv,
        sizes=(1, 1, 7, 7),
        method="linear",
        coordinate_transformation_mode="align_corners",
    )
    (y,) = _run(lin, [xv], [x])
    np.testing.assert_allclose(y[0, 0, ::2, ::2], x[0, 0])
    np.testing.assert_allclose(y[0, 0, 1, 1], x[0, 0, :2, :2].mean())
    with pytest.raises(IRError, match="unknown coordinate_transformation_mode 'bogus'"):
        call("image.resize", xv, sizes=(1, 1, 8, 8), coordinate_transformation_mode="bogus")
    d = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    dv = _var(d.shape)
    d2s = call("nn.depth_to_space", dv, block_size=2)
    s2d = call("nn.space_to_depth", d2s, block_size=2)
    assert d2s.type.shape == (1, 1, 4, 4)  # type: ignore[attr-defined]
    (back,) = _run(s2d, [dv], [d])
    np.testing.assert_array_equal(back, d)
    with pytest.raises(IRError, match="not divisible by block_size"):
        call("nn.space_to_depth", xv, block_size=3)


def test_resize_type_errors_and_integer_nearest() -> None:
    xv = _var((1, 1, 4, 4), "int32")
    with pytest.raises(IRError, match="linear resize needs a floating point tensor"):
        call("image.resize", xv, sizes=(1, 1, 8, 8), method="linear")
    with pytest.raises(IRError, match="sizes \\[8, 8\\] must give one positive size per axis"):
        call("image.resize", xv, sizes=(8, 8))
    with pytest.raises(IRError, match="unknown nearest_mode 'up'"):
        call("image.resize", xv, sizes=(1, 1, 8, 8), nearest_mode="up")
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    down = call("image.resize", xv, sizes=(1, 1, 2, 2), coordinate_transformation_mode="asymmetric")
    (y,) = _run(down, [xv], [x])
    np.testing.assert_array_equal(y[0, 0], [[0, 2], [8, 10]])


def test_antialias_resize_smooths_downsampling() -> None:
    x = np.tile(np.array([0.0, 1.0], np.float32), 8).reshape(1, 1, 1, 16)
    xv = _var(x.shape)
    mode = {"method": "linear", "coordinate_transformation_mode": "asymmetric"}
    plain = call("image.resize", xv, sizes=(1, 1, 1, 4), **mode)
    smooth = call("image.resize", xv, sizes=(1, 1, 1, 4), antialias=True, **mode)
    (p,) = _run(plain, [xv], [x])
    (s,) = _run(smooth, [xv], [x])
    np.testing.assert_array_equal(p, 0.0)  # point samples all hit the 0 stripes
    # a filter 8 pixels wide averages the stripes (the first output sees clamped edges)
    np.testing.assert_allclose(s[..., 1:], 0.5, atol=0.07)
