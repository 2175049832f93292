"""Real models: ember's compile time and speed next to onnxruntime's, in one process.

Run: ``.venv/bin/python benchmarks/models.py [--zoo | --models a,b] [--repeat 20]
[--cpu-clock] [--noisy]``. For every model of ``ember.examples.models.MODELS`` (``--zoo``:
the zoo of issue 12, ``ember.examples.models.ZOO``; ``--models``: a list) it prints

* ember build seconds (graph IR -> artifacts) and load seconds (C compile + link + load,
  with a fresh artifact cache unless ``--keep-cache``, so the C compiler's time is counted),
* from ONE run of interleaved rounds (each round calls every engine once, so a burst of
  load from other processes hits them alike; the order rotates every round; each timed
  call follows an untimed call of the same engine, see interleaved_timings): the median
  time of ember's graph executor and AOT executor (the same kernels, one native call;
  inputs set beforehand, outputs left in place), of the AOT run function called from C
  (``aotC``: the clocks read in C around the call, no Python; native_timer.py) and of
  onnxruntime's ``run`` (all graph
  optimizations, the CPU provider, no spinning between runs; includes copying inputs and
  outputs), each at 1 thread and at ``--threads`` threads (default 2; ember's count set by
  ``ember.runtime.set_num_threads`` before each call, untimed; onnxruntime's
  ``intra_op_num_threads``),
* onnxruntime at ``--threads`` threads as it runs by default, its pool threads spinning
  between runs (``ort2spin``), against ember's AOT run at the same count in a pass of their
  own (each timed call after SPIN_SETTLE_S of untimed calls of the same engine, so that
  onnxruntime's spinning threads are not timed against ember: on the tiny models the
  spinning halves onnxruntime's 2-thread time),
* each executor's overhead at 1 thread: its time minus the AOT run timed from C (which is
  the kernels plus a status check per call: the same kernels, called from C; the graph
  executor pays a ctypes call per kernel, the AOT executor one for the whole run),
* the ratios onnxruntime / ember with ember's best executor (above 1: ember is faster;
  issue 12's orientation), and their geometric means over the models run,
* GFLOP (2 x the multiply-adds of Conv, ConvTranspose, Gemm, MatMul, with shapes from
  ONNX shape inference) and each engine's GFLOP/s as a percentage of the FMA limit
  (one core's at 1 thread, ``threads`` cores' otherwise; ``bench_host.py`` has the
  formula and measures the clock).

Outputs are checked against onnxruntime first (a wrong answer has no latency).
``--pause-ms P`` times every call after a pause of P ms instead of right after a call of the
same engine: cold runs, as of a model invoked now and then (the graph executor's Python
state goes cold with the caches; the AOT run has little of it).
``--cpu-clock`` times the 1-thread runs by the calling thread's CPU time, so that other
processes preempting it do not count (a machine shared by many jobs); multi-threaded
runs are always wall time. ``--noisy`` starts one bounded busy process pinned to the last
core for the whole run and adds a column: ember's best wall time at ``--threads``
threads over its best wall time at 1 thread (issue 12: at most 1.3; one run is one draw:
``noisy_runs.py`` gives its distribution over trials, per pool policy). ``--profile K``
also prints each model's K slowest ember kernels. ``--quantized static[,dynamic]`` adds the
int8 table of issue 16 for the selected models among resnet50, mobilenet_v2 and bert
(``quantized.py``'s measurement: ember int8, onnxruntime int8 and ember float32 at 1
thread, interleaved, with the share of outputs within one quantization step).
``--targets c,llvm`` adds, per further target, build and load seconds and its 1-thread
graph-executor latency over the first target's, both timed in a run of their own whose
order rotates every round (``compare_targets``). Nothing is asserted: the script only
reports.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

# loaded by file path (the tests do), this folder is not on sys.path unless we put it there
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import load_average as _load  # noqa: E402
from bench_common import (  # noqa: E402
    machine,
    markdown_table,
    ort_session,
    rotated_medians,
)
from bench_host import (  # noqa: E402
    FmaLimit,
    busy_alive,
    busy_process,
    core_round_trip,
    fma_limit,
)
from bench_report import Row, TargetTimes, Timing, format_table, summary  # noqa: E402
from native_timer import NativeTimer  # noqa: E402
from quantized import DEFAULT_MODELS as INT8_MODELS  # noqa: E402
from quantized import HEADER as INT8_HEADER  # noqa: E402
from quantized import measure as measure_int8  # noqa: E402

#: an engine to time: an untimed setup (e.g. set the thread count) and the timed call.
Entry = tuple[Callable[[], object], Callable[[], object]]


#: untimed calls of each entry before the rounds, at least WARMUP_S long: ember's run
#: governor tries a model's first runs at 2+ threads with the pool and on the caller alone
#: (src/pool_govern.h: 10 runs, more when runs are under 0.3 ms: up to about 0.7 ms); the
#: rounds time the steady state that follows, as a server sees it.
WARMUP_CALLS = 16
WARMUP_S = 0.01


def interleaved_timings(
    entries: Sequence[Entry],
    repeat: int,
    warmup: int = WARMUP_CALLS,
    settle: bool = True,
    pause_s: float = 0.0,
    settle_s: float = 0.0,
) -> list[Timing]:
    """Median wall and thread CPU time of each entry's call over ``repeat`` rounds that
    run every entry once (its setup first, untimed), the order rotating every round.

    What ran just before a call changes its time: the call right after a 2-thread engine
    and a short pause runs slow (1.3-1.6x on 0.05 ms models, docs/llvm.md), and ember at
    2 threads after a pause starts with its pool's worker asleep. Rotating the order does
    not change which entry precedes which (graph2 always followed ort1, aot2 always graph2),
    so with ``settle`` each timed call comes right after an untimed call of the same entry:
    every entry is timed warm, whatever its neighbours. With ``pause_s`` each timed call
    follows a pause of that many seconds instead (untimed): a model invoked now and then,
    as a keyword spotter is, with the caches and the pool's workers gone cold. With
    ``settle_s`` the untimed calls before each timed one go on for that many seconds. An entry
    whose call returns a
    :class:`Timing` timed itself (a run timed from C): that is its time."""
    for setup, fn in entries:
        setup()
        until = time.perf_counter() + WARMUP_S if warmup > 0 else 0.0
        for k in itertools.count():
            if k >= warmup and (warmup == 0 or time.perf_counter() >= until):
                break
            fn()
    walls: list[list[float]] = [[] for _ in entries]
    cpus: list[list[float]] = [[] for _ in entries]
    for r in range(repeat):
        for k in [(r + j) % len(entries) for j in range(len(entries))]:
            setup, fn = entries[k]
            setup()
            if pause_s > 0:
                time.sleep(pause_s)
            elif settle:
                until = time.perf_counter() + settle_s if settle_s > 0 else 0.0
                fn()
                while settle_s > 0 and time.perf_counter() < until:
                    fn()
            wall, cpu = time.perf_counter(), time.thread_time()
            result = fn()
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
            if isinstance(result, Timing):
                wall, cpu = result.wall, result.cpu
            cpus[k].append(cpu)
            walls[k].append(wall)
    return [
        Timing(statistics.median(w), statistics.median(c)) for w, c in zip(walls, cpus, strict=True)
    ]


def _build(model: Any, shapes: Any, target: str, executor: str = "graph") -> tuple[Any, float]:
    """Artifacts of ``model`` for ``target`` and the seconds the build took."""
    from ember.testing import compile_onnx

    start = time.perf_counter()
    artifacts = compile_onnx(model, shape=shapes, target=target, executor=executor)
    return artifacts, time.perf_counter() - start


def _load_executor(artifacts: Any, aot: bool = False) -> tuple[Any, float]:
    """A graph (or AOT) executor over loaded ``artifacts`` and the seconds loading took."""
    import ember
    from ember.executor import AotExecutor, GraphExecutor

    dev = ember.cpu(0)
    start = time.perf_counter()
    factory = ember.load_artifacts(artifacts, dev)["default"](dev)
    ex = AotExecutor(factory) if aot else GraphExecutor(factory)
    return ex, time.perf_counter() - start


def _ember_entry(run: Callable[[], object], threads: int) -> Entry:
    from ember.runtime import set_num_threads

    return (lambda: set_num_threads(threads)), run


_TIMER: list[tuple[tempfile.TemporaryDirectory[str], NativeTimer]] = []


def native_run(aot: Any) -> Callable[[], Timing] | None:
    """The AOT executor's run function called once from C, timed there (native_timer.py);
    None when it has no C entry."""
    if not _TIMER:
        folder = tempfile.TemporaryDirectory(prefix="ember-bench-timer-")
        _TIMER.append((folder, NativeTimer(folder.name)))
    run = _TIMER[0][1].timed(aot.module.native_call())
    if run is None:
        return None

    def timed() -> Timing:
        wall, cpu = run()
        return Timing(wall, cpu)

    return timed


def measure(
    name: str,
    repeat: int,
    profile: int,
    cpu_clock: bool = False,
    targets: Sequence[str] = ("c",),
    threads: int = 2,
    limit: FmaLimit | None = None,
    pause_ms: float = 0.0,
) -> Row:
    """Compile, check and time one example model: ember's graph and AOT executors for the
    first of ``targets`` and onnxruntime at 1 and ``threads`` threads in one interleaved
    run, then every target's graph executor at 1 thread in a rotated run of their own."""
    from ember.examples.models import make_model
    from ember.testing import ORT_MAX_IR_VERSION

    case = make_model(name)
    model = case.model
    model.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
    first = targets[0]
    artifacts, build_s = _build(model, case.shapes, first)
    ge, load_s = _load_executor(artifacts)
    aot, _ = _load_executor(_build(model, case.shapes, first, executor="aot")[0], aot=True)
    others = []
    for target in targets[1:]:
        more, more_build_s = _build(model, case.shapes, target)
        more_ge, more_load_s = _load_executor(more)
        others.append((target, more_build_s, more_load_s, more_ge))
    executors = [ge, aot, *(o[3] for o in others)]
    for key, value in case.inputs.items():
        for ex in executors:
            ex.set_input(key, value)

    sessions = {n: ort_session(model.SerializeToString(), n) for n in sorted({1, threads})}
    ref = sessions[1].run(None, case.inputs)
    max_err = 0.0
    for ex in executors:
        ex.run()
        ours = [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]
        err = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, ref, strict=True))
        max_err = max(max_err, err)

    from_c = native_run(aot)
    runs = {"graph": ge.run, "aot": aot.run, "aotc": from_c}
    engines = ("graph", "aot", "aotc", "ort") if from_c is not None else ("graph", "aot", "ort")
    keys = [(e, n) for n in (1, threads) for e in engines]
    entries = [
        _ember_entry(runs[e], n)  # type: ignore[arg-type]
        if e != "ort"
        else ((lambda: None), _runner(sessions[n], case.inputs))
        for e, n in keys
    ]
    timings = interleaved_timings(entries, repeat, pause_s=pause_ms / 1e3)
    times = dict(zip(keys, timings, strict=False))
    choices = "/".join(_thread_choice(ex, threads) for ex in (ge, aot))
    if threads > 1 and pause_ms <= 0:
        run_s = max(times[("aot", threads)].wall, times[("aot", 1)].wall)
        times.update(_spinning_pass(model, case.inputs, aot.run, threads, repeat, run_s))
    extra = compare_targets(ge, others, repeat, cpu_clock)
    flops = node_flops(model)
    if profile > 0:
        print_profile(name, ge, profile, repeat, flops, limit or fma_limit())
    gflop = sum(flops.values()) / 1e9
    return Row(name, build_s, load_s, times, threads, cpu_clock, max_err, gflop, extra, choices)


