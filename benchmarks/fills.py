"""Models whose weights are constant fills: ember against onnxruntime, one thread.

Run: ``.venv/bin/python benchmarks/fills.py [--models vgg19,resnet50] [--repeat 10]``.

The ``light`` models shipped with onnx (``onnx/backend/test/data/light/light_*.onnx``) make
every weight with ``ConstantOfShape``. This script compiles them as shipped (unlike
``ember.examples.models.light_model``, which replaces the fills by seeded random weights)
and times ember's graph executor and onnxruntime in interleaved rounds on one thread, by
the calling thread's CPU time; it prints the medians, their ratio and the build seconds.
Nothing is asserted: the script only reports.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import (  # noqa: E402
    interleaved_medians,
    markdown_table,  # noqa: E402
    ort_session,
)


def measure(name: str, repeat: int) -> list[str]:
    """Build, check and time the shipped ``light_<name>``; return its table row."""
    import ember
    from ember.examples.models import light_model_path
    from ember.executor import GraphExecutor
    from ember.testing import ORT_MAX_IR_VERSION, compile_onnx

    model = onnx.load(str(light_model_path(name)))
    model.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
    (inp,) = [
        i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}
    ]
    shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    start = time.perf_counter()
    artifacts = compile_onnx(model, shape={inp.name: shape})
    build_s = time.perf_counter() - start
    dev = ember.cpu(0)
    ge = GraphExecutor(ember.load_artifacts(artifacts, dev)["default"](dev))
    ge.set_input(inp.name, x)
    session = ort_session(model.SerializeToString(), 1)

    def ort_run() -> object:
        return session.run(None, {inp.name: x})

    ge.run()
    err = float(np.max(np.abs(ge.get_output(0).numpy() - ort_run()[0])))  # type: ignore[index]
    clocks = [time.thread_time] * 2
    ember_s, ort_s = interleaved_medians([ge.run, ort_run], repeat, clocks=clocks)
    return [
        f"light_{name}",
        f"{build_s:.1f}",
        f"{ember_s * 1e3:.1f}",
        f"{ort_s * 1e3:.1f}",
        f"{ember_s / ort_s:.2f}",
        f"{err:.1e}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="vgg19,resnet50", help="comma-separated light models")
    parser.add_argument("--repeat", type=int, default=10, help="timed rounds")
    args = parser.parse_args(argv)
    os.environ["EMBER_NUM_THREADS"] = "1"  # read once, at ember's first config() call
    rows = [measure(n, args.repeat) for n in args.models.split(",") if n]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\none thread, thread CPU time, median of {args.repeat}; load average {load:.2f}\n")
    header = ["model", "ember build s", "ember ms", "ort ms", "ember/ort", "max err"]
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
