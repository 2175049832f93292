"""Math and logic handlers against onnxruntime: unary functions and activations, Clip,
Cast/CastLike, broadcasting arithmetic, variadic ops, comparisons, logic and Where."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.errors import FrontendError, OpNotSupportedError

from .conftest import ember_run, make_model, ort_run

Compare = Callable[..., list[np.ndarray]]
RNG = np.random.default_rng(42)
TOL = {"float16": (2e-3, 2e-3), "float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}


def rand(shape: tuple[int, ...], dtype: str, low: float = -3.0, high: float = 3.0) -> np.ndarray:
    """Random values of ``dtype`` (integers in [low, high], bools uniformly)."""
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.startswith(("int", "uint")):
        lo = 0 if dtype.startswith("uint") else int(low)
        return RNG.integers(lo, int(high) + 1, shape).astype(dtype)
    return RNG.uniform(low, high, shape).astype(dtype)


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


BROADCAST_SHAPES = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((), (2, 2))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "float16"])
@pytest.mark.parametrize(("sa", "sb"), BROADCAST_SHAPES)
def test_arithmetic(compare_ort: Compare, op: str, dtype: str, sa: tuple, sb: tuple) -> None:
    a = rand(sa, dtype, -20, 20)
    b = rand(sb, dtype, 1, 7)
    if dtype.startswith("int"):
        b = b * np.where(RNG.integers(0, 2, sb) == 0, 1, -1).astype(dtype)
    node = helper.make_node(op, ["a", "b"], ["y"])
    model = make_model([node], {"a": (dtype, sa), "b": (dtype, sb)}, ["y"], opset=14)
    rtol, atol = TOL.get(dtype, (0, 0))
    compare_ort(model, {"a": a, "b": b}, rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("base", "exp"),
    [
        ("float32", "float32"),
        ("float32", "int64"),
        ("float64", "float32"),
        ("int32", "int32"),
        ("int64", "int64"),
        ("int32", "float32"),
    ],
)
def test_pow(compare_ort: Compare, base: str, exp: str) -> None:
    a = rand((3, 4), base, 1, 5)
    b = rand((4,), exp, 0, 3)
    node = helper.make_node("Pow", ["a", "b"], ["y"])
    model = make_model([node], {"a": (base, a.shape), "b": (exp, b.shape)}, ["y"], opset=15)
    compare_ort(model, {"a": a, "b": b})


def test_prelu(compare_ort: Compare) -> None:
    x = rand((2, 3, 4, 4), "float32")
    for slope_shape in [(3, 1, 1), (4,), (1,)]:
        slope = rand(slope_shape, "float32", 0, 1)
        node = helper.make_node("PRelu", ["x", "s"], ["y"])
        model = make_model([node], {"x": ("float32", x.shape)}, ["y"], {"s": slope}, opset=16)
        compare_ort(model, {"x": x})


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_variadic(compare_ort: Compare, op: str, count: int) -> None:
    shapes = [(2, 3, 4), (3, 1), (4,)][:count]
    feeds = {f"x{i}": rand(s, "float32") for i, s in enumerate(shapes)}
    node = helper.make_node(op, list(feeds), ["y"])
    inputs = {n: ("float32", v.shape) for n, v in feeds.items()}
    compare_ort(make_model([node], inputs, ["y"], opset=13), feeds)


def test_variadic_integers(compare_ort: Compare) -> None:
    feeds = {"a": rand((3, 4), "int32", -9, 9), "b": rand((4,), "int32", -9, 9)}
    for op in ("Max", "Min"):
        node = helper.make_node(op, ["a", "b"], ["y"])
        inputs = {n: ("int32", v.shape) for n, v in feeds.items()}
        compare_ort(make_model([node], inputs, ["y"], opset=13), feeds)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_comparisons(compare_ort: Compare, op: str, dtype: str) -> None:
    a = rand((3, 4), dtype, -3, 3)
    b = rand((4,), dtype, -3, 3)
    node = helper.make_node(op, ["a", "b"], ["y"])
    model = make_model([node], {"a": (dtype, a.shape), "b": (dtype, b.shape)}, ["y"], opset=16)
    compare_ort(model, {"a": a, "b": b})


def test_logic_and_where(compare_ort: Compare) -> None:
    a, b = rand((2, 3), "bool"), rand((3,), "bool")
    for op in ("And", "Or", "Xor"):
        node = helper.make_node(op, ["a", "b"], ["y"])
        model = make_model([node], {"a": ("bool", a.shape), "b": ("bool", b.shape)}, ["y"])
        compare_ort(model, {"a": a, "b": b})
    node = helper.make_node("Not", ["a"], ["y"])
    compare_ort(make_model([node], {"a": ("bool", a.shape)}, ["y"]), {"a": a})
    for dtype in ("float32", "int64", "int32"):
        x, y = rand((2, 3), dtype), rand((1, 3), dtype)
        node = helper.make_node("Where", ["c", "x", "y"], ["z"])
        inputs = {"c": ("bool", (2, 1)), "x": (dtype, x.shape), "y": (dtype, y.shape)}
        feeds = {"c": rand((2, 1), "bool"), "x": x, "y": y}
        compare_ort(make_model([node], inputs, ["z"], opset=16), feeds)


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


@pytest.mark.parametrize(("dtype", "fmod"), [("int32", 0), ("int64", 1), ("float32", 1)])
def test_mod(compare_ort: Compare, dtype: str, fmod: int) -> None:
    a = rand((3, 4), dtype, -20, 20)
    b = rand((4,), dtype, 1, 6) * np.array([1, -1, 1, -1], dtype)
    node = helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)
    model = make_model([node], {"a": (dtype, a.shape), "b": (dtype, b.shape)}, ["y"], opset=13)
    compare_ort(model, {"a": a, "b": b})


def test_bitwise_and_shift(compare_ort: Compare) -> None:
    a = RNG.integers(0, 256, (3, 4)).astype(np.uint8)
    b = RNG.integers(0, 8, (4,)).astype(np.uint8)
    inputs = {"a": ("uint8", a.shape), "b": ("uint8", b.shape)}
    for op, attrs in [("BitwiseAnd", {}), ("BitwiseOr", {}), ("BitwiseXor", {})]:
        node = helper.make_node(op, ["a", "b"], ["y"], **attrs)
        compare_ort(make_model([node], inputs, ["y"], opset=18), {"a": a, "b": b})
    for direction in ("LEFT", "RIGHT"):
        node = helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)
        compare_ort(make_model([node], inputs, ["y"], opset=18), {"a": a, "b": b})
    node = helper.make_node("BitwiseNot", ["a"], ["y"])
    compare_ort(make_model([node], {"a": ("uint8", a.shape)}, ["y"], opset=18), {"a": a})


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
