"""Two builds of the same models, A and B (PassContext configs), timed in one process.

Run: ``.venv/bin/python benchmarks/config_ab.py --models resnet8,resnet50 --a
'{"nn.conv_winograd_epilogue": false}' --b '{}' --repeat 15 [--threads 1] [--target c]``.

For every model of ``ember.examples.models`` it builds A and B, checks that their outputs
agree (bitwise, or the largest difference is printed), then times both graph executors in
interleaved rounds (the order alternating, each timed call right after an untimed one of
the same build: ``models.interleaved_timings``) and prints the medians of the calling
thread's CPU time at 1 thread (wall time at more threads), B/A, and the load average.
Nothing is asserted: the script only reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import load_average  # noqa: E402
from models import interleaved_timings  # noqa: E402


def _executor(case: Any, target: str, config: dict[str, Any]) -> Any:
    """A graph executor of ``case``'s model built with ``config``, its inputs set."""
    import ember
    from ember.executor import GraphExecutor
    from ember.testing import compile_onnx
    from ember.transform import PassContext

    shapes = {k: tuple(np.shape(v)) for k, v in case.inputs.items()}
    art = compile_onnx(
        case.model, shape=shapes, target=target, pass_context=PassContext(config=config)
    )
    dev = ember.cpu(0)
    ex = GraphExecutor(ember.load_artifacts(art, dev)["default"](dev))
    for name, value in case.inputs.items():
        ex.set_input(name, value)
    return ex


def _outputs(ex: Any) -> list[np.ndarray]:
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


def _profile(a: Any, b: Any, top: int, repeat: int) -> None:
    """The ``top`` slowest kernels of A at 1 thread (thread CPU time), next to B's: the
    per-kernel median over rounds that profile A and B alternately (kernels named alike
    in both builds; a kernel B does not have prints '-'), then B's own among its slowest."""
    import statistics

    from ember.runtime import num_threads

    rounds: list[list[dict[str, float]]] = [[], []]
    with num_threads(1):
        for r in range(max(3, repeat // 5)):
            for k in (r % 2, 1 - r % 2):
                report = (a, b)[k].profile(repeat=5, clock="thread")
                rounds[k].append({op: us for op, _, us, _ in report.by_op()})
    med = [
        {op: statistics.median(d.get(op, 0.0) for d in runs) for op in runs[0]} for runs in rounds
    ]
    for op in sorted(med[0], key=lambda o: -med[0][o])[:top]:
        got = med[1].get(op)
        ratio = f"{got / med[0][op]:.3f}" if got else "-"
        b_us = f"{got:9.1f}" if got else "        -"
        print(f"    {med[0][op]:9.1f} us  {b_us} us  {ratio}  {op}")
    only_b = [op for op in sorted(med[1], key=lambda o: -med[1][o])[:top] if op not in med[0]]
    for op in only_b:
        print(f"            - us  {med[1][op]:9.1f} us  -  {op}")


def main(argv: list[str] | None = None) -> None:
    """Print one row per model: A and B median ms, B/A, whether the outputs are equal."""
    from ember.examples.models import make_model
    from ember.runtime import set_num_threads

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet8")
    parser.add_argument("--a", default="{}", help="config A (JSON)")
    parser.add_argument("--b", default="{}", help="config B (JSON)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", default="c")
    parser.add_argument("--profile", type=int, default=0, help="per-kernel rows: the K slowest")
    args = parser.parse_args(argv)
    configs = [json.loads(args.a), json.loads(args.b)]
    print(f"A = {configs[0]}, B = {configs[1]}, {args.threads} thread(s), target {args.target}")
    print(f"load before: {load_average()}")
    print("| model | A ms | B ms | B/A | outputs |")
    print("| --- | --- | --- | --- | --- |")
    for name in args.models.split(","):
        case = make_model(name)
        a, b = (_executor(case, args.target, c) for c in configs)
        set_num_threads(args.threads)
        outs = [_outputs(a), _outputs(b)]
        diff = max(float(np.max(np.abs(x - y))) for x, y in zip(*outs, strict=True))
        equal = "bitwise" if diff == 0 else f"max diff {diff:.2g}"
        entries = [(lambda: set_num_threads(args.threads), ex.run) for ex in (a, b)]
        timings = interleaved_timings(entries, args.repeat)
        pick = [t.cpu if args.threads == 1 else t.wall for t in timings]
        ms = [1e3 * p for p in pick]
        print(f"| {name} | {ms[0]:.3f} | {ms[1]:.3f} | {ms[1] / ms[0]:.3f} | {equal} |")
        if args.profile:
            _profile(a, b, args.profile, args.repeat)
    print(f"load after: {load_average()}")


if __name__ == "__main__":
    main()