def _thread_choice(executor: Any, threads: int) -> str:
    """What the run governor used for ``executor``'s runs at ``threads``: the pool or the
    calling thread alone ("-": not governed)."""
    choice = executor.thread_choice(threads)
    if choice is None:
        return "-"
    return "pool" if choice["parallel"] else "alone"


def compare_targets(
    first: Any, others: Sequence[tuple[str, float, float, Any]], repeat: int, cpu_clock: bool
) -> tuple[TargetTimes, ...]:
    """The further targets' 1-thread graph executors timed against the first target's in a
    run of their own, the order rotating every round (bench_common.rotated_medians): in the
    main run the extra column always came right after onnxruntime at 2 threads, and that
    position alone made any back end, c included, read 1.3-1.45x slow on 0.05-0.2 ms
    models. ``others``: (target, build s, load s, graph executor)."""
    from ember.runtime import set_num_threads

    if not others:
        return ()
    set_num_threads(1)
    clock = time.thread_time if cpu_clock else time.perf_counter
    medians = rotated_medians([first.run, *(o[3].run for o in others)], repeat, clock)
    return tuple(
        TargetTimes(target, build_s, load_s, seconds, medians[0])
        for (target, build_s, load_s, _), seconds in zip(others, medians[1:], strict=True)
    )


