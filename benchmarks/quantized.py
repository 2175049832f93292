"""The quantized model zoo: ember int8 next to onnxruntime int8 and ember float32, in one run.

Run: ``.venv/bin/python benchmarks/quantized.py [--models resnet50,mobilenet_v2,bert]
[--modes static,dynamic,qoperator] [--repeat 10] [--threads 1]``. For every model of
``ember.examples.models.MODELS`` named (default: resnet50, mobilenet_v2, bert) and every
quantization mode it

* quantizes the float model with ``onnxruntime.quantization`` (``static``: QDQ, uint8
  activations, int8 per-channel weights, MinMax calibration on 8 seeded inputs;
  ``qoperator``: the same calibration in onnxruntime's QOperator form, QLinearConv and
  the com.microsoft QLinearAdd, QGemm, QLinearSoftmax, ...;
  ``dynamic``: int8 weights, activations quantized at run time; see
  ``ember.testing.quantize``),
* compiles the float and the quantized model with ember (C target, graph executor) and
  opens onnxruntime sessions of the quantized model (all optimizations on: its QDQ
  transformer makes QLinearConv/QLinearMatMul of the chains),
* checks ember's int8 outputs against onnxruntime's (fraction of elements within one
  quantization step),
* times ember int8, onnxruntime int8 and ember float32 in interleaved rounds (a burst of
  load from other processes hits all three alike) and prints the medians and the ratios
  ``ort int8 / ember int8`` (above 1: ember is faster) and ``ember fp32 / ember int8``
  (the speed-up quantization gives ember).

Nothing is asserted: the script only reports. A model that fails to quantize, compile or run is
listed after the table (exit status 1); the other rows are kept.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# loaded by file path (the tests do), this folder is not on sys.path unless we put it there
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import (  # noqa: E402
    clock_for,
    interleaved_medians,
    machine,
    markdown_table,
    ort_session,
)
from bench_common import load_average as _load  # noqa: E402

from ember.errors import EmberError  # noqa: E402

HEADER = [
    "model",
    "mode",
    "ember int8 ms",
    "ort int8 ms",
    "ember fp32 ms",
    "ort/ember int8",
    "fp32/int8 ember",
    "within 1 step",
]

#: model name in the benchmark -> name in ember.examples.models.MODELS.
DEFAULT_MODELS = {"resnet50": "resnet50", "mobilenet_v2": "mobilenet_v2", "bert": "bert"}


@dataclass(frozen=True)
class Row:
    """One model and mode (seconds)."""

    name: str
    mode: str
    ember_int8_s: float
    ort_int8_s: float
    ember_fp32_s: float
    agreement: float

    def cells(self) -> list[str]:
        """The table cells."""
        return [
            self.name,
            self.mode,
            f"{self.ember_int8_s * 1e3:.2f}",
            f"{self.ort_int8_s * 1e3:.2f}",
            f"{self.ember_fp32_s * 1e3:.2f}",
            f"{self.ort_int8_s / self.ember_int8_s:.2f}",
            f"{self.ember_fp32_s / self.ember_int8_s:.2f}",
            f"{self.agreement * 100:.2f}%",
        ]


def _executor(model: object, shapes: dict[str, tuple[int, ...]]) -> object:
    import ember
    from ember.executor import GraphExecutor
    from ember.testing import compile_onnx

    dev = ember.cpu(0)
    artifacts = compile_onnx(model, shape=shapes, target="c")
    return GraphExecutor(ember.load_artifacts(artifacts, dev)["default"](dev))


def measure(name: str, mode: str, repeat: int, cpu_clock: bool, threads: int = 0) -> Row:
    """Quantize, compile, check and time one model in one mode (ember at ``threads``
    threads; 0: ``EMBER_NUM_THREADS`` or every core)."""
    from ember.examples.models import make_model
    from ember.runtime import set_num_threads
    from ember.testing import ORT_MAX_IR_VERSION
    from ember.testing.quantize import (
        output_step,
        quantization_step_agreement,
        quantize_dynamic,
        quantize_static,
    )

    case = make_model(DEFAULT_MODELS.get(name, name))
    fp32 = case.model
    fp32.ir_version = min(fp32.ir_version, ORT_MAX_IR_VERSION)
    if mode == "dynamic":
        q = quantize_dynamic(fp32)
    else:
        q = quantize_static(fp32, case.inputs, qoperator=mode == "qoperator")
    q.ir_version = min(q.ir_version, ORT_MAX_IR_VERSION)
    ge_q, ge_f = _executor(q, case.shapes), _executor(fp32, case.shapes)
    for key, value in case.inputs.items():
        ge_q.set_input(key, value)  # type: ignore[attr-defined]
        ge_f.set_input(key, value)  # type: ignore[attr-defined]
    session = ort_session(q.SerializeToString(), 1)
    ge_q.run()  # type: ignore[attr-defined]
    ours = [ge_q.get_output(i).numpy() for i in range(ge_q.get_num_outputs())]  # type: ignore[attr-defined]
    ref = session.run(None, case.inputs)
    agree = min(
        quantization_step_agreement(a, b, output_step(q, o.name) or float(np.ptp(b)) / 255)
        for a, b, o in zip(ours, ref, q.graph.output, strict=True)
    )
    threads = threads or int(os.environ.get("EMBER_NUM_THREADS", "0")) or (os.cpu_count() or 1)
    set_num_threads(threads)
    runners = [ge_q.run, lambda: session.run(None, case.inputs), ge_f.run]  # type: ignore[attr-defined]
    clocks = [clock_for(threads, cpu_clock), clock_for(1, cpu_clock), clock_for(threads, cpu_clock)]
    e8, o8, e32 = interleaved_medians(runners, repeat, clocks=clocks)
    return Row(name, mode, e8, o8, e32, agree)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure every model and mode, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated")
    parser.add_argument(
        "--modes", default="static,dynamic", help="static, qoperator and/or dynamic"
    )
    parser.add_argument("--repeat", type=int, default=10, help="timed rounds")
    parser.add_argument("--threads", type=int, default=1, help="ember's threads (ORT uses 1)")
    parser.add_argument("--cpu-clock", action="store_true", help="thread CPU time, 1 thread")
    args = parser.parse_args(argv)
    os.environ["EMBER_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory(prefix="ember-qbench-") as tmp:
        os.environ.setdefault("EMBER_CACHE_DIR", tmp)
        print(
            f"machine: {machine()}; ember threads {args.threads}, onnxruntime 1; "
            f"repeat {args.repeat}; load average {_load()}"
        )
        rows, failed = [], []
        for name in [m for m in args.models.split(",") if m]:
            for mode in [m for m in args.modes.split(",") if m]:
                try:
                    rows.append(measure(name, mode, args.repeat, args.cpu_clock))
                except EmberError as err:  # one model's failure loses no other row
                    failed.append(f"{name} {mode}: {type(err).__name__}: {err}".split("\n")[0])
                    print(f"  FAILED {failed[-1]}", file=sys.stderr, flush=True)
                    continue
                print(
                    f"  done {name} {mode}: {' | '.join(rows[-1].cells()[2:])}",
                    file=sys.stderr,
                    flush=True,
                )
        print(f"\n{markdown_table(HEADER, [r.cells() for r in rows])}\n")
        for line in failed:
            print(f"failed: {line}")
        print(f"load average at the end: {_load()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
