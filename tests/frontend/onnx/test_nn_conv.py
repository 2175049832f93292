"""Conv, ConvTranspose, Gemm and MatMul against onnxruntime."""

from __future__ import annotations

from typing import Any

import pytest

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from .nn_check import check_node, rand
except ImportError:
    from nn_check import check_node, rand  # type: ignore[no-redef]


@pytest.mark.parametrize(
    "xshape,wshape,attrs",
    [
        ((1, 3, 10), (4, 3, 3), {"pads": [1, 2], "strides": [2]}),
        ((2, 4, 9, 8), (6, 2, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [1, 0, 2, 1]}),
        ((1, 4, 7, 7), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ((1, 3, 8, 7), (5, 3, 2, 4), {"auto_pad": "SAME_LOWER"}),
        ((1, 3, 8, 7), (5, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 3]}),
        ((1, 2, 5, 6, 4), (3, 2, 3, 2, 2), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 1]}),
        ((1, 64, 14, 14), (32, 64, 1, 1), {}),
        ((1, 2, 9, 8), (4, 2, 1, 1), {"strides": [2, 3], "pads": [0, 1, 1, 0]}),
    ],
)
def test_conv(xshape: tuple[int, ...], wshape: tuple[int, ...], attrs: dict[str, Any]) -> None:
    x, w, b = rand(xshape), rand(wshape, seed=1), rand((wshape[0],), seed=2)
    check_node("Conv", {"x": x}, attrs, {"w": w, "b": b})
    check_node("Conv", {"x": x, "w": w}, attrs, opset=11)
    check_node("Conv", {"x": x, "w": w, "b": b}, attrs, opset=22)  # bias as a model input


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_conv_same_with_dilation(auto_pad: str) -> None:
    """ORT rejects dilated SAME padding; the ONNX reference implementation is the oracle."""
    x, w = rand((1, 3, 9, 8)), rand((4, 3, 3, 2), seed=1)
    attrs = {"auto_pad": auto_pad, "dilations": [2, 3], "strides": [2, 1]}
    check_node("Conv", {"x": x}, attrs, {"w": w}, reference=True)


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_conv_dtypes(dtype: str) -> None:
    x, w = rand((1, 3, 6, 6), dtype), rand((4, 3, 3, 3), dtype, seed=1)
    check_node("Conv", {"x": x}, {"pads": [1, 1, 1, 1]}, {"w": w, "b": rand((4,), dtype, 2)})


@pytest.mark.parametrize(
    "xshape,wshape,attrs",
    [
        ((1, 3, 5), (3, 2, 3), {"strides": [2], "output_padding": [1]}),
        ((1, 4, 4, 5), (4, 3, 3, 3), {"group": 2, "pads": [1, 0, 1, 1], "strides": [2, 1]}),
        ((1, 2, 3, 3), (2, 3, 3, 3), {"dilations": [2, 2], "strides": [3, 2]}),
        ((1, 2, 3, 3), (2, 3, 3, 3), {"output_shape": [10, 8], "strides": [3, 2]}),
        ((1, 2, 3, 4), (2, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ((1, 2, 3, 4), (2, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}),
        ((1, 1, 2, 3, 2), (1, 2, 3, 2, 2), {"strides": [1, 2, 2]}),
    ],
)
def test_conv_transpose(
    xshape: tuple[int, ...], wshape: tuple[int, ...], attrs: dict[str, Any]
) -> None:
    x, w, b = rand(xshape), rand(wshape, seed=1), rand((wshape[1] * attrs.get("group", 1),), seed=2)
    check_node("ConvTranspose", {"x": x}, attrs, {"w": w, "b": b})


@pytest.mark.parametrize(
    "ashape,bshape,cshape,attrs",
    [
        ((3, 4), (4, 5), None, {}),
        ((4, 3), (5, 4), (5,), {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
        ((3, 4), (4, 5), (3, 1), {"beta": 0.0}),
        ((3, 4), (5, 4), (), {"transB": 1}),
        ((3, 4), (4, 5), (3, 5), {"alpha": 2.0}),
    ],
)
def test_gemm(ashape: Any, bshape: Any, cshape: Any, attrs: dict[str, Any]) -> None:
    params = {"b": rand(bshape, seed=1)}
    if cshape is not None:
        params["c"] = rand(cshape, seed=2)
    check_node("Gemm", {"a": rand(ashape)}, attrs, params)
    check_node(
        "Gemm",
        {"a": rand(ashape, "float64")},
        attrs,
        {k: v.astype("float64") for k, v in params.items()},
        opset=11,
    )


@pytest.mark.parametrize(
    "ashape,bshape",
    [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2)), ((6,), (6,))],
)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64"])
def test_matmul(ashape: Any, bshape: Any, dtype: str) -> None:
    a = (rand(ashape) * 4).astype(dtype)
    b = (rand(bshape, seed=1) * 4).astype(dtype)
    tol = (2e-3, 2e-2) if dtype == "float16" else (1e-5, 1e-5)
    check_node("MatMul", {"a": a, "b": b}, tol=tol)
