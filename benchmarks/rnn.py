"""Recurrent layers: ember against onnxruntime on a CRNN-style recognizer and single layers.

Run: ``.venv/bin/python benchmarks/rnn.py [--steps 25,40] [--repeat 30] [--profile 8]``.

Models (built here with the onnx helper, seeded weights, batch 1):

* ``crnn``: a CRNN text recognizer: four 3x3 conv + ReLU + max-pool stages turn a
  1 x 32 x (4T) grey image into T feature columns of 512 channels, then two bidirectional
  LSTMs (hidden 256) over the T steps and a linear layer to 37 classes;
* ``bilstm`` / ``bigru``: one bidirectional LSTM / GRU (input 512, hidden 256) over T steps,
  the recurrent part alone.

Each is compiled by ember for the C target and checked against onnxruntime, then timed in
interleaved rounds (ember graph executor, ember AOT executor, onnxruntime), all on one
thread, by the calling thread's CPU time (``time.thread_time``), so that other processes on
a shared machine do not count. It prints the medians and ember / onnxruntime. Nothing is
asserted: the script only reports.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import (  # noqa: E402
    interleaved_medians,
    markdown_table,  # noqa: E402
    ort_session,
)

from ember.examples.builder import GraphBuilder  # noqa: E402

#: hidden units of every recurrent layer, feature channels into the first one, classes.
HIDDEN = 256
FEATURES = 512
CLASSES = 37


def _recurrent(b: GraphBuilder, op: str, x: str, name: str, inp: int, hidden: int) -> str:
    """A bidirectional ``op`` (LSTM, GRU, RNN) over x (T, 1, inp); returns Y as (T, 1, 2H)."""
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    w = b.weight(f"{name}_W", (2, gates * hidden, inp), 1.0 / np.sqrt(inp))
    r = b.weight(f"{name}_R", (2, gates * hidden, hidden), 1.0 / np.sqrt(hidden))
    bias = b.weight(f"{name}_B", (2, 2 * gates * hidden), 0.1)
    y = b.node(op, [x, w, r, bias], f"{name}_Y", hidden_size=hidden, direction="bidirectional")
    yt = b.node("Transpose", [y], f"{name}_Yt", perm=[0, 2, 1, 3])
    shape = b.const(f"{name}_shape", np.array([0, 0, 2 * hidden], np.int64))
    return b.node("Reshape", [yt, shape], f"{name}_out")


def _model(
    b: GraphBuilder, name: str, x: str, x_shape: Sequence[int], out: str, out_shape: Sequence[int]
) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info(x, TensorProto.FLOAT, list(x_shape))]
    outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, list(out_shape))]
    return b.model(name, inputs, outputs)


def crnn(steps: int, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The CRNN recognizer over ``steps`` time steps and a seeded input image."""
    b = GraphBuilder(seed)
    x = "image"
    chans = [1, 64, 128, 256, FEATURES]
    pools = [(2, 2), (2, 2), (2, 1), (4, 1)]  # 32 x 4T -> 1 x T
    for k, (cin, cout) in enumerate(zip(chans, chans[1:], strict=False)):
        w = b.weight(f"conv{k}_w", (cout, cin, 3, 3), np.sqrt(2.0 / (9 * cin)))
        bias = b.weight(f"conv{k}_b", (cout,), 0.05)
        x = b.node("Conv", [x, w, bias], f"conv{k}", pads=[1, 1, 1, 1])
        x = b.node("Relu", [x], f"relu{k}")
        x = b.node("MaxPool", [x], f"pool{k}", kernel_shape=list(pools[k]), strides=list(pools[k]))
    axes = b.const("squeeze_axes", np.array([2], np.int64))
    x = b.node("Squeeze", [x, axes], "features")  # (1, 512, T)
    x = b.node("Transpose", [x], "sequence", perm=[2, 0, 1])  # (T, 1, 512)
    x = _recurrent(b, "LSTM", x, "lstm1", FEATURES, HIDDEN)
    x = _recurrent(b, "LSTM", x, "lstm2", 2 * HIDDEN, HIDDEN)
    fc = b.weight("fc_w", (2 * HIDDEN, CLASSES), 1.0 / np.sqrt(2 * HIDDEN))
    x = b.node("MatMul", [x, fc], "logits")
    shape = (1, 1, 32, 4 * steps)
    model = _model(b, "crnn", "image", shape, x, (steps, 1, CLASSES))
    image = np.random.default_rng(seed + 1).random(shape, dtype=np.float32)
    return model, {"image": image}


