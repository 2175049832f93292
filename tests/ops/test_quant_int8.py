"""The whole-layer int8 kernels (``quantized_conv_int8``, ``quantized_dwconv_int8``,
``quantized_dense_int8``) against onnxruntime on odd sizes, on every path: AVX-512 VNNI
(where the host has it), AVX2 and portable C.

Each case is a QDQ chain (the form onnxruntime's quantizer writes) with 7-bit weights, so
both onnxruntime's u8s8 kernels and ember's ``vpmaddubsw`` tiles compute the exact integer
product and the same float32 requantization: results agree element for element. Sizes are
chosen against the tiles: K (C * KH * KW, or the matmul's K) not a multiple of 4, output
channels not a multiple of 4 or 16, positions not a multiple of 16. The portable C path
(a target without AVX2) must give the same bytes.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile

import numpy as np
import onnx
import pytest
from onnx import helper

from ember.cli.main import main
from ember.errors import CompileError
from ember.examples.models import make_model
from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.runtime.cpu_features import host_features
from ember.runtime.threads import num_threads
from ember.testing import build_model, run_onnx_compiled, run_onnx_reference, run_onnxruntime
from ember.testing.quantize import quantize_static
from ember.transform import PassContext, optimize

pytestmark = pytest.mark.cc
RNG_SEED = 7  # every test draws from a fresh RNG of this seed (tests/ops/conftest.py)
RNG = np.random.default_rng(RNG_SEED)
#: a CPU without AVX2 (x86-64-v2: SSE4.2): the portable C loops
PORTABLE = "c -mcpu=x86-64-v2"
#: AVX2 without AVX-512 (Zen 3): the vpmaddubsw tiles
AVX2 = "c -mcpu=znver3"
#: AVX-512 with VNNI (Ice Lake server): the vpdpbusd zmm tiles of int8_avx512.py
AVX512_VNNI = "c -mcpu=icelake-server"
#: whether this host runs AVX512_VNNI code (elsewhere those builds cannot load)
HAS_VNNI512 = {"avx512_vnni", "avx512bw", "avx512vl"} <= host_features()


def _qp(name: str, scale, zp) -> dict[str, np.ndarray]:
    return {f"{name}_s": np.asarray(scale, np.float32), f"{name}_z": np.asarray(zp)}


def _dq(name: str, out: str, axis: int | None = None):
    node = helper.make_node("DequantizeLinear", [name, f"{name}_s", f"{name}_z"], [out])
    if axis is not None:
        node.attribute.append(helper.make_attribute("axis", axis))
    return node


def _chain(op_node, w: np.ndarray, axis: int, per_channel: bool, x_dtype: str, y_dtype: str,
           relu: bool, x_shape: tuple[int, ...], channels: int):  # fmt: skip
    """QuantizeLinear(x) -> DQ -> op(DQ(W), DQ(bias)) -> [Relu] -> Q -> DQ, and feeds."""
    xz = np.int8(-7) if x_dtype == "int8" else np.uint8(131)
    yz = np.int8(5) if y_dtype == "int8" else np.uint8(117)
    ws = RNG.uniform(2e-3, 1e-2, channels) if per_channel else np.float32(4e-3)
    inits = {"w": w, **_qp("w", ws, np.zeros(channels if per_channel else (), np.int8))}
    inits |= _qp("x", 0.04, xz) | _qp("y", 0.05, yz)
    inits["b"] = RNG.integers(-3000, 3000, channels).astype(np.int32)
    inits |= {"b_s": np.asarray(0.04 * ws, np.float32), "b_z": np.zeros(np.shape(ws), np.int32)}
    w_axis = axis if per_channel else None
    nodes = [helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"])]
    nodes += [_dq("x", "xd"), _dq("w", "wd", w_axis), _dq("b", "bd", 0 if per_channel else None)]
    nodes.append(op_node)
    last = op_node.output[0]
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["r"]))
        last = "r"
    nodes += [helper.make_node("QuantizeLinear", [last, "y_s", "y_z"], ["y"]), _dq("y", "out")]
    model = build_model(nodes, {"xf": ("float32", x_shape)}, ["y"], inits, opset=17)
    return model, {"xf": RNG.standard_normal(x_shape).astype(np.float32) * 2.5}


def _ops(model, int8: bool = True) -> set[str]:
    mod, params = from_onnx(model)
    ctx = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": int8})
    body = optimize(mod, params, ctx=ctx).main.body
    return {n.op.name for n in post_order(body) if isinstance(n, Call) and hasattr(n.op, "name")}


def _check(model, feeds, op: str, reference: bool = True) -> None:
    """``op`` is used; ember (AVX2 and portable C, and the reference evaluator of the
    unfused graph when ``reference``) equals onnxruntime."""
    assert op in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    if reference:
        np.testing.assert_array_equal(run_onnx_reference(model, feeds)[0], want)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds, target=PORTABLE)[0], want)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds, target=AVX2)[0], want)
    if HAS_VNNI512:
        got = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
        np.testing.assert_array_equal(got, want)


def _conv_case(x_dtype: str, y_dtype: str, per_channel: bool, relu: bool, group_dw: bool,
               strides: tuple[int, int], dilations: tuple[int, int]):  # fmt: skip
    c, h, wd = (6, 13, 19) if group_dw else (5, 11, 13)
    m, kernel = (6, (3, 3)) if group_dw else (7, (3, 3))
    w = RNG.integers(-64, 64, (m, 1 if group_dw else c, *kernel)).astype(np.int8)
    node = helper.make_node(
        "Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 2, 1, 0], strides=list(strides),
        dilations=list(dilations), group=c if group_dw else 1,
    )  # fmt: skip
    return _chain(node, w, 0, per_channel, x_dtype, y_dtype, relu, (2, c, h, wd), m)


@pytest.mark.parametrize(
    "x_dtype,y_dtype,per_channel,relu,strides,dilations",
    [
        ("uint8", "uint8", True, True, (1, 1), (1, 1)),
        ("int8", "int8", False, False, (2, 1), (1, 1)),
        ("uint8", "int8", False, True, (1, 2), (2, 1)),
        ("int8", "uint8", True, False, (2, 2), (1, 1)),
        ("uint8", "uint8", True, False, (1, 1), (2, 3)),
        ("uint8", "uint8", True, True, (3, 2), (2, 1)),  # phase planes: taps cross phases
    ],
)
def test_conv_int8(x_dtype, y_dtype, per_channel, relu, strides, dilations) -> None:
    model, feeds = _conv_case(x_dtype, y_dtype, per_channel, relu, False, strides, dilations)
    _check(model, feeds, "quantized_conv_int8")


@pytest.mark.parametrize("width", [37, 21, 5])
def test_conv_int8_output_rows(width: int) -> None:
    """3x3 on the phase planes: output rows of 37 (16, 16 and an overlapping 16), 21 (16
    and an overlapping 16) and 5 (byte by byte) bytes copied out of the grid."""
    w = RNG.integers(-64, 64, (5, 3, 3, 3)).astype(np.int8)
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1])
    model, feeds = _chain(node, w, 0, True, "uint8", "uint8", False, (1, 3, 6, width), 5)
    _check(model, feeds, "quantized_conv_int8", reference=False)


def test_conv_int8_many_output_runs() -> None:
    """A tall narrow image (200 rows of 3): a chunk's positions hold more output runs than
    the driver's table of 64, so the rows are found run by run (the other copy loop)."""
    w = RNG.integers(-64, 64, (5, 3, 3, 3)).astype(np.int8)
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1])
    model, feeds = _chain(node, w, 0, True, "uint8", "uint8", False, (1, 3, 200, 3), 5)
    _check(model, feeds, "quantized_conv_int8", reference=False)