def print_profile(
    name: str, ge: Any, top: int, repeat: int, flops: dict[str, int], limit: FmaLimit
) -> None:
    """Print the ``top`` slowest kernels of ``ge``'s per-operator profile at 1 thread, each
    with its GFLOP/s as a percentage of one core's FMA limit when it does such work (the
    ONNX nodes fused into it, ``flops`` from node_flops)."""
    from ember.runtime import num_threads

    with num_threads(1):
        report = ge.profile(repeat=max(5, repeat), clock="thread")
    print(
        f"\n{name} (1 thread, thread CPU time): {len(report.rows)} kernel calls, "
        f"{report.total_us / 1e3:.2f} ms"
    )
    shapes: dict[str, tuple[tuple[int, ...], ...]] = {}
    work: dict[str, int] = {}
    for row in report.rows:
        shapes.setdefault(row.op, row.shape)
        work[row.op] = work.get(row.op, 0) + sum(flops.get(n, 0) for n in row.onnx_nodes)
    for op, calls, us, pct in report.by_op()[:top]:
        out = " ".join("x".join(map(str, s)) for s in shapes[op])
        fma = f"{100 * work[op] / (us * 1e3) / limit.gflops:3.0f}% FMA" if work[op] else " " * 8
        print(f"  {pct:5.1f}%  {us / 1e3:8.3f} ms  {calls:3d}x  {fma}  {op} -> {out}")
    sys.stdout.flush()


