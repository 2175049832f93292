"""onnxruntime's quantized contrib ops (com.microsoft QLinearAdd, QGemm, ...) against
onnxruntime itself, compiled.

Each is imported as dequantize -> the standard op -> quantize, so 8-bit outputs may differ
from onnxruntime's where a value lands on a rounding tie that its integer kernels decide
the other way: every element within one step, and nearly all equal.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from onnx import helper

from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.testing import build_model, run_onnx_compiled, run_onnxruntime
from ember.transform import optimize

pytestmark = pytest.mark.cc
MS = "com.microsoft"
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _seeded(request: pytest.FixtureRequest) -> None:
    """Each test's data from its own name: the same bytes in any order or worker."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))


def _bytes(shape: tuple[int, ...], dtype: str = "uint8") -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def _model(
    op: str, inputs: dict[str, np.ndarray], params: dict[str, Any], names: list[str],
    attrs: dict[str, Any] | None = None, outputs: int = 1,
) -> Any:  # fmt: skip
    outs = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, outs, domain=MS, **(attrs or {}))
    spec = {n: (v.dtype.name, v.shape) for n, v in inputs.items()}
    inits = {k: np.asarray(v) for k, v in params.items()}
    return build_model([node], spec, outs, inits, opset=17, extra_opsets={MS: 1})


def _same_in_steps(got: np.ndarray, want: np.ndarray, exact: float = 0.98) -> None:
    """8-bit outputs: same shape and type, all within one step, nearly all equal."""
    assert got.shape == want.shape and got.dtype == want.dtype
    diff = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1 and np.mean(diff == 0) >= exact, (diff.max(), np.mean(diff == 0))


def _check(
    op: str, inputs: dict, params: dict, names: list[str], attrs=None, exact: float = 0.98
) -> np.ndarray:
    model = _model(op, inputs, params, names, attrs)
    got = run_onnx_compiled(model, inputs)[0]
    _same_in_steps(got, run_onnxruntime(model, inputs)[0], exact)
    return got


def _scale(value: float) -> np.ndarray:
    return np.asarray(value, np.float32)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_binary_broadcasts(op: str, dtype: str) -> None:
    a, b = _bytes((2, 8, 5, 6), dtype), _bytes((8, 1, 6), dtype)
    params = {"sa": _scale(0.04), "za": np.asarray(3, dtype), "sb": _scale(0.03),
              "zb": np.asarray(-2 if dtype == "int8" else 130, dtype), "sc": _scale(0.05),
              "zc": np.asarray(1 if dtype == "int8" else 120, dtype)}  # fmt: skip
    if op == "QLinearMul":
        params["sc"] = _scale(0.6)
    names = ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"]
    _check(op, {"a": a, "b": b}, params, names, exact=1.0)  # onnxruntime's arithmetic


def test_add_without_zero_points_is_uint8() -> None:
    """Omitted zero points are uint8 zeros (onnxruntime's type inference refuses the model
    without them: it runs the same model with explicit zeros)."""
    a, b = _bytes((4, 16)), _bytes((4, 16))
    params = {"sa": _scale(0.02), "sb": _scale(0.02), "sc": _scale(0.04)}
    model = _model("QLinearAdd", {"a": a, "b": b}, params, ["a", "sa", "", "b", "sb", "", "sc"])
    got = run_onnx_compiled(model, {"a": a, "b": b})[0]
    zeros = params | {"z": np.asarray(0, np.uint8)}
    explicit = _model(
        "QLinearAdd", {"a": a, "b": b}, zeros, ["a", "sa", "z", "b", "sb", "z", "sc", "z"]
    )
    _same_in_steps(got, run_onnxruntime(explicit, {"a": a, "b": b})[0])


