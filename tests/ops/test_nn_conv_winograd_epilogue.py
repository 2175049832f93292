"""The Winograd convolution's fused epilogue (ember.ops.nn_conv_winograd_epilogue): which
loop-IR epilogues move into the ember_f32_winograd call (bias, residual add, ReLU, in the
zoo's orders), which stay (SiLU, a clip), and on real layers (resnet8's, ResNet-50's,
CRNN's, YOLO's) the fused kernel's bytes equal the unfused path's (PassContext config
``nn.conv_winograd_epilogue`` False) at one and two threads, and onnxruntime's results
within the Winograd tolerance of tests/ops/test_nn_conv_winograd.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ember.driver import lower
from ember.examples.builder import GraphBuilder
from ember.ops.nn_conv_winograd import EPILOGUE_CONFIG, WINOGRAD_CONFIG
from ember.ops.nn_conv_winograd_epilogue import STEP_BIAS, STEP_RELU, STEP_RES
from ember.runtime import num_threads
from ember.target import Target
from ember.testing import compile_onnx, run_onnxruntime
from ember.testing.runners import run_artifacts
from ember.tir import post_order_visit
from ember.tir.expr import Call, IntImm
from ember.transform import PassContext

#: the compiled comparisons' tolerance, a fraction of max |y| (test_nn_conv_winograd's RTOL:
#: 8x F(4,3)'s worst measured error against float64)
RTOL = 1e-4

AVX512 = "x86-avx512" in Target.create("c").keys
needs_avx512 = pytest.mark.skipif(not AVX512, reason="Winograd convolutions need AVX-512")

#: epilogue kind -> the ONNX nodes after Conv (with its bias) and the steps the call gets
KINDS: dict[str, tuple[tuple[str, ...], list[int]]] = {
    "bias": ((), [STEP_BIAS]),
    "bias_relu": (("Relu",), [STEP_BIAS, STEP_RELU]),  # ResNet-50, CRNN
    "bias_res_relu": (("Res", "Relu"), [STEP_BIAS, STEP_RES, STEP_RELU]),  # resnet8
    "bias_relu_res": (("Relu", "Res"), [STEP_BIAS, STEP_RELU, STEP_RES]),
    "silu": (("SiLU",), []),  # YOLO's: stays loop IR
    "clip": (("Clip",), []),  # ReLU6: stays loop IR
}


def _epi(steps: list[int]) -> int:
    return sum(s << (4 * i) for i, s in enumerate(steps))


def _model(kind: str, h: int, w: int, c: int, o: int) -> tuple[onnx.ModelProto, dict]:
    """A 1x1 stem, the 3x3 conv (pads 1, bias), ``kind``'s nodes (a residual adds the stem's
    output), a 1x1 head; NCHW as imported (channels last between the stem and the head)."""
    g = GraphBuilder(h * w + c + o + len(kind))
    wt = g.weight("w", (o, c, 3, 3), float(np.sqrt(2 / (9 * c))))
    b = g.weight("b", (o,), 0.1)
    stem = g.weight("ws", (c, c, 1, 1), float(np.sqrt(1 / c)))
    x = g.node("Conv", ["x", stem], "stem", kernel_shape=[1, 1])  # channels last inside
    y = g.node("Conv", [x, wt, b], "conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])]
    rng = np.random.default_rng(h + c)
    feeds = {"x": np.maximum(rng.standard_normal((1, c, h, w)), 0).astype(np.float32)}
    for step in KINDS[kind][0]:
        if step == "Relu":
            y = g.node("Relu", [y], "relu")
        elif step == "Res":  # the block's input, as in resnet8
            assert c == o
            y = g.node("Add", [y, x], "res")
        elif step == "SiLU":
            s = g.node("Sigmoid", [y], "sig")
            y = g.node("Mul", [y, s], "silu")
        elif step == "Clip":
            lo = g.const("lo", np.array(0.0, np.float32))
            hi = g.const("hi", np.array(6.0, np.float32))
            y = g.node("Clip", [y, lo, hi], "clip")
    # a 1x1 head: the graph's output transposes back to NCHW after it, not after the epilogue
    head = g.weight("wh", (16, o, 1, 1), float(np.sqrt(1 / o)))
    y = g.node("Conv", [y, head], "head", kernel_shape=[1, 1])
    out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 16, h, w])
    return g.model("wino_epilogue", inputs, [out]), feeds


def _config(fuse: bool) -> PassContext:
    return PassContext(config={WINOGRAD_CONFIG: 4, EPILOGUE_CONFIG: fuse})


def _epis(model: onnx.ModelProto, fuse: bool) -> list[int]:
    """The epi argument of every ember_f32_winograd call in the lowered kernels."""
    from ember.frontend import from_onnx

    mod, params = from_onnx(model)
    lowered = lower(mod, "c", params, pass_context=_config(fuse))
    epis: list[int] = []

    def visit(n: object) -> None:
        if isinstance(n, Call) and n.op == "ember_f32_winograd":
            last = n.args[-1]
            assert isinstance(last, IntImm)
            epis.append(last.value)

    for prim in lowered.prim_funcs:
        post_order_visit(prim.body, visit)
    return epis


@needs_avx512
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_which_epilogues_move_into_the_call(kind: str) -> None:
    model, _ = _model(kind, 8, 8, 16, 16)
    assert _epis(model, True) == [_epi(KINDS[kind][1])]
    assert _epis(model, False) == [0]  # the switch keeps every epilogue in loop IR


@needs_avx512
def test_a_fused_group_keeps_no_temporary_and_no_epilogue_nest() -> None:
    from ember.frontend import from_onnx

    mod, params = from_onnx(_model("bias_res_relu", 8, 8, 16, 16)[0])
    prims = lower(mod, "c", params, pass_context=_config(True)).prim_funcs
    text = "\n".join(str(p) for p in prims if "winograd" in p.name)
    assert "conv_winograd = allocate" not in text
    assert "for " not in text  # the whole group is the call


def _run(art: object, feeds: dict, threads: int) -> np.ndarray:
    with num_threads(threads):
        return run_artifacts(art, feeds)[0]


@needs_avx512
@pytest.mark.parametrize(
    ("kind", "h", "w", "c", "o", "m"),
    [
        ("bias_res_relu", 32, 32, 16, 16, 4),  # resnet8
        ("bias_res_relu", 8, 8, 64, 64, 4),
        ("bias_relu", 56, 56, 64, 64, 4),  # ResNet-50
        ("bias_relu", 14, 14, 256, 256, 2),  # ResNet-50's F(2,3) layer
        ("bias_relu", 4, 25, 128, 256, 4),  # CRNN: edge tiles
        ("bias", 10, 10, 64, 80, 4),  # YOLO's shape: 80 channels, blocks of 16
        ("bias_relu_res", 9, 11, 48, 48, 2),
        ("silu", 20, 20, 64, 64, 4),  # YOLO: unfused, unchanged
        ("bias", 80, 80, 96, 24, 4),  # DBNet: 24 channels padded to 32, the last 8 masked
        ("bias_relu", 13, 7, 48, 40, 2),  # 40 padded to 48
        ("bias_res_relu", 10, 10, 24, 24, 4),
    ],
)
def test_fused_is_the_unfused_bytes_and_onnxruntime(
    kind: str, h: int, w: int, c: int, o: int, m: int
) -> None:
    model, feeds = _model(kind, h, w, c, o)
    shapes = {k: v.shape for k, v in feeds.items()}
    cfg = {WINOGRAD_CONFIG: m}
    fused = compile_onnx(model, shape=shapes, pass_context=PassContext(config=cfg))
    plain = compile_onnx(
        model, shape=shapes, pass_context=PassContext(config={**cfg, EPILOGUE_CONFIG: False})
    )
    want = _run(plain, feeds, 1)
    for threads in (1, 2):
        np.testing.assert_array_equal(_run(fused, feeds, threads), want)
    ref = run_onnxruntime(model, feeds)[0]
    np.testing.assert_allclose(want, ref, atol=RTOL * np.abs(ref).max(), rtol=0)


@needs_avx512
def test_fused_builds_are_deterministic() -> None:
    model, feeds = _model("bias_res_relu", 16, 16, 32, 32)
    shapes = {k: v.shape for k, v in feeds.items()}
    a = compile_onnx(model, shape=shapes, pass_context=_config(True))
    b = compile_onnx(model, shape=shapes, pass_context=_config(True))
    assert a.content_hash() == b.content_hash()


def test_the_attribute_defaults_to_fused() -> None:
    from ember.ir.op import get_op

    op = get_op("nn.conv_winograd")
    assert op.attrs["epilogue"].default == 1