@pytest.mark.parametrize(
    "dtype,kernel,strides,pads,dilations,width",
    [
        ("uint8", (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 113),  # ResNet's: even bytes, 32 wide
        ("int8", (3, 3), (1, 1), (1, 0, 2, 1), (1, 1), 70),  # top bit flipped, 32 at a time
        ("int8", (2, 3), (3, 2), (0, 1, 1, 2), (2, 1), 9),  # plain C tails only
        ("uint8", (2, 2), (1, 2), (0, 0, 0, 0), (1, 3), 150),
    ],
)
def test_max_pool_int8(dtype, kernel, strides, pads, dilations, width) -> None:
    """QDQ MaxPool on the integers: ``quantized_max_pool_int8`` equals onnxruntime."""
    zp = np.asarray(-9 if dtype == "int8" else 140, dtype)
    inits = _qp("x", 0.04, zp) | _qp("y", 0.04, zp)
    pool = helper.make_node(
        "MaxPool", ["xd"], ["p"], kernel_shape=list(kernel), strides=list(strides),
        pads=list(pads), dilations=list(dilations),
    )  # fmt: skip
    nodes = [helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"]), _dq("x", "xd")]
    nodes += [pool, helper.make_node("QuantizeLinear", ["p", "y_s", "y_z"], ["y"])]
    shape = (2, 3, 12, width)
    model = build_model(nodes, {"xf": ("float32", shape)}, ["y"], inits, opset=17)
    feeds = {"xf": RNG.standard_normal(shape).astype(np.float32) * 3}
    _check(model, feeds, "quantized_max_pool_int8")


def _one_sign_weights(shape: tuple[int, ...]) -> np.ndarray:
    """7-bit weights in runs of one sign and large magnitude: every pair group of the conv
    tile (4 weights added in int16) is over its limit, so each row has many fix slots."""
    w = RNG.integers(40, 64, shape)
    sign = np.where(RNG.random(shape[:2]) < 0.5, -1, 1)[..., None, None]
    return (w * sign).astype(np.int8)


@pytest.mark.parametrize(
    "x_dtype,y_dtype,per_channel,kernel,strides,pads,shape",
    [
        ("uint8", "uint8", True, (3, 3), (1, 1), (1, 1, 1, 1), (1, 5, 9, 11)),  # K = 45: odd k4
        ("int8", "int8", False, (3, 3), (2, 2), (1, 0, 2, 1), (2, 7, 12, 13)),  # K = 63
        ("uint8", "int8", True, (1, 1), (1, 1), (0, 0, 0, 0), (1, 24, 7, 7)),  # K = 24: even
        ("int8", "uint8", True, (1, 1), (2, 2), (0, 0, 0, 0), (1, 13, 9, 9)),  # subsampled
        ("uint8", "uint8", False, (2, 3), (1, 2), (0, 1, 1, 0), (1, 11, 6, 17)),
        ("int8", "uint8", True, (1, 1), (1, 1), (0, 0, 0, 0), (1, 19, 7, 7)),  # 8-wide tail tile
    ],
)
def test_conv_int8_fix_slots(x_dtype, y_dtype, per_channel, kernel, strides, pads, shape) -> None:
    """Weights whose pair groups overflow int16 go through the fix slots (moved out of the
    rows, added back after the tile) and give onnxruntime's bytes: odd channel counts,
    padding, stride 2, per-channel scales, int8 and uint8 zero points."""
    m = 7
    w = _one_sign_weights((m, shape[1], *kernel))
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=list(pads),
                            strides=list(strides))  # fmt: skip
    model, feeds = _chain(node, w, 0, per_channel, x_dtype, y_dtype, True, shape, m)
    _check(model, feeds, "quantized_conv_int8")


@pytest.mark.parametrize(
    "x_dtype,strides,shape",
    [
        ("uint8", (1, 1), (1, 10, 7, 9)),  # 63 positions: 3 panels and a tail of 15
        ("int8", (1, 1), (2, 37, 7, 7)),  # 49: a tail of 1, top bit flipped, K % 4 != 0
        ("uint8", (2, 2), (1, 6, 13, 9)),  # subsampled to 7 x 5: one partial panel only
        ("uint8", (1, 1), (1, 21, 7, 8)),  # 56: a tail of 8 (the 8-position tile), odd K/4
        ("int8", (1, 1), (1, 20, 14, 14)),  # 196: a tail of 4, odd K/4
    ],
)
def test_pointwise_conv_int8_over_a_panel_tail(x_dtype, strides, shape) -> None:
    """1x1: full panels packed straight from the image rows, the tail's rows copied first."""
    w = RNG.integers(-64, 64, (9, shape[1], 1, 1)).astype(np.int8)
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], strides=list(strides))
    model, feeds = _chain(node, w, 0, True, x_dtype, "uint8", True, shape, 9)
    _check(model, feeds, "quantized_conv_int8")


