"""Real models: ember's compile time and latency next to onnxruntime's, in one process.

Run: ``.venv/bin/python benchmarks/models.py [--models squeezenet,bert] [--repeat 20]``.
For every model of ``ember.examples.models.MODELS`` (or the ``--models`` filter) it prints

* ember build seconds (graph IR -> artifacts) and load seconds (C compile + link + load,
  with a fresh artifact cache unless ``--keep-cache``, so the C compiler's time is counted),
* ember's median latency of ``run`` under the graph executor and under the AOT executor
  (the same kernels, one native call; EMBER_NUM_THREADS workers; inputs set beforehand,
  outputs left in place),
* onnxruntime's median latency of ``run`` with ``intra_op_num_threads`` 1 and 2 (all
  graph optimizations on, the CPU provider, no spinning between runs; this includes
  copying inputs and outputs), timed in interleaved rounds with ember's,
* the ratios ember / onnxruntime (above 1: ember is slower).

Outputs are checked against onnxruntime first (a wrong answer has no latency).
``--profile K`` also prints each model's K slowest ember kernels from the graph
executor's ``profile()``. ``--cpu-clock`` times single-threaded runs by the calling
thread's CPU time, so that other processes preempting it do not count (a machine shared
by many jobs); multi-threaded runs are always wall time. Nothing is asserted: the script
only reports.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# loaded by file path (the tests do), this folder is not on sys.path unless we put it there
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import markdown_table  # noqa: E402


@dataclass(frozen=True)
class TargetTimes:
    """A further target's build, load and graph-executor latency (seconds)."""

    target: str
    build_s: float
    load_s: float
    ember_s: float

    def cells(self, first_s: float) -> list[str]:
        """Its printed cells: build, load, latency and latency over the first target's."""
        return [
            f"{self.build_s:.2f}",
            f"{self.load_s:.2f}",
            f"{self.ember_s * 1e3:.2f}",
            f"{self.ember_s / first_s:.2f}",
        ]


def target_header(first: str, target: str) -> list[str]:
    """The header cells of a further target's columns (see TargetTimes.cells)."""
    return [f"{target} build s", f"{target} cc+load s", f"{target} ms", f"{target}/{first}"]


@dataclass(frozen=True)
class Row:
    """One model's measurements (seconds)."""

    name: str
    build_s: float
    load_s: float
    ember_s: float
    aot_s: float
    ort1_s: float
    ort2_s: float
    max_err: float
    gflop: float
    others: tuple[TargetTimes, ...] = ()

    def cells(self) -> list[str]:
        """The printed cells of this row."""
        extra = [c for t in self.others for c in t.cells(self.ember_s)]
        return [
            self.name,
            f"{self.build_s:.2f}",
            f"{self.load_s:.2f}",
            f"{self.ember_s * 1e3:.2f}",
            f"{self.aot_s * 1e3:.2f}",
            f"{self.ort1_s * 1e3:.2f}",
            f"{self.ort2_s * 1e3:.2f}",
            f"{self.ember_s / self.ort1_s:.2f}",
            f"{self.ember_s / self.ort2_s:.2f}",
            f"{self.gflop:.2f}",
            f"{self.gflop / self.ember_s:.1f}",
            f"{self.gflop / self.ort1_s:.1f}",
            f"{self.max_err:.1e}",
            *extra,
        ]


HEADER = [
    "model",
    "build s",
    "cc+load s",
    "ember ms",
    "aot ms",
    "ort1 ms",
    "ort2 ms",
    "ember/ort1",
    "ember/ort2",
    "GFLOP",
    "ember GFLOP/s",
    "ort1 GFLOP/s",
    "max |err|",
]


def interleaved_medians(
    fns: Sequence[Callable[[], object]],
    repeat: int,
    warmup: int = 2,
    clocks: Sequence[Callable[[], float]] | None = None,
) -> list[float]:
    """Median time of each of ``fns`` over ``repeat`` rounds that call each once.

    Interleaving makes a burst of load from other processes hit every engine alike.
    ``clocks`` gives each function its clock (default: wall time for all).
    """
    timers = list(clocks) if clocks is not None else [time.perf_counter] * len(fns)
    for fn in fns:
        for _ in range(warmup):
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            clock = timers[k]
            start = clock()
            fn()
            times[k].append(clock() - start)
    return [statistics.median(t) for t in times]


