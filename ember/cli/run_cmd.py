"""``ember run model.tar [--inputs in.npz] [--outputs out.npz] [--print-time] [--threads N]``.

Runs a package written by ``ember compile`` (or an exported library) with the graph
executor. Without ``--inputs`` every input gets seeded random data of its shape and dtype.
Input files are read with ``allow_pickle=False``.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from ember.cli.args import check_input_file, check_output_path, int_range, positive_float
from ember.errors import EmberValueError, SerializationError, UsageError
from ember.executor import AotExecutor, GraphExecutor, ProfileReport
from ember.runtime.device import cpu
from ember.runtime.library_module import load_module
from ember.runtime.module import Module
from ember.runtime.threads import MAX_THREADS, get_num_threads, set_num_threads
from ember.support.files import write_file_atomic
from ember.tools.package import load_package

#: Default bound of ``--print-time``'s timing, in seconds.
DEFAULT_MAX_SECONDS = 20.0
#: The key under which a single ``.npy`` input is returned before it gets the input's name.
NPY_KEY = ".npy"
#: Limits of ``--inputs``: the total bytes its arrays may inflate to, and the member count.
MAX_INPUT_BYTES = 1 << 32
MAX_INPUT_MEMBERS = 4096


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the package, inputs, outputs and timing options."""
    parser.add_argument("package", type=Path, help="a package from 'ember compile' or a .so")
    parser.add_argument(
        "--inputs", type=Path, help=".npz file of inputs by name (a .npy: the one input)"
    )
    parser.add_argument("--outputs", type=Path, help="write the outputs to this .npz file")
    parser.add_argument("--print-time", action="store_true", help="time the model")
    parser.add_argument(
        "--repeat", type=int_range(1, 10**6), default=5, help="timing repeats (--print-time)"
    )
    parser.add_argument(
        "--number",
        type=int_range(1, 10**6),
        default=10,
        help="runs per repeat (--print-time); fewer when the runs would pass --max-seconds",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=DEFAULT_MAX_SECONDS,
        metavar="T",
        help="bound on the timing of --print-time (default %(default)s s)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print a per-kernel time table (with the ONNX nodes fused into each) and totals "
        "per ONNX op type",
    )
    parser.add_argument(
        "--profile-json",
        type=Path,
        metavar="OUT.json",
        help="write the profile as JSON (rows, per-op-type and per-kernel totals); implies "
        "--profile",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        metavar="OUT.json",
        help="write the profile as a Chrome/Perfetto trace (Trace Event Format; open it in "
        "ui.perfetto.dev or chrome://tracing); implies --profile",
    )
    parser.add_argument(
        "--print-top",
        type=int_range(0, 2**31 - 1),
        default=0,
        metavar="K",
        help="print the K largest values of output 0",
    )
    parser.add_argument(
        "--seed", type=int_range(0, 2**63 - 1), default=0, help="seed of the random inputs"
    )
    parser.add_argument(
        "--threads",
        type=int_range(0, MAX_THREADS),
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


def _load_inputs(
    path: Path, max_bytes: int = MAX_INPUT_BYTES, max_members: int = MAX_INPUT_MEMBERS
) -> dict[str, np.ndarray]:
    """Read an .npz of inputs, refusing one whose members would inflate past ``max_bytes``.

    A single .npy array comes back under the key :data:`NPY_KEY` (the model's one input).
    """
    check_input_file(path, "--inputs", "an .npz file (numpy.savez) or a .npy array")
    with path.open("rb") as head:
        magic = head.read(6)
    if magic == b"\x93NUMPY":
        try:
            return {NPY_KEY: np.load(path, allow_pickle=False)}
        except (OSError, ValueError, EOFError) as err:
            raise SerializationError(
                f"--inputs {path}: not a readable .npy ({err!s:.200})"
            ) from None
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            declared = sum(i.file_size for i in infos)
        if len(infos) > max_members or declared > max_bytes:
            raise SerializationError(
                f"--inputs {path}: {len(infos)} members declaring {declared} bytes exceed the "
                f"limits ({max_members} members, {max_bytes} bytes); pass smaller inputs"
            )
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, RecursionError) as err:
        raise SerializationError(
            f"--inputs {path}: not a readable .npz of arrays ({err!s:.200}); write it with "
            "numpy.savez"
        ) from None


def _check_args(args: argparse.Namespace) -> None:
    check_input_file(args.package, "package", "a package from 'ember compile' or an exported .so")
    for flag, path in (
        ("--outputs", args.outputs),
        ("--profile-json", args.profile_json),
        ("--trace", args.trace),
    ):
        if path is not None:
            check_output_path(path, flag)


def _named_inputs(inputs: dict[str, np.ndarray], names: list[str], path: Path) -> dict[str, Any]:
    """Give a .npy's one array the model's one input name; refuse names the model lacks."""
    if NPY_KEY in inputs:
        if len(names) != 1:
            raise UsageError(
                f"--inputs {path} is one array, but the model has inputs {names}; pass an .npz "
                "holding one array per input name (numpy.savez('in.npz', name=array, ...))"
            )
        return {names[0]: inputs[NPY_KEY]}
    unknown = sorted(set(inputs) - set(names))
    if unknown:
        raise UsageError(f"inputs {unknown} are not model inputs; inputs: {sorted(names)}")
    return inputs