@pytest.mark.parametrize(
    "x_dtype,per_channel,relu,strides,dilations",
    [
        ("uint8", True, True, (1, 1), (1, 1)),
        ("int8", False, False, (2, 2), (1, 1)),
        ("uint8", False, False, (2, 1), (1, 2)),
        ("int8", True, True, (1, 1), (2, 3)),
        ("uint8", True, False, (3, 2), (2, 1)),  # phase planes: taps cross phases
    ],
)
def test_depthwise_conv_int8(x_dtype, per_channel, relu, strides, dilations) -> None:
    model, feeds = _conv_case(x_dtype, "uint8", per_channel, relu, True, strides, dilations)
    _check(model, feeds, "quantized_dwconv_int8")


@pytest.mark.parametrize(
    "x_dtype,kernel,stride,shape",
    [
        ("uint8", 5, 1, (1, 3, 28, 28)),  # EfficientNet: 28 rows of 32, two vectors a step
        ("int8", 5, 2, (1, 4, 15, 15)),  # stride 2: taps across the four phase planes
        ("uint8", 7, 1, (2, 3, 7, 7)),  # ConvNeXt: 49 taps (odd: the last pair's weight 0)
        ("int8", 5, 1, (1, 2, 9, 5)),  # one vector and no second
    ],
)
def test_depthwise_conv_int8_large_kernels(x_dtype, kernel, stride, shape) -> None:
    """5x5 and 7x7 'same' depthwise (the taps' plane offsets from a table per channel)."""
    c = shape[1]
    w = RNG.integers(-64, 64, (c, 1, kernel, kernel)).astype(np.int8)
    pads = [kernel // 2] * 4
    node = helper.make_node(
        "Conv", ["xd", "wd", "bd"], ["c"], pads=pads, strides=[stride, stride], group=c
    )
    model, feeds = _chain(node, w, 0, True, x_dtype, "uint8", True, shape, c)
    _check(model, feeds, "quantized_dwconv_int8", reference=False)


@pytest.mark.parametrize(
    "x_dtype,stride,shape",
    [
        ("uint8", 1, (2, 11, 7, 7)),  # MobileNet's small maps: rows shorter than a vector
        ("int8", 2, (1, 9, 14, 14)),  # stride 2: the even bytes, rows of 8 (7 + 1 pad)
        ("uint8", 1, (1, 3, 5, 37)),  # rows of 37: two vectors and a blended tail of 5
        ("int8", 2, (2, 4, 9, 40)),  # the last rows near the end of the input: plain C
    ],
)
def test_depthwise_conv_int8_3x3_rows(x_dtype, stride, shape) -> None:
    """3x3 pad 1 (the unrolled kernels): image rows widened 16 at a time into the padded
    planes (the last vector blended), the planes' padding zeroed once per task."""
    c = shape[1]
    w = RNG.integers(-64, 64, (c, 1, 3, 3)).astype(np.int8)
    node = helper.make_node(
        "Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1], strides=[stride, stride], group=c
    )
    model, feeds = _chain(node, w, 0, True, x_dtype, "uint8", True, shape, c)
    _check(model, feeds, "quantized_dwconv_int8", reference=False)


@pytest.mark.parametrize("x_dtype,y_dtype,per_channel", [
    ("uint8", "uint8", True), ("int8", "int8", False), ("int8", "uint8", True),
])  # fmt: skip
def test_matmul_int8(x_dtype: str, y_dtype: str, per_channel: bool) -> None:
    """[2, 5, 13] x [13, 19]: rows not a multiple of 4, K of 4, N of 16."""
    w = RNG.integers(-64, 64, (13, 19)).astype(np.int8)
    node = helper.make_node("MatMul", ["xd", "wd"], ["mm"])
    add = helper.make_node("Add", ["mm", "bd"], ["c"])
    model, feeds = _chain(node, w, 1, per_channel, x_dtype, y_dtype, False, (2, 5, 13), 19)
    graph = model.graph
    nodes = list(graph.node)
    at = next(i for i, n in enumerate(nodes) if n.op_type == "MatMul")
    nodes.insert(at + 1, add)
    for n in nodes[at + 2 :]:
        n.input[:] = ["c" if i == "mm" else i for i in n.input]
    del graph.node[:]
    graph.node.extend(nodes)
    _check(model, feeds, "quantized_dense_int8")


@pytest.mark.parametrize("rows", [3, 1, 5])
def test_gemm_int8(rows: int) -> None:
    """Gemm with transB (nn.dense): the weight (N, K) packed transposed; a last row block
    of one row (1, 5) takes the one-row tile."""
    w = RNG.integers(-64, 64, (21, 30)).astype(np.int8)
    node = helper.make_node("Gemm", ["xd", "wd", "bd"], ["c"], transB=1)
    model, feeds = _chain(node, w, 0, True, "uint8", "uint8", True, (rows, 30), 21)
    _check(model, feeds, "quantized_dense_int8")


def test_full_range_weights_keep_the_exact_int32_path() -> None:
    """8-bit weights whose pair sums could saturate vpmaddubsw are not given to it."""
    w = RNG.integers(-128, 128, (7, 5, 3, 3)).astype(np.int8)
    w[0, 0, 0, :2] = (-128, 127)
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1])
    model, feeds = _chain(node, w, 0, True, "uint8", "uint8", False, (1, 5, 8, 8), 7)
    ops = _ops(model)
    assert "quantized_conv_int8" not in ops and "nn.conv" in ops
    np.testing.assert_array_equal(
        run_onnx_compiled(model, feeds)[0], run_onnx_reference(model, feeds)[0]
    )


