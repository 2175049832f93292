"""Where a model's multi-threaded time goes: per kernel, its parallel launches and speedup.

For each model: the generated C's parallel loops per kernel (``EmberBackendParallelFor``
calls, with the extent and grain the code passes; a loop under two grains always runs
inline, ``thread_pool.h``), then the graph executor's per-kernel profile at 1 thread (thread
CPU time and wall) and at ``--threads`` threads (wall), interleaved round by round, medians.
The summary splits the 1-thread time into kernels that can go parallel and kernels that
cannot (the serial part at any thread count), gives the Amdahl bound ``serial + parallel /
threads`` next to the measured multi-threaded total (optimistic: a kernel with one loop
that goes parallel counts whole, its inline loops, e.g. a convolution's padding, too), and
the AOT executor's run next to its bare native call (the Python per-run overhead)::

    .venv/bin/python benchmarks/parallel_budget.py --models resnet8 --threads 2 --repeat 15

Wall times at several threads mean something only on a quiet machine (the load average is
printed); the launch counts and the 1-thread CPU times do not depend on the load.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import markdown_table  # noqa: E402

_DEF = re.compile(r"^(?:static |EMBER_DLL )?int32_t (\w+)_unpacked\(.*\{$", re.M)
_LAUNCH = re.compile(r"EmberBackendParallelFor\(\w+, [^,]+, \(int64_t\)\(?([^,]+?)\)?, (\d+), ")


@dataclass(frozen=True)
class Launch:
    """One parallel loop of a kernel: its extent (None when not a constant) and grain."""

    extent: int | None
    grain: int

    def threads(self, wanted: int) -> int:
        """The threads the pool gives this loop (thread_pool.h: at most extent / grain)."""
        if self.extent is None:
            return wanted
        return max(1, min(wanted, self.extent // self.grain))


def kernel_launches(source: str) -> dict[str, list[Launch]]:
    """Kernel name -> its parallel loops, from generated C (graph or AOT build)."""
    out: dict[str, list[Launch]] = {}
    defs = list(_DEF.finditer(source))
    for k, match in enumerate(defs):
        end = defs[k + 1].start() if k + 1 < len(defs) else len(source)
        body = source[match.end() : end]
        loops = []
        for extent, grain in _LAUNCH.findall(body):
            value = int(extent) if extent.strip().isdigit() else None
            loops.append(Launch(value, int(grain)))
        out[match.group(1)] = loops
    return out


def _c_source(artifacts: Sequence[Any]) -> str:
    parts = [a.content for a in artifacts if getattr(a, "file_name", "").endswith(".c")]
    return "\n".join(p.decode() if isinstance(p, bytes) else p for p in parts)


def _medians(rounds: list[list[float]]) -> list[float]:
    return [statistics.median(col) for col in zip(*rounds, strict=True)]


def profile_rounds(module: Any, threads: int, repeat: int) -> tuple[list[str], dict[str, list]]:
    """Per-kernel mean times (us) at 1 thread (CPU, wall) and ``threads`` (wall), medians
    of ``repeat`` interleaved rounds of 10 runs each."""
    from ember.runtime import set_num_threads

    modes = (("cpu1", 1, "thread"), ("wall1", 1, "wall"), (f"wall{threads}", threads, "wall"))
    rounds: dict[str, list[list[float]]] = {m: [] for m, _, _ in modes}
    names: list[str] = []
    for _ in range(repeat):
        for mode, n, clock in modes:
            set_num_threads(n)
            report = module.profile(10, clock)
            rounds[mode].append([r.time_us for r in report.rows])
            names = [r.op for r in report.rows]
    set_num_threads(0)
    return names, {m: _medians(v) for m, v in rounds.items()}


def aot_overhead(aot: Any, repeat: int) -> tuple[float, float]:
    """(AotExecutor.run, the bare prebuilt native call) in us, thread CPU time, 1 thread."""
    from ember.runtime import set_num_threads

    set_num_threads(1)
    fn, args, _ = aot.module._call
    calls: list[Callable[[], object]] = [aot.run, lambda: fn(*args)]
    times: list[list[float]] = [[], []]
    for _ in range(repeat):
        for k, call in enumerate(calls):
            start = time.thread_time()
            for _ in range(50):
                call()
            times[k].append((time.thread_time() - start) / 50 * 1e6)
    set_num_threads(0)
    return statistics.median(times[0]), statistics.median(times[1])


def budget(name: str, threads: int, repeat: int) -> str:
    """The report of one model (see the module docstring)."""
    import ember
    from ember.examples.models import make_model
    from ember.executor import AotExecutor, GraphExecutor
    from ember.testing import compile_onnx

    case = make_model(name)
    dev = ember.cpu(0)
    arts = compile_onnx(case.model, shape=case.shapes, target="c")
    launches = kernel_launches(_c_source(arts))
    graph = GraphExecutor(ember.load_artifacts(arts, dev)["default"](dev))
    aot_arts = compile_onnx(case.model, shape=case.shapes, target="c", executor="aot")
    aot = AotExecutor(ember.load_artifacts(aot_arts, dev)["default"](dev))
    for key, value in case.inputs.items():
        graph.set_input(key, value)
        aot.set_input(key, value)
    names, med = profile_rounds(graph.module, threads, repeat)
    wall_n = f"wall{threads}"
    rows, serial, parallel, total_n = [], 0.0, 0.0, 0.0
    for k, op in enumerate(names):
        loops = launches.get(op, [])
        going = [lp for lp in loops if lp.threads(threads) > 1]
        cpu, w1, wn = med["cpu1"][k], med["wall1"][k], med[wall_n][k]
        if going:
            parallel += w1
        else:
            serial += w1
        total_n += wn
        shape = ", ".join(f"{lp.extent or '?'}/{lp.grain}" for lp in loops) or "-"
        rows.append(
            [op, f"{len(going)}/{len(loops)}", shape, f"{cpu:.2f}", f"{w1:.2f}", f"{wn:.2f}"]
            + [f"{w1 / wn:.2f}" if wn else "-"]
        )
    head = ["kernel", "parallel/loops", "extent/grain", "cpu1 us", "wall1 us", f"{wall_n} us"]
    table = markdown_table([*head, "speedup"], rows)
    run_us, native_us = aot_overhead(aot, repeat)
    launched = sum(1 for op in names for lp in launches.get(op, []) if lp.threads(threads) > 1)
    bound = serial + parallel / threads
    return (
        f"{name}: {len(names)} kernel calls, {launched} parallel launches per run at "
        f"{threads} threads\n{table}\n"
        f"1 thread (wall): {serial + parallel:.1f} us = serial {serial:.1f} + parallel "
        f"{parallel:.1f}; Amdahl bound at {threads} threads {bound:.1f} us, measured "
        f"{total_n:.1f} us (sum of the kernels)\n"
        f"AOT run {run_us:.2f} us, its native call {native_us:.2f} us (1 thread, CPU time)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print the budget of every model named on the command line."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--models", default="resnet8,ds_cnn_kws,dense_autoencoder")
    parser.add_argument("--threads", type=int, default=2, help="the multi-threaded count")
    parser.add_argument("--repeat", type=int, default=15, help="interleaved rounds")
    args = parser.parse_args(argv)
    import os

    print(f"load average {os.getloadavg()}")
    for name in [n for n in args.models.split(",") if n]:
        print(budget(name, args.threads, args.repeat) + "\n")
    print(f"load average at the end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
