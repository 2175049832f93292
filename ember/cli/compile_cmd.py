"""``ember compile MODEL.onnx [--target c] [--executor aot] [-o model.tar]``: compile a model
into a package.

The package (layout: ember.formats.package; written by ember.tools.package) holds the
exported library and the readable artifact tree; ``ember run`` executes it and
``ember inspect`` lists it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from ember.cli.run_cmd import random_inputs
from ember.driver import lower
from ember.errors import EmberValueError, FrontendError
from ember.frontend import from_onnx
from ember.ir import IRModule, TensorType, evaluate
from ember.tools.mlf import TestVectors, write_mlf
from ember.tools.package import write_package


def _shape_arg(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse ``name:1,3,224,224``."""
    name, _, dims = text.rpartition(":")
    if not name or not dims:
        raise argparse.ArgumentTypeError(f"expected NAME:D1,D2,..., got {text!r}")
    try:
        return name, tuple(int(d) for d in dims.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"dimensions must be integers in {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the model, target, output and shape options."""
    parser.add_argument("model", type=Path, help="the ONNX model to compile")
    parser.add_argument("--target", default="c", help="target string, e.g. 'c -mcpu=skylake'")
    parser.add_argument("-o", "--output", type=Path, help="package to write (default: MODEL.tar)")
    parser.add_argument(
        "--input-shape",
        action="append",
        type=_shape_arg,
        default=[],
        metavar="NAME:D1,D2,...",
        help="bind an input's symbolic dimensions (repeatable)",
    )
    parser.add_argument(
        "--format",
        choices=("package", "mlf"),
        default="package",
        help="package (library + artifact tree, default) or mlf (Model Library Format: "
        "sources, runtime, header, Makefile; executor defaults to 'aot -interface-api=c')",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the MLF test vectors' inputs")
    parser.add_argument(
        "--executor",
        default=None,
        help="'graph' (default), 'aot' or an executor spec such as 'aot -interface-api=c'",
    )
    parser.add_argument("--opt-level", type=int, default=2, help="graph optimisation level 0-3")
    parser.add_argument("--mod-name", default="default", help="name of the model's factory")
    parser.add_argument(
        "--save-artifacts", type=Path, help="also save the artifacts as a directory tree"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def _test_vectors(mod: IRModule, params: dict[str, np.ndarray], seed: int) -> TestVectors:
    """Seeded inputs and the reference evaluator's outputs for them (numpy, not the
    compiled code), with the tolerance the compiled model tests use."""
    info = {
        v.name: {"shape": v.type.shape, "dtype": v.type.dtype}
        for v in mod.main.params
        if v.name not in params and isinstance(v.type, TensorType)
    }
    inputs = random_inputs(info, seed)
    expected = [np.asarray(e) for e in evaluate(mod, inputs, params)]
    return TestVectors(inputs, expected, rtol=1e-4, atol=1e-5)


def run(args: argparse.Namespace) -> int:
    """Import, build and package the model; print what was written."""
    out = args.output or args.model.with_suffix(".tar")
    if out.is_dir():
        raise EmberValueError(f"-o {out} is a directory; pass the path of the package to write")
    if not args.model.is_file():
        raise FrontendError(
            f"{args.model}: not a regular file (missing, a directory, FIFO or device); pass an "
            ".onnx model file"
        )
    show = not args.quiet and sys.stderr.isatty()
    start = time.perf_counter()
    if not args.quiet:
        print(f"importing {args.model}", file=sys.stderr)
    mod, params = from_onnx(args.model, shape=dict(args.input_shape) or None)
    if not args.quiet:
        print(f"compiling for '{args.target}'", file=sys.stderr)
    executor = args.executor
    if args.format == "mlf" and executor is None:
        executor = "aot -interface-api=c"
    lowered = lower(
        mod,
        target=args.target,
        params=params,
        executor=executor,
        mod_name=args.mod_name,
        opt_level=args.opt_level,
        progress=show,
    )
    arts = lowered.compile()
    if args.save_artifacts:
        arts.save(args.save_artifacts)
    if not args.quiet:
        print("linking and packaging", file=sys.stderr)
    if args.format == "mlf":
        vectors = _test_vectors(mod, params, args.seed)
        write_mlf(arts, out, target=args.target, ir_text=lowered.as_text(), test_vectors=vectors)
    else:
        write_package(arts, out, mod_name=args.mod_name, target=args.target)
    seconds = time.perf_counter() - start
    print(f"wrote {out} ({len(arts)} artifacts, {seconds:.1f} s)")
    return 0