def test_int8_kernels_can_be_turned_off() -> None:
    model, _ = _conv_case("uint8", "uint8", True, False, False, (1, 1), (1, 1))
    assert "quantized_conv_int8" not in _ops(model, int8=False)


def test_llvm_keeps_the_int32_path_and_refuses_the_int8_kernels_when_forced() -> None:
    """LLVM targets default to the portable int32 path (the int8 kernels are C source);
    asking for the int8 kernels there is refused naming the config key."""
    pytest.importorskip("llvmlite")
    model, feeds = _conv_case("uint8", "uint8", True, False, False, (1, 1), (1, 1))
    got = run_onnx_compiled(model, feeds, target="llvm")[0]
    np.testing.assert_array_equal(got, run_onnxruntime(model, feeds)[0])
    on = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": True})
    with pytest.raises(CompileError, match="fuse_qdq.int8_kernels"):
        run_onnx_compiled(model, feeds, target="llvm", pass_context=on)


BOARD_TOOLS = ("arm-none-eabi-gcc", "qemu-system-arm")


@pytest.mark.slow
@pytest.mark.skipif(
    any(shutil.which(t) is None for t in BOARD_TOOLS),
    reason="the Cortex-M toolchain is not installed (.ci/run installs it)",
)
def test_quantized_resnet8_passes_on_the_cortex_m_board(tmp_path) -> None:
    """The portable C of the int8 kernels on a microcontroller (scratch from the static
    arena, no heap): the board program checks the reference evaluator's vectors."""
    case = make_model("resnet8")
    src = tmp_path / "q.onnx"
    src.write_bytes(quantize_static(case.model, case.inputs).SerializeToString())
    assert "quantized_conv_int8" in _ops(onnx.load(src))
    tar = tmp_path / "q.tar"
    target = "c -mcpu=cortex-m4"
    assert main(["compile", str(src), "--format", "mlf", "--target", target, "-o", str(tar)]) == 0
    with tarfile.open(tar) as t:
        t.extractall(tmp_path / "mlf", filter="data")
    out = subprocess.run(
        ["make", "-s", "board-test"], cwd=tmp_path / "mlf", capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.startswith("PASS"), out.stdout + out.stderr


@pytest.mark.parametrize(
    "dtype,b_shape", [("uint8", (2, 3, 37)), ("int8", (2, 3, 37)), ("uint8", (37,))]
)
def test_qlinear_add_int8(dtype: str, b_shape: tuple[int, ...]) -> None:
    """Q(Add(DQ(a), DQ(b))) of one shape: the C kernel (FMA), 8 lanes and a scalar tail,
    gives the generic ``quantized_add``'s bytes (native and portable) and, for uint8,
    onnxruntime's QLinearAdd's; a broadcast keeps the generic ``quantized_add``. (For int8
    onnxruntime's own arithmetic differs by one step on a few elements, before and after
    the int8 kernels alike.)"""
    zp = np.int8(-4) if dtype == "int8" else np.uint8(120)
    inits = _qp("a", 0.05, zp) | _qp("b", 0.03, zp) | _qp("s", 0.04, zp)
    nodes = [helper.make_node("QuantizeLinear", [f"{n}f", f"{n}_s", f"{n}_z"], [n]) for n in "ab"]
    nodes += [_dq("a", "ad"), _dq("b", "bd"), helper.make_node("Add", ["ad", "bd"], ["sum"])]
    nodes.append(helper.make_node("QuantizeLinear", ["sum", "s_s", "s_z"], ["out"]))
    spec = {"af": ("float32", (2, 3, 37)), "bf": ("float32", b_shape)}
    model = build_model(nodes, spec, ["out"], inits, opset=17)
    feeds = {k: RNG.standard_normal(s).astype(np.float32) * 3 for k, (_, s) in spec.items()}
    same = b_shape == (2, 3, 37)
    assert ("quantized_add_int8" if same else "quantized_add") in _ops(model)
    off = PassContext(opt_level=2, config={"fuse_qdq.int8_kernels": False})
    generic = run_onnx_compiled(model, feeds, pass_context=off)[0]
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], generic)
    np.testing.assert_array_equal(run_onnx_compiled(model, feeds, target=PORTABLE)[0], generic)
    want = run_onnxruntime(model, feeds)[0]
    if dtype == "uint8":
        np.testing.assert_array_equal(generic, want)
    assert np.abs(generic.astype(np.int32) - want).max() <= 1