def _timed(ge: GraphExecutor, args: argparse.Namespace) -> str:
    """Time the model within --max-seconds: fewer runs per repeat when one run is slow."""
    dev = cpu(0)
    start = time.perf_counter()
    ge.run()
    once = max(time.perf_counter() - start, 1e-9)
    repeat = max(1, min(args.repeat, int(args.max_seconds / once)))
    number = max(1, min(args.number, int(args.max_seconds / (once * repeat))))
    fewer = (repeat, number) != (args.repeat, args.number)
    note = f" (fewer than {args.repeat} x {args.number}: --max-seconds)" if fewer else ""
    print(
        f"timing {repeat} x {number} runs, about {once * repeat * number:.3g} s{note}",
        file=sys.stderr,
    )
    _settle(ge, min(args.max_seconds, 10 * once * repeat * number))
    res = ge.benchmark(dev, repeat=repeat, number=number)
    return (
        f"latency ms: mean {res.mean * 1e3:.3f}  median {res.median * 1e3:.3f}  "
        f"std {res.std * 1e3:.3f}  ({repeat} x {number} runs)\n{_threads_line(ge)}"
    )


def _settle(ge: GraphExecutor, seconds: float) -> None:
    """Run until the run governor has chosen between the pool and one thread (its trial:
    about ten runs), so that the timing does not include the trial; at most ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        choice = ge.thread_choice()
        if choice is None or not choice["trying"]:
            return
        ge.run()


def _threads_line(ge: GraphExecutor) -> str:
    """The thread count the runs used, and why when the run governor kept them on one."""
    threads = get_num_threads()
    choice = ge.thread_choice()
    if threads <= 1 or choice is None or choice["parallel"]:
        return f"threads: {threads}"
    return (
        f"threads: 1 of {threads} (the run governor: {threads} threads did not run this model "
        "faster than one on this machine; docs/threads_and_performance.md)"
    )


def load_factory(package: Path) -> tuple[Module, str]:
    """The model factory of a package or exported .so and its mod_name.

    The library is written to a private temporary directory that is removed as soon as it
    is loaded, so nothing is left under /tmp however the run ends; an .so is opened by its
    absolute path (never searched on LD_LIBRARY_PATH).
    """
    if package.suffix == ".so":
        return load_module(str(package.absolute())), "default"
    with tempfile.TemporaryDirectory(prefix="ember-run-") as tmp:
        factory, meta = load_package(package, tmp)
    return factory, str(meta.get("mod_name", "default"))


def run(args: argparse.Namespace) -> int:
    """Load the package, set inputs, run, print or save outputs and timings."""
    _check_args(args)
    if args.threads:
        set_num_threads(args.threads)
    dev = cpu(0)
    factory, mod_name = load_factory(args.package)
    executor = AotExecutor if factory["get_metadata"]().executor == "aot" else GraphExecutor
    ge = executor(factory[mod_name](dev))
    info = {p.name: {"shape": p.shape, "dtype": p.dtype} for p in factory["get_metadata"]().inputs}
    if args.inputs:
        inputs = _named_inputs(_load_inputs(args.inputs), list(info), args.inputs)
    else:
        inputs = random_inputs(info, args.seed)
    for name, value in inputs.items():
        try:
            ge.set_input(name, value)
        except EmberValueError as err:
            raise UsageError(f"--inputs {args.inputs}: {err}") from None
    ge.run()
    outputs = [ge.get_output(i).numpy() for i in range(ge.get_num_outputs())]
    names = ge.get_output_names()
    for i, out in enumerate(outputs):
        print(f"output {i}: shape {list(out.shape)} dtype {out.dtype} name {names[i]!r}")
        if args.print_top and i == 0:
            flat = out.reshape(-1)
            top = np.argsort(-flat, kind="stable")[: args.print_top]
            print("  top: " + ", ".join(f"[{j}] {flat[j]:.6g}" for j in top))
    if args.outputs:
        write_file_atomic(args.outputs, npz_bytes(dict(zip(names, outputs, strict=True))))
        print(f"wrote {args.outputs}")
    if args.print_time:
        print(_timed(ge, args))
    if args.profile or args.profile_json or args.trace:
        write_profile(ge.profile(), args.profile_json, args.trace)
    return 0


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An .npz of ``arrays`` by name, as ``numpy.savez`` writes it, for any name (an ONNX
    output may be called ``file``, which ``savez(file, **arrays)`` cannot take)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as archive:
        for name, value in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
    return buf.getvalue()


def write_profile(report: ProfileReport, json_path: Path | None, trace: Path | None) -> None:
    """Print the per-kernel table and the per-op-type totals; write the JSON exports."""
    sys.stdout.write(report.table() + "\n\n" + report.op_type_table() + "\n")
    if json_path is not None:
        write_file_atomic(json_path, report.to_json().encode())
        print(f"wrote {json_path}")
    if trace is not None:
        write_file_atomic(trace, json.dumps(report.chrome_trace(), indent=1).encode())
        print(f"wrote {trace} (open it in ui.perfetto.dev or chrome://tracing)")
