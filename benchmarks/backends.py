"""External back ends next to the host-only build and onnxruntime, from one run.

Run: ``.venv/bin/python benchmarks/backends.py --targets c,openblas,onednn [--models bert]``.
Each item of ``--targets`` is a build: ``c`` alone is the host-only build; a back-end name
(``openblas``) means the composite target ``"openblas, c"``; ``a+b`` means ``"a, b, c"``.
For every model it prints the best-of-``--repeat`` latency of each build (graph executor,
inputs set beforehand) and of onnxruntime (``intra_op_num_threads`` = ``--ort-threads``),
each build's time over onnxruntime's (above 1: slower), how many kernels each back end
took, and the largest difference from onnxruntime's outputs. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import best_times, markdown_table  # noqa: E402

import ember  # noqa: E402
from ember.examples.models import make_model  # noqa: E402
from ember.frontend import from_onnx  # noqa: E402

DEFAULT_MODELS = "bert,bert_large,mobilenet_v2_96,resnet8,dense_autoencoder"
BACKEND_MODULES = {
    "openblas": "ember.backends.openblas",
    "onednn": "ember.backends.onednn",
    "example_accel": "ember.backends.example_accel",
}


def target_of(item: str, host: str) -> str:
    """``c`` -> ``c``; ``openblas`` -> ``openblas, c``; ``openblas+onednn`` -> both; an
    item may carry options (``openblas -num-threads=2``)."""
    kinds = [k.strip() for k in item.split("+") if k.strip() != host]
    for kind in kinds:
        name = kind.split()[0]
        importlib.import_module(BACKEND_MODULES.get(name, name))
    return ", ".join([*kinds, host])


def _ort_session(model: Any, threads: int) -> Any:
    import onnxruntime as ort  # optional: the bench extra

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.log_severity_level = 3
    # idle ORT threads would spin into the next build's timing (models.py does the same)
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def measure(name: str, items: list[str], host: str, repeat: int, ort_threads: int) -> list[str]:
    """One table row: onnxruntime's time, then each build's time, ratio and kernel split."""
    case = make_model(name)
    mod, params = from_onnx(case.model, shape=case.shapes)
    sess = _ort_session(case.model, ort_threads)
    want = sess.run(None, case.inputs)
    dev = ember.cpu(0)
    runs, notes, errs = [lambda: sess.run(None, case.inputs)], [], []
    for item in items:
        target = target_of(item, host)
        lowered = ember.lower(mod, target, params)
        kinds = [str(dict(f.attrs).get("Compiler", host)) for f in lowered.plan.kernels.values()]
        notes.append("/".join(f"{k}:{kinds.count(k)}" for k in dict.fromkeys(kinds)))
        ge = ember.GraphExecutor(ember.load_artifacts(lowered.compile(), dev)["default"](dev))
        for k, v in case.inputs.items():
            ge.set_input(k, v)
        ge.run()
        errs.append(float(np.max(np.abs(ge.get_output(0).numpy() - want[0]))))
        runs.append(ge.run)
    times = best_times(runs, repeat)
    ort_s = times[0]
    cells = [name, f"{ort_s * 1e3:.2f}"]
    for t, note, err in zip(times[1:], notes, errs, strict=True):
        cells.append(f"{t * 1e3:.2f} ({t / ort_s:.2f}x) [{note}] err {err:.1e}")
    return cells


def main(argv: list[str] | None = None) -> int:
    """Parse the flags, measure every model, print one markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default="c,openblas,onednn")
    parser.add_argument("--host", default="c", help="the host target of every build")
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--ort-threads", type=int, default=2)
    args = parser.parse_args(argv)
    items = [t.strip() for t in args.targets.split(",") if t.strip()]
    header = ["model", f"onnxruntime ms ({args.ort_threads} thr)"]
    header += [f"{target_of(i, args.host)} ms (/ort) [kernels]" for i in items]
    rows = []
    for name in args.models.split(","):
        rows.append(measure(name.strip(), items, args.host, args.repeat, args.ort_threads))
        print(f"# {name} done", file=sys.stderr, flush=True)
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