def test_qlinear_matmul_of_two_activations_is_exact() -> None:
    """Attention's QLinearMatMul of two activations keeps the exact int32 product (its QDQ
    form would sum dequantized values in float, and a tie came out one step off)."""
    a, b = _bytes((2, 16, 64)), _bytes((2, 64, 16))
    u8 = np.uint8
    params = {"sa": _scale(0.05), "za": np.asarray(128, u8), "sb": _scale(0.04),
              "zb": np.asarray(120, u8), "sy": _scale(0.9), "zy": np.asarray(127, u8)}  # fmt: skip
    node = helper.make_node("QLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])
    spec = {"a": ("uint8", a.shape), "b": ("uint8", b.shape)}
    model = build_model([node], spec, ["y"], params, opset=17)
    assert "dequantize" not in _ops(model, {"a": a, "b": b})
    got = run_onnx_compiled(model, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, {"a": a, "b": b})[0])


def test_add_of_a_constant_on_half_steps_is_exact() -> None:
    """GELU's ``erf + 1``: every exact sum lands on a half step, so only onnxruntime's own
    QLinearAdd arithmetic (the add kernel's, and a table's built through it) gives its
    bytes; a float chain's table differed on 29% of them (wav2vec2's QOperator model)."""
    a = np.arange(256, dtype=np.uint8).reshape(4, 64)
    u8 = np.uint8
    params = {"sa": _scale(2 / 255), "za": np.asarray(128, u8), "b": np.asarray(255, u8),
              "sb": _scale(1 / 255), "zb": np.asarray(0, u8), "sc": _scale(2 / 255),
              "zc": np.asarray(0, u8)}  # fmt: skip
    model = _model("QLinearAdd", {"a": a}, params, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"])
    got = run_onnx_compiled(model, {"a": a})[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, {"a": a})[0])


@pytest.mark.parametrize(
    ("op", "attrs"), [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1})]
)
def test_unary_ops(op: str, attrs: dict) -> None:
    x = _bytes((3, 40))
    params = {"sx": _scale(0.05), "zx": np.asarray(128, np.uint8), "sy": _scale(0.004),
              "zy": np.asarray(20, np.uint8)}  # fmt: skip
    _check(op, {"x": x}, params, ["x", "sx", "zx", "sy", "zy"], attrs)


@pytest.mark.parametrize(("opset", "axis"), [(13, -1), (13, 1), (11, 1)])
def test_softmax_by_its_opset(opset: int, axis: int) -> None:
    """The ``opset`` attribute chooses the semantics: before 13, 2-D coercion at ``axis``."""
    x = _bytes((2, 5, 12))
    params = {"sx": _scale(0.08), "zx": np.asarray(128, np.uint8), "sy": _scale(1 / 256),
              "zy": np.asarray(0, np.uint8)}  # fmt: skip
    attrs = {"opset": opset, "axis": axis}
    _check("QLinearSoftmax", {"x": x}, params, ["x", "sx", "zx", "sy", "zy"], attrs)


@pytest.mark.parametrize("channels_last", [0, 1])
def test_global_average_pool(channels_last: int) -> None:
    x = _bytes((2, 6, 7, 16) if channels_last else (2, 16, 6, 7))
    params = {"sx": _scale(0.05), "zx": np.asarray(100, np.uint8), "sy": _scale(0.02),
              "zy": np.asarray(90, np.uint8)}  # fmt: skip
    got = _check("QLinearGlobalAveragePool", {"x": x}, params, ["x", "sx", "zx", "sy", "zy"],
                 {"channels_last": channels_last}, exact=1.0)  # fmt: skip
    assert got.shape == ((2, 1, 1, 16) if channels_last else (2, 16, 1, 1))


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("include", [0, 1])
def test_average_pool(channels_last: int, include: int) -> None:
    x = _bytes((1, 9, 9, 8) if channels_last else (1, 8, 9, 9))
    params = {"sx": _scale(0.05), "zx": np.asarray(100, np.uint8), "sy": _scale(0.05),
              "zy": np.asarray(100, np.uint8)}  # fmt: skip
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
             "count_include_pad": include, "channels_last": channels_last}  # fmt: skip
    # averages over 4 or 6 taps (padding excluded) land exactly on halves: onnxruntime rounds
    # its exact integer sum, ember a float mean, so such ties may go either way
    names = ["x", "sx", "zx", "sy", "zy"]
    _check("QLinearAveragePool", {"x": x}, params, names, attrs, exact=0.9)


