"""The distribution of issue 12's noisy ratio (ember at 2 threads over ember at 1 thread, wall
time, next to one busy process pinned to the last core), with what the thread pool did.

Run: ``.venv/bin/python benchmarks/noisy_runs.py [--models a,b] [--trials 10] [--repeat 7]
[--policies adaptive,per-loop] [--quiet]``. Each model is built once (graph executor); then
``--trials`` times, one trial being what ``models.py --noisy`` measures once: ``--repeat``
interleaved rounds (the order rotating every round) of ember at 1 thread and ember at 2
threads under each pool policy (``ember.runtime.threads.pool_policy``: ``adaptive`` the
default, ``per-loop`` the per-loop backoff alone, ``always`` every launch split; ``one``
is a second 1-thread entry: the noise floor), a ratio per policy being its median over the
1-thread median. It prints per model and policy the
ratios' min / median / max, how many trials were over 1.3, and the pool's counters summed
over the 2-thread runs (``ember.runtime.threads.pool_stats``): launches split, run inline
(per-loop backoff, adaptive stretch), chunks per split launch, the caller's share of the
iterations, joins that waited over 0.2 ms for a late worker, the mean wait and the
process's longest so far, ms lost by launches slower than the caller alone, times the
adaptive state went serial, launches whose two threads shared one CPU. ``--quiet`` runs
without the busy process. Nothing is asserted: the script only reports.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import load_average  # noqa: E402
from bench_host import busy_process  # noqa: E402

DEFAULT_MODELS = ("mobilenet_v2", "pp_lcnet", "yolo", "ds_cnn_kws", "resnet8")


def _graph_run(name: str) -> Callable[[], object]:
    """Build ``name``'s graph executor with its example inputs set; its ``run``."""
    from ember.examples.models import make_model
    from ember.testing import ORT_MAX_IR_VERSION

    sys.path.append(str(Path(__file__).resolve().parent))
    from models import _build, _load_executor

    case = make_model(name)
    case.model.ir_version = min(case.model.ir_version, ORT_MAX_IR_VERSION)
    ge, _ = _load_executor(_build(case.model, case.shapes, "c")[0])
    for key, value in case.inputs.items():
        ge.set_input(key, value)
    ge.run()
    return ge.run  # type: ignore[no-any-return]


def trial(
    run: Callable[[], object], policies: Sequence[str], repeat: int, stats: dict[str, Any]
) -> dict[str, float]:
    """One trial: ``repeat`` rotated rounds of 1 thread and 2 threads per policy; the 2-thread
    medians over the 1-thread median, by policy. Adds the pool's counters to ``stats``."""
    from ember.runtime import set_num_threads
    from ember.runtime.threads import pool_policy, pool_stats

    rng = random.Random(12)
    keys = ["1", *policies]
    order = list(range(len(keys)))
    walls: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(repeat + 2):  # two warm-up rounds
        rng.shuffle(order)  # a fixed cyclic order puts the same entry after the 1-thread run
        for j in order:
            key = keys[j]
            set_num_threads(1 if key in ("1", "one") else 2)
            if key not in ("1", "one"):
                pool_policy(key)
            before = pool_stats()
            start = time.perf_counter()
            run()
            wall = time.perf_counter() - start
            after = pool_stats()
            if r >= 2:
                walls[key].append(wall)
                acc = stats.setdefault(key, {})
                for name, value in after.items():
                    if name == "max_wait_ns":  # the process's longest wait so far
                        acc[name] = max(acc.get(name, 0), value)
                    else:
                        acc[name] = acc.get(name, 0) + value - before[name]
    pool_policy("adaptive")
    one = statistics.median(walls["1"])
    return {p: statistics.median(walls[p]) / one for p in policies}


def describe(ratios: Sequence[float], s: dict[str, int]) -> str:
    """One policy's line: the ratios' distribution and the pool's counters."""
    r = sorted(ratios)
    pool = max(1, s.get("range", 0) + s.get("group", 0))
    return (
        f"ratio min {r[0]:.2f} med {statistics.median(r):.2f} max {r[-1]:.2f} "
        f">1.3: {sum(x > 1.3 for x in r)}/{len(r)} | pool {s.get('range', 0)}+{s.get('group', 0)}"
        f" inline site {s.get('site_inline', 0)} adapt {s.get('adapt_inline', 0)}"
        f" | chunks/launch {s.get('chunks', 0) / max(1, s.get('range', 0)):.1f}"
        f" caller share {s.get('own_iters', 0) / max(1, s.get('iters', 0)):.2f}"
        f" joined {s.get('joined', 0) / pool:.2f}"
        f" | late {s.get('late', 0)} wait mean {s.get('wait_ns', 0) / pool / 1e3:.1f} us"
        f" max {s.get('max_wait_ns', 0) / 1e6:.2f} ms lost {s.get('lost_ns', 0) / 1e6:.1f} ms"
        f" stalls {s.get('stalls', 0)} shared {s.get('shared', 0)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the trials and print the distributions."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS))
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--policies", default="adaptive,per-loop")
    ap.add_argument("--quiet", action="store_true", help="no busy process")
    args = ap.parse_args(argv)
    policies = args.policies.split(",")
    names = args.models.split(",")
    runs = {name: _graph_run(name) for name in names}
    print(f"load average before: {load_average()}; policies {policies}; trials {args.trials}")
    noise = nullcontext() if args.quiet else busy_process(3600.0)
    with noise:
        for name in names:
            stats: dict[str, Any] = {}
            ratios: dict[str, list[float]] = {p: [] for p in policies}
            for _ in range(args.trials):
                for p, x in trial(runs[name], policies, args.repeat, stats).items():
                    ratios[p].append(x)
            print(f"{name} (load {load_average()}):")
            for p in policies:
                print(f"  {p:9s} {describe(ratios[p], stats[p])}")
                print(f"            ratios {' '.join(f'{x:.2f}' for x in ratios[p])}")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
