"""``ember run model.tar [--inputs in.npz] [--outputs out.npz] [--print-time] [--threads N]``.

Runs a package written by ``ember compile`` (or an exported library) with the graph
executor. Without ``--inputs`` every input gets seeded random data of its shape and dtype.
Input files are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ember.errors import EmberValueError
from ember.executor import AotExecutor, GraphExecutor
from ember.runtime.device import cpu
from ember.runtime.library_module import load_module
from ember.runtime.threads import set_num_threads
from ember.tools.package import load_package


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the package, inputs, outputs and timing options."""
    parser.add_argument("package", type=Path, help="a package from 'ember compile' or a .so")
    parser.add_argument("--inputs", type=Path, help=".npz file of inputs by name")
    parser.add_argument("--outputs", type=Path, help="write the outputs to this .npz file")
    parser.add_argument("--print-time", action="store_true", help="time the model")
    parser.add_argument("--repeat", type=int, default=5, help="timing repeats (--print-time)")
    parser.add_argument("--number", type=int, default=10, help="runs per repeat (--print-time)")
    parser.add_argument("--profile", action="store_true", help="print a per-node time table")
    parser.add_argument(
        "--print-top",
        type=int,
        default=0,
        metavar="K",
        help="print the K largest values of output 0",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        metavar="N",
        help="threads for parallel loops, this one included (default: EMBER_NUM_THREADS, "
        "else one per core)",
    )


def random_inputs(info: dict[str, dict[str, Any]], seed: int) -> dict[str, np.ndarray]:
    """Seeded random data for every input (floats in [0, 1), small integers, booleans)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, spec in info.items():
        shape, dtype = tuple(spec["shape"]), np.dtype(spec["dtype"])
        if dtype.kind == "f":
            out[name] = rng.random(shape).astype(dtype)
        elif dtype.kind == "b":
            out[name] = rng.random(shape) < 0.5
        else:
            out[name] = rng.integers(0, 10, size=shape).astype(dtype)
    return out


def _load_inputs(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def run(args: argparse.Namespace) -> int:
    """Load the package, set inputs, run, print or save outputs and timings."""
    if args.threads:
        set_num_threads(args.threads)
    dev = cpu(0)
    with tempfile.TemporaryDirectory(prefix="ember-run-") as tmp:
        if args.package.suffix == ".so":
            factory, mod_name = load_module(str(args.package)), "default"
        else:
            factory, meta = load_package(args.package, tmp)
            mod_name = meta.get("mod_name", "default")
        executor = AotExecutor if factory["get_metadata"]().executor == "aot" else GraphExecutor
        ge = executor(factory[mod_name](dev))
        info = {
            p.name: {"shape": p.shape, "dtype": p.dtype} for p in factory["get_metadata"]().inputs
        }
        inputs = _load_inputs(args.inputs) if args.inputs else random_inputs(info, args.seed)
        unknown = sorted(set(inputs) - set(info))
        if unknown:
            raise EmberValueError(f"inputs {unknown} are not model inputs; inputs: {sorted(info)}")
        for name, value in inputs.items():
            ge.set_input(name, value)
        ge.run()
        outputs = [ge.get_output(i).numpy() for i in range(ge.get_num_outputs())]
        for i, out in enumerate(outputs):
            print(f"output {i}: shape {list(out.shape)} dtype {out.dtype}")
            if args.print_top and i == 0:
                flat = out.reshape(-1)
                top = np.argsort(-flat, kind="stable")[: args.print_top]
                print("  top: " + ", ".join(f"[{j}] {flat[j]:.6g}" for j in top))
        if args.outputs:
            np.savez(args.outputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
            print(f"wrote {args.outputs}")
        if args.print_time:
            res = ge.benchmark(dev, repeat=args.repeat, number=args.number)
            print(
                f"latency ms: mean {res.mean * 1e3:.3f}  median {res.median * 1e3:.3f}  "
                f"std {res.std * 1e3:.3f}  ({args.repeat} x {args.number} runs)"
            )
        if args.profile:
            sys.stdout.write(str(ge.profile()))
            sys.stdout.write("\n")
    return 0