def test_concat_requantizes_each_input() -> None:
    a, b = _bytes((2, 3, 4)), _bytes((2, 5, 4))
    u8 = np.uint8
    params = {"sy": _scale(0.05), "zy": np.asarray(128, u8), "sa": _scale(0.03),
              "za": np.asarray(120, u8), "sb": _scale(0.07), "zb": np.asarray(140, u8)}  # fmt: skip
    got = _check("QLinearConcat", {"a": a, "b": b}, params,
                 ["sy", "zy", "a", "sa", "za", "b", "sb", "zb"], {"axis": 1})  # fmt: skip
    assert got.shape == (2, 8, 4)


def _gemm_params(n: int, k: int, per_column: bool) -> dict[str, np.ndarray]:
    w = RNG.integers(-64, 64, (n, k)).astype(np.int8)  # 7-bit, as reduce_range quantizes
    sb = (RNG.random(n).astype(np.float32) * 0.01 + 0.001) if per_column else _scale(0.004)
    zb = np.zeros(n, np.int8) if per_column else np.asarray(0, np.int8)
    return {"sa": _scale(0.05), "za": np.asarray(120, np.uint8), "w": w, "sb": sb, "zb": zb,
            "c": RNG.integers(-2000, 2000, n).astype(np.int32), "sy": _scale(0.1),
            "zy": np.asarray(128, np.uint8)}  # fmt: skip


