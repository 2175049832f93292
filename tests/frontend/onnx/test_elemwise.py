"""Elemwise handlers against onnxruntime: unary functions and activations, Clip,
Cast/CastLike, Not, the composed activations, and the errors that name the node."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.errors import FrontendError, OpNotSupportedError

from .conftest import TOL, Compare, ember_run, make_model, ort_run, rand


def unary_model(op: str, dtype: str, shape: tuple[int, ...], opset: int, **attrs: Any) -> Any:
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    return make_model([node], {"x": (dtype, shape)}, ["y"], opset=opset)


UNARY_FLOAT = [
    ("Sigmoid", {}, 13),
    ("Tanh", {}, 13),
    ("Softplus", {}, 13),
    ("Softsign", {}, 13),
    ("HardSwish", {}, 14),
    ("Erf", {}, 13),
    ("Exp", {}, 13),
    ("Floor", {}, 13),
    ("Ceil", {}, 13),
    ("Round", {}, 11),
    ("LeakyRelu", {"alpha": 0.3}, 16),
    ("Elu", {"alpha": 0.7}, 13),
    ("Selu", {}, 13),
    ("Selu", {"alpha": 1.5, "gamma": 2.0}, 13),
    ("HardSigmoid", {"alpha": 0.25, "beta": 0.4}, 13),
    ("Gelu", {}, 20),
    ("Gelu", {"approximate": "tanh"}, 20),
    ("ThresholdedRelu", {"alpha": 0.5}, 10),
]


def ort_lacks_kernel(op: str, dtype: str, opset: int, attrs: dict) -> bool:
    """True when onnxruntime (CPU) has no kernel for ``op`` on ``dtype``."""
    import onnxruntime

    model = unary_model(op, dtype, (1,), opset, **attrs)
    try:
        onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as err:
        return "NOT_IMPLEMENTED" in str(err)
    return False


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize(("op", "attrs", "opset"), UNARY_FLOAT)
def test_unary_float(compare_ort: Compare, op: str, attrs: dict, opset: int, dtype: str) -> None:
    x = rand((2, 3, 5), dtype)
    rtol, atol = TOL[dtype]
    if dtype == "float64" and attrs.get("approximate") == "tanh":
        rtol = 1e-6  # onnxruntime uses float32 constants in its tanh approximation
    model = unary_model(op, dtype, x.shape, opset, **attrs)
    if not ort_lacks_kernel(op, dtype, opset, attrs):
        compare_ort(model, {"x": x}, rtol=rtol, atol=atol)
        return
    # no onnxruntime kernel for this dtype: compare with its float32 result instead
    want = ort_run(unary_model(op, "float32", x.shape, opset, **attrs), {"x": x.astype("float32")})
    got = ember_run(model, {"x": x})
    assert got[0].dtype == np.dtype(dtype)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_positive_domain(compare_ort: Compare, op: str, dtype: str) -> None:
    x = rand((4, 6), dtype, 0.1, 9.0)
    rtol, atol = TOL[dtype]
    compare_ort(unary_model(op, dtype, x.shape, 13), {"x": x}, rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["Relu", "Neg", "Abs", "Sign"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "int8"])
def test_signed_unary(compare_ort: Compare, op: str, dtype: str) -> None:
    x = rand((3, 7), dtype, -9, 9)
    model = unary_model(op, dtype, x.shape, 14)
    if op == "Relu" and dtype == "int64":  # onnxruntime has no int64 Relu kernel
        np.testing.assert_array_equal(ember_run(model, {"x": x})[0], np.maximum(x, 0))
        return
    compare_ort(model, {"x": x})


def test_isnan_isinf(compare_ort: Compare) -> None:
    x = np.array([[np.nan, np.inf, -np.inf, 0.5, -2.0]], np.float32)
    compare_ort(unary_model("IsNaN", "float32", x.shape, 13), {"x": x})
    for pos, neg in [(1, 1), (0, 1), (1, 0)]:
        model = unary_model(
            "IsInf", "float32", x.shape, 10, detect_positive=pos, detect_negative=neg
        )
        compare_ort(model, {"x": x})


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_clip_inputs(compare_ort: Compare, dtype: str) -> None:
    x = rand((3, 8), dtype, -9, 9)
    lo, hi = np.array(-2, dtype), np.array(4, dtype)
    for names, inits in [
        (["x", "lo", "hi"], {"lo": lo, "hi": hi}),
        (["x", "", "hi"], {"hi": hi}),
        (["x", "lo"], {"lo": lo}),
        (["x"], {}),
    ]:
        node = helper.make_node("Clip", names, ["y"])
        model = make_model([node], {"x": (dtype, x.shape)}, ["y"], inits, opset=13)
        compare_ort(model, {"x": x})


def test_clip_legacy_attrs_and_dynamic_bounds(compare_ort: Compare) -> None:
    x = rand((4, 5), "float32")
    node = helper.make_node("Clip", ["x"], ["y"], min=-1.0, max=0.5)
    compare_ort(make_model([node], {"x": ("float32", x.shape)}, ["y"], opset=10), {"x": x})
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    inputs = {"x": ("float32", x.shape), "lo": ("float32", ()), "hi": ("float32", ())}
    model = make_model([node], inputs, ["y"], opset=12)
    feeds = {"x": x, "lo": np.array(-0.5, np.float32), "hi": np.array(1.0, np.float32)}
    compare_ort(model, feeds)


CASTS = [
    ("float32", "int32"),
    ("float32", "int64"),
    ("float32", "float16"),
    ("float32", "float64"),
    ("float32", "bool"),
    ("float64", "float32"),
    ("float16", "float32"),
    ("int32", "float32"),
    ("int64", "int32"),
    ("int32", "int8"),
    ("uint8", "float32"),
    ("bool", "float32"),
    ("bool", "int64"),
    ("int64", "bool"),
    ("float32", "bfloat16"),
    ("bfloat16", "float32"),
]


@pytest.mark.parametrize(("src", "dst"), CASTS)
def test_cast(compare_ort: Compare, src: str, dst: str) -> None:
    if src == "bfloat16":
        import ml_dtypes

        x = rand((3, 4), "float32", -100, 100).astype(ml_dtypes.bfloat16)
    else:
        x = rand((3, 4), src, -100, 100)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dst if dst != "bfloat16" else "float32"))
    if dst == "bfloat16":
        elem = TensorProto.BFLOAT16
    node = helper.make_node("Cast", ["x"], ["y"], to=int(elem))
    model = make_model([node], {"x": (src, x.shape)}, ["y"], opset=19)
    if src == "bfloat16" or dst == "bfloat16":  # onnxruntime has no bfloat16 Cast on CPU
        got = ember_run(model, {"x": x})[0]
        want = x.astype(np.float32) if dst == "float32" else x.astype(got.dtype)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
        return
    compare_ort(model, {"x": x})


def test_castlike(compare_ort: Compare) -> None:
    x = rand((2, 5), "float32")
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    inputs = {"x": ("float32", x.shape), "like": ("int64", (1,))}
    model = make_model([node], inputs, ["y"], opset=15)
    compare_ort(model, {"x": x, "like": np.array([7], np.int64)})


def test_errors_name_the_node() -> None:
    node = helper.make_node("Add", ["a", "b"], ["y"], name="bad_add")
    model = make_model([node], {"a": ("float32", (2, 3)), "b": ("float32", (4,))}, ["y"])
    with pytest.raises(
        FrontendError, match=r"bad_add.*cannot broadcast shapes \(2, 3\) and \(4,\)"
    ):
        ember_run(model, {"a": np.zeros((2, 3), np.float32), "b": np.zeros(4, np.float32)})
    node = helper.make_node("Sigmoid", ["x"], ["y"])
    model = make_model([node], {"x": ("int32", (2,))}, ["y"])
    with pytest.raises(OpNotSupportedError, match="Sigmoid"):
        ember_run(model, {"x": np.zeros(2, np.int32)})


@pytest.mark.parametrize(
    ("op", "attrs", "opset"),
    [
        ("Celu", {"alpha": 0.7}, 12),
        ("Mish", {}, 18),
        ("Shrink", {"lambd": 1.2, "bias": 0.3}, 9),
        ("Hardmax", {}, 13),
        ("Hardmax", {"axis": 0}, 13),
        ("Hardmax", {"axis": 1}, 11),
    ],
)
def test_composed_activations(compare_ort: Compare, op: str, attrs: dict, opset: int) -> None:
    x = np.round(rand((3, 4, 5), "float32"), 1)  # rounding creates ties for Hardmax
    compare_ort(unary_model(op, "float32", x.shape, opset, **attrs), {"x": x})


def test_shrink_integers(compare_ort: Compare) -> None:
    x = rand((4, 5), "int32", -5, 5)
    model = unary_model("Shrink", "int32", x.shape, 9, lambd=1.5, bias=1.0)
    compare_ort(model, {"x": x})


CAST_DTYPES = [
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
]


@pytest.mark.parametrize("src", CAST_DTYPES)
def test_cast_matrix(compare_ort: Compare, src: str) -> None:
    """Every pair of ORT-supported dtypes, on values every target can represent."""
    base = np.array([0.0, 1.0, 2.75, 99.5, 7.25, 0.5], np.float32)
    x = (base > 1).astype(bool) if src == "bool" else base.astype(src)
    for dst in CAST_DTYPES:
        to = int(helper.np_dtype_to_tensor_dtype(np.dtype(dst)))
        node = helper.make_node("Cast", ["x"], ["y"], to=to)
        model = make_model([node], {"x": (src, x.shape)}, ["y"], opset=13)
        compare_ort(model, {"x": x})