def clock_for(threads: int, cpu_clock: bool) -> Callable[[], float]:
    """The calling thread's CPU time for a single-threaded engine when ``cpu_clock`` (so
    that other processes preempting it do not count), else wall time."""
    return time.thread_time if cpu_clock and threads == 1 else time.perf_counter


def ort_session(model_bytes: bytes, threads: int) -> Any:
    """An onnxruntime CPU session with ``threads`` intra-op threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # onnxruntime's pool threads spin after a run by default, taking a core from whatever
    # runs next: in interleaved rounds that doubled ember's resnet50 time (12x bert's).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])


def _build(model: Any, shapes: Any, target: str, executor: str = "graph") -> tuple[Any, float]:
    """Artifacts of ``model`` for ``target`` and the seconds the build took."""
    from ember.testing import compile_onnx

    start = time.perf_counter()
    artifacts = compile_onnx(model, shape=shapes, target=target, executor=executor)
    return artifacts, time.perf_counter() - start


def _graph_executor(artifacts: Any) -> tuple[Any, float]:
    """A graph executor over loaded ``artifacts`` and the seconds loading took."""
    import ember
    from ember.executor import GraphExecutor

    dev = ember.cpu(0)
    start = time.perf_counter()
    ge = GraphExecutor(ember.load_artifacts(artifacts, dev)["default"](dev))
    return ge, time.perf_counter() - start


def measure(
    name: str,
    repeat: int,
    profile: int,
    cpu_clock: bool = False,
    targets: Sequence[str] = ("c",),
) -> Row:
    """Compile, check and time one example model with both engines (ember for every target
    of ``targets``: the first with the graph and AOT executors, the others with the graph
    executor, all interleaved with onnxruntime)."""
    import ember
    from ember.examples.models import make_model
    from ember.executor import AotExecutor
    from ember.testing import ORT_MAX_IR_VERSION

    case = make_model(name)
    model = case.model
    model.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
    first = targets[0]
    artifacts, build_s = _build(model, case.shapes, first)
    ge, load_s = _graph_executor(artifacts)
    aot_artifacts, _ = _build(model, case.shapes, first, executor="aot")
    dev = ember.cpu(0)
    aot = AotExecutor(ember.load_artifacts(aot_artifacts, dev)["default"](dev))
    others = []
    for target in targets[1:]:
        more, more_build_s = _build(model, case.shapes, target)
        more_ge, more_load_s = _graph_executor(more)
        others.append((target, more_build_s, more_load_s, more_ge))
    executors = [ge, aot, *(o[3] for o in others)]
    for key, value in case.inputs.items():
        for ex in executors:
            ex.set_input(key, value)

    sessions = {n: ort_session(model.SerializeToString(), n) for n in (1, 2)}
    ref = sessions[1].run(None, case.inputs)
    max_err = 0.0
    for ex in [ge, *(o[3] for o in others)]:
        ex.run()
        ours = [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]
        err = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, ref, strict=True))
        max_err = max(max_err, err)

    runners = [ge.run, aot.run, _runner(sessions[1], case.inputs)]
    runners.append(_runner(sessions[2], case.inputs))
    runners.extend(o[3].run for o in others)
    ember_threads = int(os.environ.get("EMBER_NUM_THREADS", "0")) or (os.cpu_count() or 1)
    threads = [ember_threads, ember_threads, 1, 2, *[ember_threads] * len(others)]
    clocks = [clock_for(n, cpu_clock) for n in threads]
    times = interleaved_medians(runners, repeat, clocks=clocks)
    ember_s, aot_s, ort1_s, ort2_s = times[:4]
    extra = tuple(
        TargetTimes(t, b, ld, s) for (t, b, ld, _), s in zip(others, times[4:], strict=True)
    )
    if profile > 0:
        print_profile(name, ge, profile, repeat)
    gflop = model_gflop(model)
    return Row(name, build_s, load_s, ember_s, aot_s, ort1_s, ort2_s, max_err, gflop, extra)


def print_profile(name: str, ge: Any, top: int, repeat: int) -> None:
    """Print the ``top`` slowest kernels of ``ge``'s per-operator profile."""
    report = ge.profile(repeat=max(5, repeat))
    print(f"\n{name}: {len(report.rows)} kernel calls, {report.total_us / 1e3:.2f} ms")
    shapes: dict[str, tuple[tuple[int, ...], ...]] = {}
    for row in report.rows:
        shapes.setdefault(row.op, row.shape)
    for op, calls, us, pct in report.by_op()[:top]:
        out = " ".join("x".join(map(str, s)) for s in shapes[op])
        print(f"  {pct:5.1f}%  {us / 1e3:8.3f} ms  {calls:3d}x  {op} -> {out}")
    sys.stdout.flush()


