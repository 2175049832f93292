"""Elementwise math and softmax: ember next to onnxruntime, single-threaded by default.

Run: ``.venv/bin/python benchmarks/elementwise.py [--repeat 20] [--only sigmoid,softmax]
[--threads 1]``. Each row is a one- or two-node ONNX model on 1M float32 values
(1024 x 1024), plus a (512, 1000) softmax as in a classifier head, once with every other
logit masked to -1e4 as in attention. The speed of these rows is set by the vector math
library: ember's C kernels reach glibc's libmvec through ``#pragma omp declare simd``
prototypes (see ``ember.codegen.c.vecmath``), onnxruntime uses its own vectorised
approximations. A cell is the best of ``--repeat`` interleaved
runs (the machine is shared; the minimum is the least disturbed estimate). Outputs are
checked against onnxruntime first (rtol 1e-5, atol 1e-6); nothing else is asserted.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# loaded by file path (the tests do), this folder is not on sys.path unless we put it there
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import best_times, markdown_table, run_table  # noqa: E402


@dataclass(frozen=True)
class Case:
    """One benchmarked model: a chain of ONNX ops applied to ``x`` of ``shape``."""

    name: str
    ops: tuple[str, ...]
    shape: tuple[int, ...] = (1024, 1024)
    attrs: dict[str, Any] = field(default_factory=dict)
    opset: int = 17
    #: a value written to every other column of ``x`` (an attention mask), or None
    masked: float | None = None


CASES: tuple[Case, ...] = (
    Case("sigmoid", ("Sigmoid",)),
    Case("silu (x*sigmoid)", ("Sigmoid", "Mul")),
    Case("gelu", ("Gelu",), opset=20),
    Case("tanh", ("Tanh",)),
    Case("exp", ("Exp",)),
    Case("sqrt (half NaN)", ("Sqrt",)),
    Case("elu", ("Elu",)),
    Case("softmax 1024x1024", ("Softmax",), attrs={"axis": -1}),
    Case("softmax 512x1000", ("Softmax",), (512, 1000), {"axis": -1}),
    Case("softmax 512x1000 masked", ("Softmax",), (512, 1000), {"axis": -1}, masked=-1e4),
)


def make_case(case: Case, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """The ONNX model of ``case`` and its seeded input (standard normal values)."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(case.shape).astype(np.float32)
    if case.masked is not None:
        x[..., ::2] = case.masked
    nodes = []
    current = "x"
    for k, op in enumerate(case.ops):
        out = "y" if k == len(case.ops) - 1 else f"t{k}"
        inputs = [current, "x"] if op in ("Mul", "Add") else [current]
        attrs = case.attrs if op == "Softmax" else {}
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        current = out
    graph = helper.make_graph(
        nodes,
        "elementwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(case.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(case.shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model.ir_version = 9
    return model, {"x": x}


def measure(case: Case, repeat: int, threads: int) -> list[str]:
    """Compile, check and time one case; return its table cells."""
    import onnxruntime as ort

    import ember
    from ember.executor import GraphExecutor
    from ember.testing import compile_onnx

    model, inputs = make_case(case)
    dev = ember.cpu(0)
    factory = ember.load_artifacts(compile_onnx(model, shape={"x": case.shape}), dev)
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
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6, err_msg=case.name)

    def ort_run() -> object:
        return sess.run(None, inputs)

    ember_s, ort_s = best_times([ge.run, ort_run], repeat)
    return [case.name, f"{ember_s * 1e3:.3f}", f"{ort_s * 1e3:.3f}", f"{ember_s / ort_s:.2f}"]


HEADER = ["case", "ember ms", "ort ms", "ember/ort"]


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of the measured rows."""
    return markdown_table(HEADER, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure every selected case, print the table."""
    description = (__doc__ or "").split("\n")[0]
    return run_table(description, CASES, measure, HEADER, argv, repeat=20)


if __name__ == "__main__":
    sys.exit(main())