def node_flops(model: Any) -> dict[str, int]:
    """Floating-point work per node name of Conv, ConvTranspose, Gemm and MatMul nodes (2
    per multiply-add, shapes from ONNX shape inference); other nodes count 0."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)  # Reshape(x, Shape(y))
    graph = inferred.graph
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for info in [*graph.input, *graph.value_info, *graph.output]:
        dims = info.type.tensor_type.shape.dim
        shapes[info.name] = [d.dim_value for d in dims]
    flops: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        out = shapes.get(node.output[0], [])
        work = 0
        if node.op_type == "Conv":  # out N x M x spatial; weight M x C/g x kernel
            weight = shapes[node.input[1]]
            work = 2 * math.prod(out) * math.prod(weight[1:])
        elif node.op_type == "ConvTranspose":  # every input value meets a C x M/g x k filter
            x, weight = shapes[node.input[0]], shapes[node.input[1]]
            work = 2 * math.prod(x) * math.prod(weight[1:])
        elif node.op_type in ("Gemm", "MatMul"):  # out ... x N; reduce over A's last axis
            a = shapes[node.input[0]]
            trans_a = any(x.name == "transA" and x.i for x in node.attribute)
            work = 2 * math.prod(out) * (a[0] if trans_a else a[-1])
        name = node.name or f"{node.op_type}_{i}"
        flops[name] = flops.get(name, 0) + work
    return flops


def model_gflop(model: Any) -> float:
    """Floating-point work of the model's Conv, ConvTranspose, Gemm and MatMul nodes
    (node_flops), in GFLOP."""
    return sum(node_flops(model).values()) / 1e9


def _spinning_pass(
    model: Any,
    inputs: dict[str, np.ndarray],
    run: Callable[[], object],
    threads: int,
    repeat: int,
    run_s: float = 0.0,
) -> dict[tuple[str, int], Timing]:
    """onnxruntime as it runs by default (pool threads spinning between runs) against
    ember's AOT run, both at ``threads``, in a pass of their own: each timed call follows
    spin_settle_s(run_s) of untimed calls of the same engine (``run_s``: ember's run, from
    the main pass), so that neither is timed while the other's threads still spin, and
    ember's pool forgets, SPIN_QUIET_S into them, what onnxruntime's spinning taught it
    (each engine timed as if alone). Keys ("orts", threads) and ("aots", threads)."""
    from ember.runtime import set_num_threads
    from ember.runtime.threads import pool_policy

    since = [0.0]  # when ember's untimed calls began; 0 once the pool forgot

    def begin() -> None:
        set_num_threads(threads)
        since[0] = time.perf_counter()

    def fresh() -> Timing:
        # untimed, SPIN_QUIET_S into ember's untimed calls (onnxruntime's threads have
        # stopped spinning): forget what their spinning taught ember's adaptive pool (their
        # lost time sends it serial for 20-640 ms, process-wide); the calls after it let the
        # pool and the run governor learn again, as in a process of its own
        if since[0] and time.perf_counter() - since[0] >= SPIN_QUIET_S:
            pool_policy(None, reset=True)
            since[0] = 0.0
        wall, cpu = time.perf_counter(), time.thread_time()
        run()
        return Timing(time.perf_counter() - wall, time.thread_time() - cpu)

    spin = ort_session(model.SerializeToString(), threads, spinning=True)
    entries = [(begin, fresh), ((lambda: None), _runner(spin, inputs))]
    settle_s = spin_settle_s(run_s)
    ember, ort = interleaved_timings(entries, repeat, settle_s=settle_s)
    time.sleep(SPIN_SETTLE_S)  # onnxruntime's threads stop spinning; the pool forgets them
    pool_policy(None, reset=True)
    return {("aots", threads): ember, ("orts", threads): ort}


def _runner(session: Any, inputs: dict[str, np.ndarray]) -> Callable[[], object]:
    def run() -> object:
        return session.run(None, inputs)

    return run


#: seconds each engine runs, untimed, before each timed call of the spinning-onnxruntime
#: pass: onnxruntime's pool threads spin ~30 ms after a run (the process's CPU time during a
#: sleep right after a 2-thread resnet8 run: 20 ms of a 20 ms sleep, 32 of 50, 35 of 300)
#: and take a core from whatever runs next; a pause instead lets this VM's idle second core
#: go cold (after 50 ms, ember's and onnxruntime's workers then join no launch of a 0.1 ms
#: run: both run at their 1-thread speed).
SPIN_SETTLE_S = 0.1

#: seconds into ember's untimed calls of that pass when its pool forgets onnxruntime's
#: spinning (pool_policy reset): past the ~30 ms the spinning lasts, and early enough that
#: the pool and the run governor learn again before the timed call. Resetting right before
#: each timed call instead timed the governor's first runs after a reset (resnet8 with the
#: far core pair: 0.086 ms against 0.070 governed).
SPIN_QUIET_S = 0.04


#: runs of ember's untimed calls after SPIN_QUIET_S, at least, before a timed call of the
#: spinning pass: the run governor's first trial (a block of runs with the pool and one
#: alone, each an untimed 0.3 ms and three timed runs; src/pool_govern.h) then ends before
#: the timed call. With SPIN_SETTLE_S alone a 10 ms model (inception_v2, ViT-Tiny) was timed
#: inside the trial, often in its block alone: 12.3-12.9 ms, its 1-thread time, against
#: 7.0-8.2 with the pool.
SPIN_TRIAL_RUNS = 12


def spin_settle_s(run_s: float) -> float:
    """Seconds of untimed calls before each timed call of the spinning pass, for a model
    whose run takes ``run_s``: SPIN_SETTLE_S, or SPIN_QUIET_S and SPIN_TRIAL_RUNS runs."""
    return max(SPIN_SETTLE_S, SPIN_QUIET_S + SPIN_TRIAL_RUNS * run_s)


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


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--zoo", action="store_true", help="the zoo of issue 12 (ember.examples.models.ZOO)"
    )
    parser.add_argument("--repeat", type=int, default=10, help="timed rounds")
    parser.add_argument("--profile", type=int, default=0, help="print the K slowest kernels")
    parser.add_argument(
        "--threads", type=int, default=2, help="threads of the multi-threaded columns (both)"
    )
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="time each call after a pause of this many ms instead of right after a call of "
        "the same engine (cold runs: a model invoked now and then)",
    )
    parser.add_argument(
        "--cpu-clock",
        action="store_true",
        help="time 1-thread runs by the thread's CPU time (robust on a busy machine)",
    )
    parser.add_argument(
        "--noisy",
        action="store_true",
        help="run everything next to one busy process pinned to the last core",
    )
    parser.add_argument(
        "--noisy-seconds", type=float, default=3600.0, help="the busy process's time bound"
    )
    parser.add_argument(
        "--fma-units",
        type=int,
        default=None,
        help="full-width FMAs per cycle per core (default: measured)",
    )
    parser.add_argument("--ghz", type=float, default=None, help="core clock (default: measured)")
    parser.add_argument(
        "--targets",
        default="c",
        help="comma-separated ember target strings (default: c); the first runs both "
        "executors, the others add 1-thread graph-executor columns, e.g. --targets c,llvm",
    )
    parser.add_argument(
        "--quantized",
        default="",
        help="also quantize resnet50, mobilenet_v2 and bert (those selected) with "
        "onnxruntime.quantization in these modes (static, dynamic; comma-separated) and time "
        "ember int8 next to onnxruntime int8 and ember float32 at 1 thread",
    )
    parser.add_argument(
        "--keep-cache", action="store_true", help="reuse ember's artifact cache (faster loads)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure every selected model, print the table."""
    args = parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()] or ["c"]
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        if not args.keep_cache:
            os.environ["EMBER_CACHE_DIR"] = tmp  # read once, at ember's first config() call
        from ember.examples.models import MODELS, ZOO

        names = [n for n in args.models.split(",") if n] or (
            list(ZOO) if args.zoo else MODELS.names()
        )
        for name in names:
            MODELS.get(name)  # an unknown name fails before any work, listing the known ones
        warm_up()
        limit = fma_limit(args.fma_units, args.ghz)
        clock = "thread CPU time for 1-thread runs" if args.cpu_clock else "wall"
        runs = f"each after a {args.pause_ms:g} ms pause" if args.pause_ms > 0 else "warm"
        trip = core_round_trip(Path(tmp))
        print(
            f"machine: {machine()}; threads 1 and {args.threads}; repeat {args.repeat}; "
            f"clock: {clock}; runs: {runs}; load average {_load()}{_trip(trip)}\n"
            f"{limit.describe()}"
        )
        rows: list[Row] = []
        if args.noisy:
            with busy_process(args.noisy_seconds) as child:
                print(f"noise: one busy process (pid {child.pid}) on the last core, nice 0")
                for name in names:
                    if not busy_alive(child):
                        raise RuntimeError(
                            f"the busy process ended before {name} (its bound is "
                            f"--noisy-seconds {args.noisy_seconds:g}); rerun with a larger bound"
                        )
                    rows.append(_measure(name, args, targets, limit))
        else:
            rows = [_measure(name, args, targets, limit) for name in names]
        print(f"\n{format_table(rows, limit, args.noisy, targets)}\n")
        print(summary(rows, args.noisy))
        if args.quantized:
            print(f"\n{_int8_table(names, args)}")
        print(f"load average at the end: {_load()}{_trip(trip)}")
    return 0