def _ops(model: Any, inputs: dict[str, np.ndarray]) -> list[str]:
    mod, params = from_onnx(model, shape={k: v.shape for k, v in inputs.items()})
    body = optimize(mod, params).main.body
    return [n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")]


@pytest.mark.parametrize("per_column", [False, True])
def test_qgemm_requantized_runs_as_an_int8_kernel(per_column: bool) -> None:
    """transB with an int32 bias and y_scale: the QDQ form, fused into one int8 dense."""
    a = _bytes((6, 32))
    params = _gemm_params(24, 32, per_column)
    names = ["a", "sa", "za", "w", "sb", "zb", "c", "sy", "zy"]
    model = _model("QGemm", {"a": a}, params, names, {"transB": 1})
    assert any(op.startswith("quantized_dense") for op in _ops(model, {"a": a}))
    _same_in_steps(run_onnx_compiled(model, {"a": a})[0], run_onnxruntime(model, {"a": a})[0])


def test_qgemm_with_alpha_and_float_output() -> None:
    """alpha != 1 requantizes the int32 product; without y_scale the output is float."""
    a = _bytes((5, 32))
    params = _gemm_params(16, 32, True)
    names = ["a", "sa", "za", "w", "sb", "zb", "c", "sy", "zy"]
    _check("QGemm", {"a": a}, params, names, {"transB": 1, "alpha": 0.5})
    model = _model("QGemm", {"a": a}, params, names[:7], {"transB": 1})
    got, want = run_onnx_compiled(model, {"a": a})[0], run_onnxruntime(model, {"a": a})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_qgemm_without_transposes() -> None:
    a = _bytes((4, 32))
    params = _gemm_params(16, 32, False)
    params["w"] = np.ascontiguousarray(params["w"].T)
    _check("QGemm", {"a": a}, params, ["a", "sa", "za", "w", "sb", "zb", "c", "sy", "zy"])


def test_matmul_integer_to_float() -> None:
    a, b = _bytes((2, 3, 16)), RNG.integers(-64, 64, (16, 8)).astype(np.int8)
    params = {"b": b, "sa": _scale(0.02), "sb": RNG.random(8).astype(np.float32) * 0.01,
              "za": np.asarray(128, np.uint8), "zb": np.zeros(8, np.int8),
              "bias": RNG.standard_normal(8).astype(np.float32)}  # fmt: skip
    model = _model(
        "MatMulIntegerToFloat", {"a": a}, params, ["a", "b", "sa", "sb", "za", "zb", "bias"]
    )
    got, want = run_onnx_compiled(model, {"a": a})[0], run_onnxruntime(model, {"a": a})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dynamic_quantize_matmul() -> None:
    a = RNG.standard_normal((2, 7, 16)).astype(np.float32)
    params = {"b": RNG.integers(-64, 64, (16, 8)).astype(np.int8),
              "sb": RNG.random(8).astype(np.float32) * 0.01, "zb": np.zeros(8, np.int8),
              "bias": RNG.standard_normal(8).astype(np.float32)}  # fmt: skip
    model = _model("DynamicQuantizeMatMul", {"a": a}, params, ["a", "b", "sb", "zb", "bias"])
    got, want = run_onnx_compiled(model, {"a": a})[0], run_onnxruntime(model, {"a": a})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_dynamic_quantize_lstm(direction: str) -> None:
    """The LSTM over the dequantized weights: equal to a float LSTM of those weights, and
    near onnxruntime's (which also quantizes X and H at run time)."""
    dirs, hidden, size, seq, batch = (2 if direction == "bidirectional" else 1), 16, 12, 5, 3
    wq = RNG.integers(-127, 128, (dirs, size, 4 * hidden)).astype(np.int8)
    rq = RNG.integers(-127, 128, (dirs, hidden, 4 * hidden)).astype(np.int8)
    ws = (RNG.random((dirs, 4 * hidden)) * 0.002 + 0.001).astype(np.float32)
    rs = (RNG.random((dirs, 4 * hidden)) * 0.002 + 0.001).astype(np.float32)
    zero = np.zeros((dirs, 4 * hidden), np.int8)
    bias = (RNG.standard_normal((dirs, 8 * hidden)) * 0.1).astype(np.float32)
    x = RNG.standard_normal((seq, batch, size)).astype(np.float32)
    params = {"w": wq, "r": rq, "b": bias, "ws": ws, "wz": zero, "rs": rs, "rz": zero}
    names = ["x", "w", "r", "b", "", "", "", "", "ws", "wz", "rs", "rz"]
    attrs = {"hidden_size": hidden, "direction": direction}
    model = _model("DynamicQuantizeLSTM", {"x": x}, params, names, attrs, outputs=3)
    got = run_onnx_compiled(model, {"x": x})
    w_f = (wq.astype(np.float32) * ws[:, None, :]).transpose(0, 2, 1)
    r_f = (rq.astype(np.float32) * rs[:, None, :]).transpose(0, 2, 1)
    lstm = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y0", "y1", "y2"], **attrs)
    float_model = build_model([lstm], {"x": ("float32", x.shape)}, ["y0", "y1", "y2"],
                              {"w": w_f, "r": r_f, "b": bias}, opset=17)  # fmt: skip
    for g, f in zip(got, run_onnxruntime(float_model, {"x": x}), strict=True):
        np.testing.assert_allclose(g, f, rtol=1e-5, atol=1e-5)
    for g, q in zip(got, run_onnxruntime(model, {"x": x}), strict=True):
        assert g.shape == q.shape
        np.testing.assert_allclose(g, q, atol=0.05)  # its run-time activation rounding


def test_a_per_channel_activation_scale_is_refused() -> None:
    a, b = _bytes((4, 6)), _bytes((4, 6))
    params = {"sa": np.full(6, 0.02, np.float32), "sb": _scale(0.02), "sc": _scale(0.04)}
    model = _model("QLinearAdd", {"a": a, "b": b}, params, ["a", "sa", "", "b", "sb", "", "sc"])
    with pytest.raises(Exception, match="per-channel scale"):
        run_onnx_compiled(model, {"a": a, "b": b})