def single_layer(
    op: str, steps: int, seed: int = 0
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One bidirectional ``op`` layer (input FEATURES, hidden HIDDEN) and a seeded input."""
    b = GraphBuilder(seed)
    y = _recurrent(b, op, "x", op.lower(), FEATURES, HIDDEN)
    shape = (steps, 1, FEATURES)
    model = _model(b, f"bi{op.lower()}", "x", shape, y, (steps, 1, 2 * HIDDEN))
    x = np.random.default_rng(seed + 1).standard_normal(shape).astype(np.float32)
    return model, {"x": x}


BUILDERS: dict[str, Callable[[int], tuple[onnx.ModelProto, dict[str, np.ndarray]]]] = {
    "crnn": crnn,
    "bilstm": lambda t: single_layer("LSTM", t),
    "bigru": lambda t: single_layer("GRU", t),
}


def measure(name: str, steps: int, repeat: int, profile: int) -> list[str]:
    """Build, check and time one model; return its table row."""
    import ember
    from ember.executor import AotExecutor, GraphExecutor
    from ember.testing import compile_onnx

    model, inputs = BUILDERS[name](steps)
    shapes = {k: v.shape for k, v in inputs.items()}
    dev = ember.cpu(0)
    ge = GraphExecutor(ember.load_artifacts(compile_onnx(model, shape=shapes), dev)["default"](dev))
    aot_artifacts = compile_onnx(model, shape=shapes, executor="aot")
    aot = AotExecutor(ember.load_artifacts(aot_artifacts, dev)["default"](dev))
    for ex in (ge, aot):
        for key, value in inputs.items():
            ex.set_input(key, value)
    session = ort_session(model.SerializeToString(), 1)
    (ref,) = session.run(None, inputs)
    ge.run()
    err = float(np.max(np.abs(ge.get_output(0).numpy() - ref)))

    def ort_run() -> object:
        return session.run(None, inputs)

    clocks = [time_clock()] * 3
    ge_s, aot_s, ort_s = interleaved_medians([ge.run, aot.run, ort_run], repeat, clocks=clocks)
    if profile:
        report = ge.profile(repeat=5)
        print(
            f"\n{name} T={steps}: {len(report.rows)} kernel calls, {report.total_us / 1e3:.2f} ms"
        )
        for op, calls, us, pct in report.by_op()[:profile]:
            print(f"  {pct:5.1f}%  {us / 1e3:8.3f} ms  {calls:4d}x  {op}")
    best = min(ge_s, aot_s)
    return [
        name,
        str(steps),
        f"{ge_s * 1e3:.3f}",
        f"{aot_s * 1e3:.3f}",
        f"{ort_s * 1e3:.3f}",
        f"{best / ort_s:.2f}",
        f"{err:.1e}",
    ]


def time_clock() -> Callable[[], float]:
    """The calling thread's CPU time (every engine runs on this one thread)."""
    import time

    return time.thread_time


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="crnn,bilstm,bigru", help="comma-separated")
    parser.add_argument("--steps", default="25,40", help="comma-separated sequence lengths")
    parser.add_argument("--repeat", type=int, default=30, help="timed rounds")
    parser.add_argument("--profile", type=int, default=0, help="print the K slowest kernels")
    args = parser.parse_args(argv)
    os.environ["EMBER_NUM_THREADS"] = "1"  # read once, at ember's first config() call
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        parser.error(f"unknown models {unknown}; known: {', '.join(BUILDERS)}")
    rows = []
    for name in names:
        for steps in (int(s) for s in args.steps.split(",")):
            rows.append(measure(name, steps, args.repeat, args.profile))
            print(f"  done {name} T={steps}", file=sys.stderr, flush=True)
    header = ["model", "T", "ember graph ms", "ember aot ms", "ort ms", "best/ort", "max err"]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\none thread, thread CPU time, median of {args.repeat}; load average {load:.2f}\n")
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