def _trip(trip: Callable[[], float] | None) -> str:
    """The cores' round trip now, for the header and the last line: 2-thread times depend on
    it (bench_host.core_round_trip)."""
    return "" if trip is None else f"; CPU round trip {trip():.0f} ns"


def _int8_table(names: Sequence[str], args: argparse.Namespace) -> str:
    """The int8 table (issue 16): ember int8, onnxruntime int8 and ember float32, 1 thread."""
    modes = [m.strip() for m in args.quantized.split(",") if m.strip()]
    int8_rows = []
    for name in [n for n in names if n in INT8_MODELS]:
        for mode in modes:
            int8_rows.append(measure_int8(name, mode, args.repeat, args.cpu_clock, threads=1))
            print(f"  done {name} int8 {mode}", file=sys.stderr, flush=True)
    return markdown_table(INT8_HEADER, [r.cells() for r in int8_rows])


def _measure(name: str, args: argparse.Namespace, targets: Sequence[str], limit: FmaLimit) -> Row:
    """Measure one model and print its row to stderr at once (a long run that fails
    later keeps what it measured)."""
    row = measure(
        name,
        args.repeat,
        args.profile,
        args.cpu_clock,
        targets,
        args.threads,
        limit,
        args.pause_ms,
    )
    cells = " | ".join(row.cells(limit, args.noisy))
    print(f"  done {name}: | {cells} |", file=sys.stderr, flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