def _big_conv(kernel: tuple[int, int], strides: tuple[int, int], group_dw: bool, x_dtype: str):
    c, m = (24, 24) if group_dw else (16, 24)
    w = RNG.integers(-64, 64, (m, 1 if group_dw else c, *kernel)).astype(np.int8)
    pads = [k // 2 for k in kernel] * 2
    node = helper.make_node(
        "Conv", ["xd", "wd", "bd"], ["c"], pads=pads, strides=list(strides),
        group=c if group_dw else 1,
    )  # fmt: skip
    return _chain(node, w, 0, True, x_dtype, "uint8", True, (2, c, 45, 47), m)


@pytest.mark.parametrize(
    "kernel,strides,group_dw,x_dtype,op",
    [
        ((3, 3), (1, 1), False, "uint8", "quantized_conv_int8"),  # the flat padded image
        ((1, 1), (1, 1), False, "int8", "quantized_conv_int8"),  # 1x1: rows, tail by im2col
        ((3, 3), (2, 2), False, "uint8", "quantized_conv_int8"),  # phase planes
        ((1, 1), (2, 2), False, "uint8", "quantized_conv_int8"),  # 1x1 strided: subsampled
        ((3, 3), (1, 1), True, "int8", "quantized_dwconv_int8"),
        ((3, 3), (2, 2), True, "uint8", "quantized_dwconv_int8"),  # column phases, widened
        ((3, 3), (2, 2), True, "int8", "quantized_dwconv_int8"),  # 16 at a time
    ],
)
def test_int8_layers_split_across_threads(kernel, strides, group_dw, x_dtype, op) -> None:
    """Layers above the parallel threshold, run on 2 threads (one chunk of positions or
    channels per thread, each with its own workspace), equal 1 thread bit for bit and
    onnxruntime within one step (its float requantization rounds a rare tie otherwise)."""
    model, feeds = _big_conv(kernel, strides, group_dw, x_dtype)
    assert op in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    with num_threads(2):
        two = run_onnx_compiled(model, feeds)[0]
    with num_threads(1):
        one = run_onnx_compiled(model, feeds)[0]
    np.testing.assert_array_equal(two, one)
    assert np.abs(one.astype(np.int32) - want).max() <= 1
    assert np.mean(one == want) >= 0.999


def test_dense_int8_splits_its_panels_across_threads() -> None:
    """[64, 96] x [96, 200]: 13 panels of 16 columns shared by 2 threads."""
    w = RNG.integers(-64, 64, (200, 96)).astype(np.int8)
    node = helper.make_node("Gemm", ["xd", "wd", "bd"], ["c"], transB=1)
    model, feeds = _chain(node, w, 0, True, "int8", "uint8", False, (64, 96), 200)
    assert "quantized_dense_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    with num_threads(2):
        np.testing.assert_array_equal(run_onnx_compiled(model, feeds)[0], want)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "kernel,strides,group_dw,x_dtype,op",
    [
        ((3, 3), (1, 1), False, "uint8", "quantized_conv_int8"),  # 4-panel tiles, 2-panel tail
        ((1, 1), (1, 1), False, "int8", "quantized_conv_int8"),  # masked stores of the tail
        ((3, 3), (2, 2), False, "uint8", "quantized_conv_int8"),
        ((3, 3), (1, 1), True, "int8", "quantized_dwconv_int8"),
        ((3, 3), (2, 2), True, "uint8", "quantized_dwconv_int8"),
    ],
)
def test_int8_avx512_vnni_equals_avx2_bitwise(kernel, strides, group_dw, x_dtype, op) -> None:
    """The zmm vpdpbusd tiles and int32-clamp stores give the AVX2 build's bytes."""
    model, feeds = _big_conv(kernel, strides, group_dw, x_dtype)
    assert op in _ops(model)
    with num_threads(1):
        wide = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
        narrow = run_onnx_compiled(model, feeds, target=AVX2)[0]
    np.testing.assert_array_equal(wide, narrow)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize("rows,units", [(1, 200), (7, 40), (64, 232)])
