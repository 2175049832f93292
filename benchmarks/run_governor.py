"""What the run governor does for back-to-back runs: per model, the median run at 1 thread,
at 2 threads with the governor off, and at 2 threads with it on, next to how far apart the
two cores are right now.

Run: ``.venv/bin/python benchmarks/run_governor.py [--models a,b] [--rounds 6] [--seconds
0.25] [--gap 20]``. Each model is built once (AOT executor, example inputs set). Each round
first measures a cache line's round trip between CPU 0 and CPU 1 (two pinned threads
handing a counter back and forth: 85-135 ns when the host has placed this VM's two vCPUs on
nearby cores, 410-460 ns when far apart, on the machine of docs/performance.md), then per
model, in a rotating order, runs it back to back for ``--seconds`` in each of three
configurations and takes the median of the single runs' wall times: ``1T`` (one thread),
``2T off`` (two threads, pool policy ``ungoverned``: the adaptive pool and the per-loop
backoff without the governor, ember before it) and ``2T gov`` (two threads, the default
policy: governed runs;
its state persists across rounds, as in a server). ``choice`` is what the governor was
using at the end (pool / alone). ``--gap`` seconds pass between rounds, so that a long run
may see both placements. Nothing is asserted: the script only reports.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import load_average, markdown_table  # noqa: E402
from bench_host import core_round_trip  # noqa: E402

DEFAULT_MODELS = ("resnet8", "ds_cnn_kws", "dense_autoencoder", "pp_lcnet", "mobilenet_v2")


def aot_executor(name: str) -> Any:
    """``name``'s AOT executor with its example inputs set."""
    import ember
    from ember.examples.models import make_model
    from ember.testing import compile_onnx

    case = make_model(name)
    dev = ember.cpu(0)
    built = compile_onnx(case.model, shape=case.shapes, target="c", executor="aot")
    ex = ember.AotExecutor(ember.load_artifacts(built, dev)["default"](dev))
    ex.set_input(**case.inputs)
    ex.run()
    return ex


def median_run(run: Callable[[], object], seconds: float) -> float:
    """The median wall time (ms) of single runs made back to back for ``seconds``."""
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:]) * 1e3


CONFIGS = (("1T", 1, "adaptive"), ("2T off", 2, "ungoverned"), ("2T gov", 2, "adaptive"))


def one_round(executors: dict[str, Any], seconds: float, turn: int) -> list[list[str]]:
    """One row per model: the three configurations' medians, ratios and the choice."""
    from ember.runtime.threads import pool_policy, set_num_threads

    rows = []
    for name, ex in executors.items():
        ms = {}
        order = [CONFIGS[(turn + k) % len(CONFIGS)] for k in range(len(CONFIGS))]
        for label, threads, policy in order:
            set_num_threads(threads)
            pool_policy(policy)
            ms[label] = median_run(ex.run, seconds)
        set_num_threads(2)
        pool_policy("adaptive")
        choice = ex.thread_choice()
        chosen = "-" if choice is None else ("pool" if choice["parallel"] else "alone")
        rows.append(
            [
                name,
                *(f"{ms[c[0]]:.3f}" for c in CONFIGS),
                f"{ms['2T off'] / ms['1T']:.2f}",
                f"{ms['2T gov'] / ms['1T']:.2f}",
                chosen,
            ]
        )
    set_num_threads(0)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=0.25, help="per configuration")
    parser.add_argument("--gap", type=float, default=20.0, help="seconds between rounds")
    args = parser.parse_args(argv)
    from ember.runtime.threads import num_cores

    if num_cores() < 2:
        sys.exit("run_governor.py needs 2 cores (it compares 1 and 2 threads)")
    executors = {name: aot_executor(name) for name in args.models.split(",")}
    header = ["model", "1T ms", "2T off ms", "2T gov ms", "off/1T", "gov/1T", "choice"]
    with tempfile.TemporaryDirectory() as tmp:
        measured = core_round_trip(Path(tmp))
        trip = measured if measured is not None else (lambda: float("nan"))
        for turn in range(args.rounds):
            if turn:
                time.sleep(args.gap)
            before = trip()
            rows = one_round(executors, args.seconds, turn)
            print(
                f"round {turn + 1}: CPU 0 <-> 1 round trip {before:.0f} ns before, "
                f"{trip():.0f} ns after; load average {load_average()}"
            )
            print(markdown_table(header, rows), flush=True)


if __name__ == "__main__":
    main()
