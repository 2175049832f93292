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

from ember.cli.args import check_input_file, check_output_path, int_range, shape_arg
from ember.cli.run_cmd import random_inputs
from ember.driver import Executor, lower
from ember.errors import EmberError, UsageError
from ember.frontend import from_onnx
from ember.ir import IRModule, TensorType, evaluate
from ember.target import Target, get_target_kind, list_target_kinds
from ember.tools.mlf import TestVectors, write_mlf
from ember.tools.package import write_package


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the model, target, output and shape options."""
    parser.add_argument("model", type=Path, nargs="?", help="the ONNX model to compile")
    parser.add_argument(
        "--target",
        default="c",
        help="target string: a kind and its options, e.g. 'c -mcpu=x86-64-v3' (see "
        "--list-targets); the default 'c' tunes for this machine's CPU (-mcpu=native)",
    )
    parser.add_argument(
        "--list-targets", action="store_true", help="list the target kinds and their options"
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="package to write (default: MODEL with suffix .tar)"
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        type=shape_arg,
        default=[],
        metavar="NAME:D1,D2,...",
        help="an input's full static shape (x:1,3,224,224), or the value of a named symbolic "
        "dim (batch:1); repeatable; a full shape that disagrees with a bound dim is an error",
    )
    parser.add_argument(
        "--format",
        choices=("package", "mlf"),
        default="package",
        help="package (library + artifact tree, default) or mlf (Model Library Format: "
        "sources, runtime, header, Makefile; executor defaults to 'aot -interface-api=c')",
    )
    parser.add_argument(
        "--seed", type=int_range(0, 2**63 - 1), default=0, help="seed of the MLF test vectors"
    )
    parser.add_argument(
        "--executor",
        default=None,
        help="'graph' (default), 'aot' or an executor spec such as 'aot -interface-api=c'",
    )
    parser.add_argument(
        "--opt-level", type=int_range(0, 3), default=2, help="graph optimisation level 0-3"
    )
    parser.add_argument(
        "--mod-name", default="default", help="name of the model's factory (a C identifier)"
    )
    parser.add_argument(
        "--save-artifacts", type=Path, help="also save the artifacts as a directory tree"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def target_table() -> str:
    """Every registered target kind with its options (type, default, help), as text."""
    lines = []
    for name in list_target_kinds():
        kind = get_target_kind(name)
        lines.append(f"{name}: {kind.doc}".rstrip(": "))
        for option, decl in kind.options.items():
            default = decl.default if decl.default != "" else "''"
            lines.append(f"  -{option}=<{decl.kind.__name__}>  (default {default})  {decl.help}")
    return "\n".join(lines) + "\n"


def _check_args(args: argparse.Namespace) -> Path:
    """Refuse bad flags before the (long) import and compile; return the output path."""
    if args.model is None:
        raise UsageError("pass the ONNX model to compile (or --list-targets)")
    check_input_file(args.model, "model", "an .onnx model file")
    out: Path = args.output or args.model.with_suffix(".tar")
    check_output_path(out, "-o")
    saved = args.save_artifacts
    if saved is not None and saved.exists() and not saved.is_dir():
        raise UsageError(f"--save-artifacts {saved}: exists and is not a directory")
    if not args.mod_name.isidentifier():
        raise UsageError(f"--mod-name {args.mod_name!r}: pass a C identifier, e.g. default")
    for flag, make in (("--target", Target.create), ("--executor", Executor.create)):
        value = getattr(args, flag[2:])
        if value is not None:
            try:
                make(value)
            except EmberError as err:
                hint = (
                    "; 'ember compile --list-targets' lists the kinds" if flag == "--target" else ""
                )
                raise UsageError(f"{flag} {value!r}: {err}{hint}") from None
    return out


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
    if args.list_targets:
        sys.stdout.write(target_table())
        return 0
    out = _check_args(args)
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