def test_dense_int8_avx512_vnni_equals_avx2_bitwise(rows: int, units: int) -> None:
    """Dense tiles of 4 rows x 1-4 panels (the 3-panel group as 2 + 1), 1 row, column tails;
    onnxruntime within one step (its float requantization rounds a rare tie otherwise)."""
    w = RNG.integers(-64, 64, (units, 96)).astype(np.int8)
    node = helper.make_node("Gemm", ["xd", "wd", "bd"], ["c"], transB=1)
    model, feeds = _chain(node, w, 0, True, "int8", "uint8", True, (rows, 96), units)
    assert "quantized_dense_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    wide = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
    np.testing.assert_array_equal(wide, run_onnx_compiled(model, feeds, target=AVX2)[0])
    assert np.abs(wide.astype(np.int32) - want).max() <= 1  # onnxruntime rounds a rare tie


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "x_dtype,shape",
    [
        ("uint8", (2, 11, 7, 7)),  # MobileNetV2's 7x7: 49 positions, one step of 64
        ("int8", (1, 5, 14, 14)),  # rows of 14 across the steps of 64; int8 data flipped
        ("uint8", (1, 3, 3, 16)),  # 48 positions: a row end at every phase
        ("int8", (1, 4, 1, 5)),  # one row: no row above or below
        ("uint8", (1, 3, 9, 1)),  # one column: no column left or right
        ("uint8", (1, 3, 2, 2)),  # two columns: every output at a side
        ("uint8", (1, 3, 9, 17)),  # rows of 17: column 0 at every phase of the dwords
        ("uint8", (1, 3, 5, 56)),  # rows of 56
        ("int8", (1, 2, 4, 130)),  # rows longer than a step
        ("uint8", (2, 3, 1, 64)),  # one row of exactly 64
        ("uint8", (1, 6, 28, 28)),  # MobileNetV2's 28x28: 13 steps, the last of 16
    ],
)
def test_depthwise_same3_from_the_image_equals_avx2_bitwise(x_dtype, shape) -> None:
    """3x3 stride-1 'same' depthwise read from the image (ember_q8_dw_s1flat: 64 outputs of
    the flattened map a step, the bytes outside it masked to the zero point) gives the AVX2
    planes' bytes, on 1 and 2 threads, and onnxruntime's."""
    c = shape[1]
    w = RNG.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    node = helper.make_node(
        "Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1], group=c
    )
    model, feeds = _chain(node, w, 0, True, x_dtype, "uint8", True, shape, c)
    assert "quantized_dwconv_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    narrow = run_onnx_compiled(model, feeds, target=AVX2)[0]
    np.testing.assert_array_equal(narrow, want)
    for threads in (1, 2):
        with num_threads(threads):
            wide = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
        np.testing.assert_array_equal(wide, narrow)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "shape,stride",
    [((1, 4, 7, 7), 1), ((1, 3, 14, 14), 1), ((1, 3, 9, 30), 1), ((1, 3, 14, 14), 2)],
)
def test_depthwise_weights_past_int8_equal_avx2_bitwise(shape, stride) -> None:
    """Taps past int8's range (a weight zero point of -100: w - zw up to 227) cannot go to
    vpdpbusd: 3x3 depthwise keeps the int16 pairs (stride 1: ember_q8_dw_same3 up to 16
    wide, the planes beyond; stride 2: ember_q8_dw_s2rows) and the AVX2 build's bytes."""
    c = shape[1]
    w = RNG.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    node = helper.make_node(
        "Conv", ["xd", "wd", "bd"], ["c"], pads=[1, 1, 1, 1], strides=[stride] * 2, group=c
    )
    model, feeds = _chain(node, w, 0, True, "uint8", "uint8", True, shape, c)
    for init in model.graph.initializer:
        if init.name == "w_z":
            init.CopyFrom(onnx.numpy_helper.from_array(np.full(c, -100, np.int8), "w_z"))
    assert "quantized_dwconv_int8" in _ops(model)
    narrow = run_onnx_compiled(model, feeds, target=AVX2)[0]
    np.testing.assert_array_equal(narrow, run_onnx_reference(model, feeds)[0])
    with num_threads(1):
        wide = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
    np.testing.assert_array_equal(wide, narrow)


