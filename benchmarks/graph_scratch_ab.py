"""A/B of planned kernel scratch in graph builds: the per-call build, the planned one, AOT.

For every model of ``--models`` it builds the graph executor's build twice, with kernel
scratch allocated per call (``ember.driver.pipeline.plan_graph_scratch`` replaced by the
identity for that build) and planned (the default), plus the AOT build; checks that the
three give the same bits; then times them at 1 thread by thread CPU time in ONE run of
interleaved rounds (models.py's ``interleaved_timings``; the AOT run called from C too)
and prints the medians in ms with the executor's shared scratch buffer.

    .venv/bin/python benchmarks/graph_scratch_ab.py --models yolo,crnn --repeat 41
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import interleaved_timings, native_run  # noqa: E402

import ember  # noqa: E402
import ember.driver.pipeline as pipeline  # noqa: E402
from ember.examples.models import make_model  # noqa: E402
from ember.formats.graph_memory import scratch_size  # noqa: E402
from ember.runtime import set_num_threads  # noqa: E402
from ember.testing import compile_onnx  # noqa: E402

MODES = ("per-call", "planned", "aot")


def _executor(case: Any, mode: str) -> Any:
    planned = pipeline.plan_graph_scratch
    if mode == "per-call":
        pipeline.plan_graph_scratch = lambda graph, funcs, _align: (graph, tuple(funcs))
    try:
        executor = "aot" if mode == "aot" else "graph"
        arts = compile_onnx(case.model, shape=case.shapes, target="c", executor=executor)
    finally:
        pipeline.plan_graph_scratch = planned
    dev = ember.cpu(0)
    factory = ember.load_artifacts(arts, dev)["default"](dev)
    return ember.AotExecutor(factory) if mode == "aot" else ember.GraphExecutor(factory)


def measure(name: str, repeat: int) -> str:
    """One line for model ``name``."""
    case = make_model(name)
    exs = {mode: _executor(case, mode) for mode in MODES}
    outs = {}
    for mode, ex in exs.items():
        ex.set_input(**case.inputs)
        ex.run()
        outs[mode] = [ex.get_output(i).numpy().tobytes() for i in range(ex.get_num_outputs())]
    same = outs["per-call"] == outs["planned"] == outs["aot"]
    entries = [((lambda: None), exs[mode].run) for mode in MODES]
    from_c = native_run(exs["aot"])
    if from_c is not None:
        entries.append(((lambda: None), from_c))
    ms = [t.cpu * 1e3 for t in interleaved_timings(entries, repeat)]
    scratch = scratch_size(exs["planned"].module.graph) / (1 << 20)
    line = (
        f"{name}: bitwise {same}; shared scratch {scratch:.2f} MiB; 1-thread CPU ms per-call "
        f"{ms[0]:.4f} planned {ms[1]:.4f} ({ms[1] / ms[0]:.3f}) aot {ms[2]:.4f}"
    )
    return line + (f" aot from C {ms[3]:.4f}" if len(ms) > 3 else "")


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per model."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="yolo,crnn,dbnet,resnet50,resnet8")
    parser.add_argument("--repeat", type=int, default=41, help="timed rounds")
    args = parser.parse_args(argv)
    set_num_threads(1)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in [n for n in args.models.split(",") if n]:
        print(measure(name, args.repeat), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
