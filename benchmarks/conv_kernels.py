"""Single convolutions and matrix products of real CNNs: ember next to onnxruntime.

Run: ``EMBER_NUM_THREADS=1 .venv/bin/python benchmarks/conv_kernels.py [--repeat 15]
[--only r50.3x3.56,mv2.dw.112]``. Each row is one ONNX node (Conv, or MatMul for the
classifier) with the shape it has in ResNet-50 (224x224 input) or MobileNetV2 (224x224),
compiled alone. Both engines run single-threaded by default (``--threads``), timed in
interleaved rounds; a cell is the *best* of ``--repeat`` runs (the machine is shared:
the minimum is the least disturbed estimate). With one thread the clock is the calling
thread's CPU time, so that other processes preempting it do not count; with more, wall
time. Outputs are checked against onnxruntime
first (rtol 1e-4, atol 1e-5 relative to the output's scale). Nothing is asserted beyond
that: the script reports.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# loaded by file path (the tests do), this folder is not on sys.path unless we put it there
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import best_times, markdown_table, run_table  # noqa: E402


@dataclass(frozen=True)
class Shape:
    """One benchmarked node: a Conv (``kind='conv'``) or a MatMul (``kind='matmul'``)."""

    name: str
    kind: str
    cin: int
    cout: int
    size: int  # input height = width (conv) or rows M (matmul)
    kernel: int = 1
    stride: int = 1
    groups: int = 1

    def flops(self) -> float:
        """Multiply-adds times two."""
        if self.kind == "matmul":
            return 2.0 * self.size * self.cin * self.cout
        pad = self.kernel // 2
        out = (self.size + 2 * pad - self.kernel) // self.stride + 1
        per = self.cin // self.groups * self.kernel * self.kernel
        return 2.0 * self.cout * out * out * per


#: the shapes: ResNet-50's stages and classifier, MobileNetV2's characteristic layers, and
#: stride-2 3x3 layers (resnet8's, YOLO-like ones).
SHAPES: tuple[Shape, ...] = (
    Shape("r50.conv1.7x7s2", "conv", 3, 64, 224, 7, 2),
    Shape("r50.1x1.64-64.56", "conv", 64, 64, 56),
    Shape("r50.3x3.64.56", "conv", 64, 64, 56, 3),
    Shape("r50.1x1.64-256.56", "conv", 64, 256, 56),
    Shape("r50.1x1.256-64.56", "conv", 256, 64, 56),
    Shape("r50.3x3.128.28", "conv", 128, 128, 28, 3),
    Shape("r50.1x1.512-128.28", "conv", 512, 128, 28),
    Shape("r50.3x3.256.14", "conv", 256, 256, 14, 3),
    Shape("r50.1x1.1024-256.14", "conv", 1024, 256, 14),
    Shape("r50.1x1.256-1024.14", "conv", 256, 1024, 14),
    Shape("r50.3x3.512.7", "conv", 512, 512, 7, 3),
    Shape("r50.1x1.2048-512.7", "conv", 2048, 512, 7),
    Shape("r50.1x1.512-2048.7", "conv", 512, 2048, 7),
    Shape("r50.3x3s2.128.56", "conv", 128, 128, 56, 3, 2),  # torchvision's stride on the 3x3
    Shape("r50.fc.matmul", "matmul", 2048, 1000, 1),
    Shape("rn8.3x3s2.16-32.32", "conv", 16, 32, 32, 3, 2),  # resnet8's: F(4x4, 2x2) of phases
    Shape("rn8.3x3s2.32-64.16", "conv", 32, 64, 16, 3, 2),
    Shape("yolo.3x3s2.32-64.80", "conv", 32, 64, 80, 3, 2),
    Shape("yolo.3x3s2.64-128.40", "conv", 64, 128, 40, 3, 2),
    Shape("matmul.64x1024x1000", "matmul", 1024, 1000, 64),
    Shape("bert.128x256x1024", "matmul", 256, 1024, 128),
    Shape("bert.128x1024x256", "matmul", 1024, 256, 128),
    Shape("sq.conv1.3x3s2", "conv", 3, 64, 224, 3, 2),
    Shape("sq.1x1.128-16.55", "conv", 128, 16, 55),
    Shape("sq.3x3.16-64.55", "conv", 16, 64, 55, 3),
    Shape("sq.3x3.32-128.27", "conv", 32, 128, 27, 3),
    Shape("sq.1x1.512-1000.13", "conv", 512, 1000, 13),
    Shape("mv2.conv1.3x3s2", "conv", 3, 32, 224, 3, 2),
    Shape("mv2.dw.112", "conv", 32, 32, 112, 3, 1, 32),
    Shape("mv2.1x1.16-96.112", "conv", 16, 96, 112),
    Shape("mv2.1x1.96-24.56", "conv", 96, 24, 56),
    Shape("mv2.dw.s2.112", "conv", 96, 96, 112, 3, 2, 96),
    Shape("mv2.dw.s2.56", "conv", 144, 144, 56, 3, 2, 144),
    Shape("mv2.1x1.144-32.28", "conv", 144, 32, 28),
    Shape("mv2.dw.28", "conv", 192, 192, 28, 3, 1, 192),
    Shape("mv2.dw.14", "conv", 384, 384, 14, 3, 1, 384),
    Shape("mv2.1x1.384-64.14", "conv", 384, 64, 14),
    Shape("mv2.dw.7", "conv", 960, 960, 7, 3, 1, 960),
    Shape("mv2.1x1.960-320.7", "conv", 960, 320, 7),
)


def make_case(shape: Shape, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """The one-node ONNX model of ``shape`` and its seeded input."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    if shape.kind == "matmul":
        x = rng.standard_normal((shape.size, shape.cin)).astype(np.float32)
        w = (rng.standard_normal((shape.cin, shape.cout)) / np.sqrt(shape.cin)).astype(np.float32)
        node = helper.make_node("MatMul", ["x", "w"], ["y"])
        out_shape = [shape.size, shape.cout]
    else:
        x = rng.standard_normal((1, shape.cin, shape.size, shape.size)).astype(np.float32)
        fan_in = shape.cin // shape.groups * shape.kernel**2
        wshape = (shape.cout, shape.cin // shape.groups, shape.kernel, shape.kernel)
        w = (rng.standard_normal(wshape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        pad = shape.kernel // 2
        node = helper.make_node(
            "Conv",
            ["x", "w"],
            ["y"],
            kernel_shape=[shape.kernel] * 2,
            strides=[shape.stride] * 2,
            pads=[pad] * 4,
            group=shape.groups,
        )
        out = (shape.size + 2 * pad - shape.kernel) // shape.stride + 1
        out_shape = [1, shape.cout, out, out]
    graph = helper.make_graph(
        [node],
        shape.name.replace(".", "_"),
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, {"x": x}


def measure(shape: Shape, repeat: int, threads: int) -> list[str]:
    """Compile, check and time one shape; return its table cells."""
    import onnxruntime as ort

    import ember
    from ember.executor import GraphExecutor
    from ember.testing import compile_onnx

    model, inputs = make_case(shape)
    dev = ember.cpu(0)
    factory = ember.load_artifacts(compile_onnx(model, shape={"x": inputs["x"].shape}), dev)
    ge = GraphExecutor(factory["default"](dev))
    ge.set_input("x", inputs["x"])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    ge.run()
    ours = ge.get_output(0).numpy()
    ref = sess.run(None, inputs)[0]
    scale = float(np.max(np.abs(ref))) or 1.0
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5 * scale, err_msg=shape.name)

    def ort_run() -> object:
        return sess.run(None, inputs)

    ember_s, ort_s = best_times([ge.run, ort_run], repeat, cpu=threads == 1)
    gflops = shape.flops() / ember_s / 1e9
    return [
        shape.name,
        f"{ember_s * 1e3:.3f}",
        f"{ort_s * 1e3:.3f}",
        f"{ember_s / ort_s:.2f}",
        f"{gflops:.1f}",
    ]


HEADER = ["shape", "ember ms", "ort ms", "ember/ort", "ember GFLOP/s"]


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of the measured rows."""
    return markdown_table(HEADER, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure every selected shape, print the table."""
    description = (__doc__ or "").split("\n")[0]
    return run_table(description, SHAPES, measure, HEADER, argv, repeat=15)


if __name__ == "__main__":
    sys.exit(main())