def _conv_vnni_is_avx2_and_within_a_step(model, feeds) -> None:
    """The model's quantized_conv_int8 gives the same bytes on the AVX-512 VNNI build as on
    the AVX2 one (1 thread), and onnxruntime's within one step."""
    assert "quantized_conv_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    with num_threads(1):
        wide = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
        narrow = run_onnx_compiled(model, feeds, target=AVX2)[0]
    np.testing.assert_array_equal(wide, narrow)
    assert np.abs(wide.astype(np.int32) - want).max() <= 1


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "c,kernel,hw",
    [
        (128, (3, 3), 7),  # K 1152: a 7x7 map's 4 panels (grid 7 x 9) as 8-row tiles of 2 + 2
        (1024, (1, 1), 7),  # K 1024, pointwise: 49 positions, the last panel of 1
        (2048, (1, 1), 13),  # K 2048: 11 panels in chunks of 6 and 5 (3 + 2), a tail of 9
        (64, (1, 1), 12),  # K 64 (16 steps, below EMBER_Q8_EIGHT_ROWS_K4): 4-row 4 x 4 tiles
        (128, (1, 1), 12),  # K 128 (32 steps): 8-row tiles
    ],
)
def test_conv_int8_avx512_long_sums_equal_avx2_bitwise(c, kernel, hw) -> None:
    """Long sums (4 panels beyond L1): a block's last 4 panels as two 8 x 2 tiles give the
    AVX2 build's bytes, and onnxruntime's within one step."""
    m = 20  # 8-row blocks and a block of 4
    w = RNG.integers(-64, 64, (m, c, *kernel)).astype(np.int8)
    pads = [k // 2 for k in kernel] * 2
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=pads)
    model, feeds = _chain(node, w, 0, True, "uint8", "uint8", True, (1, c, hw, hw), m)
    _conv_vnni_is_avx2_and_within_a_step(model, feeds)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "x_dtype,shape,pads",
    [
        ("uint8", (1, 5, 112, 112), [1, 1, 1, 1]),  # 56 outputs a row: a vector and 24 lanes
        ("int8", (2, 3, 15, 67), [1, 1, 1, 1]),  # odd width: the last tap column is padding
        ("uint8", (1, 4, 14, 66), [1, 1, 0, 0]),  # no padding after: ONNX's SAME_UPPER-like
        ("int8", (1, 3, 7, 7), [1, 1, 1, 1]),  # 4 outputs a row, the last row's taps below
        ("uint8", (1, 2, 2, 1), [1, 1, 1, 1]),  # one column
        ("uint8", (2, 5, 14, 14), [1, 1, 1, 1]),  # MobileNetV2's 14 -> 7: 4 rows, then 3
        ("int8", (1, 240, 14, 14), [1, 1, 1, 1]),  # above the parallel threshold at 2 threads
        ("uint8", (1, 3, 14, 14), [1, 1, 2, 2]),  # 8 x 8 outputs: every lane of the rows
        ("uint8", (1, 3, 14, 14), [1, 1, 4, 4]),  # 9 x 9 outputs: too wide for 4 rows a vector
        ("int8", (1, 3, 13, 14), [1, 1, 0, 0]),  # 6 x 7 outputs: the table's last rows outside
        ("uint8", (1, 4, 17, 9), [1, 1, 1, 1]),  # 9 x 5: the last vector of 1 row
        ("int8", (1, 3, 5, 130), [1, 1, 1, 1]),  # 65 outputs a row: 3 steps, the last of 1
        ("uint8", (1, 3, 4, 64), [1, 1, 0, 0]),  # 32 outputs: phase 1 reads to the row's end
    ],
)
def test_depthwise_stride2_rows_from_the_image_equal_avx2_bitwise(x_dtype, shape, pads) -> None:
    """3x3 stride-2 depthwise (ember_q8_dw_s2vnni: the dwords at bytes 2 ow - 1 of the image
    rows, two phases of 16 outputs, bytes outside it loaded as the zero point; on maps up to
    14 wide ember_q8_dw_s2small: 4 output rows a vector, the taps gathered by vpermt2b)
    gives the AVX2 planes' bytes and onnxruntime's."""
    c = shape[1]
    w = RNG.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=pads, strides=[2, 2], group=c)
    model, feeds = _chain(node, w, 0, True, x_dtype, "uint8", True, shape, c)
    assert "quantized_dwconv_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    narrow = run_onnx_compiled(model, feeds, target=AVX2)[0]
    np.testing.assert_array_equal(narrow, want)
    with num_threads(1):
        wide = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
        # VNNI without VBMI (Cascade Lake): ember_q8_dw_s2vnni on the small maps too
        no_vbmi = run_onnx_compiled(model, feeds, target="c -mcpu=cascadelake")[0]
    with num_threads(2):  # every task finds its own tables
        wide2 = run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0]
    np.testing.assert_array_equal(wide, narrow)
    np.testing.assert_array_equal(no_vbmi, narrow)
    np.testing.assert_array_equal(wide2, narrow)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "c,kernel,hw,one_sign",
    [
        (390, (1, 1), 7, False),  # 49 positions: 3 panels and 1 column of dots (k4 98)
        (390, (1, 1), 7, True),  # the same with fix slots added to the dots
        (1536, (1, 1), 14, True),  # 196: 12 panels and 4 columns (k4 384), fix slots
        (96, (3, 3), 6, False),  # the padded grid (6 x 8): 48, then a tail of 0 (no dots)
        (300, (1, 1), 9, False),  # 81: a column of 1 but k4 75 (below the bound: the tile)
    ],
)
def test_conv_int8_avx512_tail_dots_equal_avx2_bitwise(c, kernel, hw, one_sign) -> None:
    """A last panel of 1-4 positions as dot products of patch columns with 8- and 4-row
    blocks of weight rows gives the AVX2 build's bytes, and onnxruntime's within one step."""
    m = 20  # 8-row blocks and a block of 4
    shape = (m, c, *kernel)
    w = _one_sign_weights(shape) if one_sign else RNG.integers(-64, 64, shape).astype(np.int8)
    pads = [k // 2 for k in kernel] * 2
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=pads)
    model, feeds = _chain(node, w, 0, True, "uint8", "int8", True, (1, c, hw, hw), m)
    _conv_vnni_is_avx2_and_within_a_step(model, feeds)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "c,kernel,strides,dilations,hw",
    [
        (64, (3, 3), (1, 1), (1, 1), (7, 7)),  # 49 real positions (grid 63): 3 panels + 1 dot
        (40, (3, 3), (2, 2), (1, 1), (14, 13)),  # stride 2: phase planes, 7 x 7 out
        (16, (3, 3), (1, 1), (1, 1), (14, 14)),  # 196: 12 panels + a tail of 4 (k4 36: tiles)
        (5, (3, 5), (1, 2), (2, 1), (9, 20)),  # K 75, dilation, an odd map
        (8, (3, 3), (1, 1), (1, 1), (40, 1)),  # one column: a panel spans 45 grid bytes (grid)
    ],
)
def test_conv_int8_avx512_real_positions_equal_avx2_bitwise(c, kernel, strides, dilations, hw):
    """The padded image packed at the real output positions only (vpermt2b of each row's 32
    bytes; no grid columns past the map's width, outputs stored straight into y) gives the
    AVX2 build's bytes (its grid of Wq columns), and onnxruntime's within one step."""
    m = 12
    w = _one_sign_weights((m, c, *kernel))
    pads = [(k - 1) * d // 2 for k, d in zip(kernel, dilations, strict=True)] * 2
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=pads, strides=list(strides),
                            dilations=list(dilations))  # fmt: skip
    model, feeds = _chain(node, w, 0, True, "int8", "uint8", True, (1, c, *hw), m)
    _conv_vnni_is_avx2_and_within_a_step(model, feeds)