def model_gflop(model: Any) -> float:
    """Floating-point work of Conv, Gemm and MatMul nodes (2 per multiply-add), in GFLOP."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value for d in dims]
    flops = 0
    for node in graph.node:
        out = shapes.get(node.output[0], [])
        if node.op_type == "Conv":  # out N x M x spatial; weight M x C/g x kernel
            weight = shapes[node.input[1]]
            flops += 2 * _prod(out) * _prod(weight[1:])
        elif node.op_type in ("Gemm", "MatMul"):  # out ... x N; reduce over A's last axis
            a = shapes[node.input[0]]
            trans_a = any(x.name == "transA" and x.i for x in node.attribute)
            flops += 2 * _prod(out) * (a[0] if trans_a else a[-1])
    return flops / 1e9


def _prod(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _runner(session: Any, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
    def run() -> object:
        return session.run(None, inputs)

    return run


def format_table(rows: Sequence[Row], targets: Sequence[str] = ("c",)) -> str:
    """A markdown table of ``rows`` (so that docs/performance.md can take it verbatim)."""
    header = HEADER + [c for t in targets[1:] for c in target_header(targets[0], t)]
    return markdown_table(header, [r.cells() for r in rows])


def machine() -> str:
    """``<n> cores, <CPU model>`` of this machine."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}"


def warm_up() -> None:
    """Build the C runtime once, so the first model's load time is only its own compile."""
    from onnx import TensorProto, helper

    from ember.testing import run_onnx_compiled

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "warm_up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    run_onnx_compiled(model, {"x": np.ones(4, np.float32)})


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure every selected model, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per engine")
    parser.add_argument("--profile", type=int, default=0, help="print the K slowest kernels")
    parser.add_argument(
        "--threads", type=int, default=None, help="ember's worker threads (EMBER_NUM_THREADS)"
    )
    parser.add_argument(
        "--cpu-clock",
        action="store_true",
        help="time single-threaded runs by the thread's CPU time (robust on a busy machine)",
    )
    parser.add_argument(
        "--targets",
        default="c",
        help="comma-separated ember target strings (default: c); the first also runs AOT, "
        "the others add columns, e.g. --targets c,llvm",
    )
    parser.add_argument(
        "--keep-cache", action="store_true", help="reuse ember's artifact cache (faster loads)"
    )
    args = parser.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()] or ["c"]
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        if args.threads is not None:  # like the cache directory: read once, at first use
            os.environ["EMBER_NUM_THREADS"] = str(args.threads)
        if not args.keep_cache:
            os.environ["EMBER_CACHE_DIR"] = tmp  # read once, at ember's first config() call
        from ember.examples.models import MODELS

        names = [n for n in args.models.split(",") if n] or MODELS.names()
        for name in names:
            MODELS.get(name)  # an unknown name fails before any work, listing the known ones
        warm_up()
        threads = os.environ.get("EMBER_NUM_THREADS", "0")
        clock = "thread CPU time for 1-thread runs" if args.cpu_clock else "wall"
        print(
            f"machine: {machine()}; ember threads: {threads} (0: one per core); "
            f"repeat {args.repeat}; clock: {clock}; load average {_load()}"
        )
        rows = []
        for name in names:
            rows.append(measure(name, args.repeat, args.profile, args.cpu_clock, targets))
            print(f"  done {name}", file=sys.stderr, flush=True)
        print(f"\n{format_table(rows, targets)}\n\nload average at the end: {_load()}")
    return 0


def _load() -> str:
    """The 1-minute load average: other processes on the machine distort every timing."""
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


if __name__ == "__main__":
    sys.exit(main())