@pytest.mark.skipif(not HAS_VNNI512, reason="the host has no AVX512_VNNI")
@pytest.mark.parametrize(
    "c,kernel,strides,hw",
    [
        (8, (1, 1), (2, 2), (9, 75)),  # 1x1 stride 2: 38 pixels a row (vpmovwb: 32, then 6)
        (3, (1, 1), (2, 2), (4, 130)),  # 65 a row: 32, 32, then 1
        (4, (3, 3), (1, 1), (5, 70)),  # phase plane rows of 72 bytes: two masked stores
        (3, (3, 3), (1, 1), (6, 63)),  # rows of 65: the image's last byte in the second
        (2, (3, 3), (1, 1), (7, 3)),  # rows of 5 (3 of the image)
        (3, (3, 3), (2, 2), (5, 75)),  # stride-2 phase planes: 38 a row (32, then 6)
        (2, (3, 3), (2, 2), (4, 130)),  # 65 a row: 32, 32, then 1
        (3, (7, 7), (2, 2), (9, 40)),  # the stem's 7x7 stride 2: pads of 3
    ],
)
def test_conv_int8_avx512_image_copies_equal_avx2_bitwise(c, kernel, strides, hw) -> None:
    """The AVX-512BW copies of the image (a 1x1 strided convolution's subsampled pixels and
    stride-2 phase planes by vpmovwb; the padded phase planes of stride 1 by masked loads
    over the pad bytes and masked stores) give the AVX2 build's bytes, and onnxruntime's
    within one step."""
    m = 12
    w = _one_sign_weights((m, c, *kernel))
    pads = [k // 2 for k in kernel] * 2
    node = helper.make_node("Conv", ["xd", "wd", "bd"], ["c"], pads=pads, strides=list(strides))
    model, feeds = _chain(node, w, 0, True, "int8", "uint8", True, (1, c, *hw), m)
    _conv_vnni_is_avx2_and_within_a_step(model, feeds)


@pytest.mark.parametrize("x_dtype,y_dtype,shape", [
    ("uint8", "uint8", (3, 5, 13)),  # three vectors of 64 and a tail of 3
    ("int8", "uint8", (2, 64)),  # whole vectors; negative bytes index entries 128-255
    ("int8", "int8", (7,)),  # a tail only
])  # fmt: skip
def test_table_int8_on_every_path(x_dtype, y_dtype, shape) -> None:
    """A Sigmoid between 8-bit tensors is one ``quantized_table_int8``: the vpermi2b
    lookups (AVX512_VBMI), AVX2's and the portable loops give the same bytes, the table's."""
    xz = np.int8(-7) if x_dtype == "int8" else np.uint8(131)
    yz = np.int8(-128) if y_dtype == "int8" else np.uint8(0)
    inits = _qp("x", 0.05, xz) | _qp("y", 1 / 256, yz)
    nodes = [
        helper.make_node("QuantizeLinear", ["xf", "x_s", "x_z"], ["x"]),
        _dq("x", "xd"),
        helper.make_node("Sigmoid", ["xd"], ["s"]),
        helper.make_node("QuantizeLinear", ["s", "y_s", "y_z"], ["y"]),
    ]
    model = build_model(nodes, {"xf": ("float32", shape)}, ["y"], inits, 17)
    feeds = {"xf": (RNG.standard_normal(shape) * 4).astype(np.float32)}
    assert "quantized_table_int8" in _ops(model)
    want = run_onnx_reference(model, feeds)[0]
    got = [run_onnx_compiled(model, feeds, target=t)[0] for t in ("c", PORTABLE, AVX2)]
    if HAS_VNNI512:
        got.append(run_onnx_compiled(model, feeds, target=AVX512_VNNI)[0])
    for out in got:
        np.testing.assert_array_equal(out, got[0])
    step = np.abs(got[0].astype(np.int32) - want.astype(np.int32))
    assert step.max() <= 1 and np.mean(step == 0) > 0.97  # the float chain's rounding


@pytest.mark.parametrize("dtype,a_shape,b_shape", [
    ("uint8", (1, 20, 7, 9), (1, 20, 1, 1)),  # a squeeze-excitation scale: b per row of 63
    ("int8", (2, 3, 1), (2, 3, 37)),  # a per row (the kernel swaps the operands)
    ("uint8", (3, 50), (3, 50)),  # whole operands
    ("int8", (40,), ()),  # one row, a scalar b
])  # fmt: skip
def test_mul_int8_matches_qlinear_mul(dtype, a_shape, b_shape) -> None:
    """onnxruntime's QLinearMul (com.microsoft): ``quantized_mul_int8``'s 16 lanes (AVX-512),
    8 (AVX2) and the portable loop give its bytes exactly."""
    info = np.iinfo(dtype)
    feeds = {n: RNG.integers(info.min, info.max + 1, s).astype(dtype)
             for n, s in (("a", a_shape), ("b", b_shape))}  # fmt: skip
    zeros = {"za": 3, "zb": -2 if dtype == "int8" else 130, "zc": 1 if dtype == "int8" else 120}
    inits = {"sa": np.float32(0.04), "sb": np.float32(0.03), "sc": np.float32(0.04)}
    inits |= {k: np.asarray(v, dtype) for k, v in zeros.items()}
    node = helper.make_node(
        "QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"], domain="com.microsoft"
    )
    model = build_model([node], {n: (dtype, v.shape) for n, v in feeds.items()}, ["y"], inits, 17)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    assert "quantized_mul_int8" in _ops(model)
    want = run_onnxruntime(model, feeds)[0]
    assert want.size < 100 or 0 < np.mean(want == info.max) < 0.5  # saturated and not
    for target in ("c", PORTABLE, AVX2, *([AVX512_VNNI] if HAS_VNNI512 else [])):
        np.testing.assert_array_equal(run_onnx_compiled(model, feeds, target=target)[0], want)
