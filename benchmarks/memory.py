"""Memory of compiled models: the static plan against its bound, the graph executor, onnxruntime.

For every model of ``ember.examples.models.MODELS`` (or ``--models``) it prints one row:
the AOT build's workspace as the static planner placed it (``ember.support.memory_plan``:
intermediates and each kernel's scratch), the lower bound (the largest total live at one
step), their ratio; the graph executor's workspace (``ember.formats.graph_memory``, what
the executor allocates for the same model's graph build: the same planner over the same
buffers, so equal to the AOT workspace), and for comparison the storage-id plan it used
before (one buffer per storage id of an intermediate plus one scratch buffer of the largest
kernel's size); and onnxruntime's peak resident-set growth over one session creation and
run, measured in a fresh process from its size just before (weights and arena included).
Sizes in MiB; no timing is involved.

    .venv/bin/python benchmarks/memory.py --models mobilenet_v2_96,squeezenet
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import markdown_table  # noqa: E402

import ember  # noqa: E402
from ember.examples.models import MODELS, make_model  # noqa: E402
from ember.formats.graph_memory import (  # noqa: E402
    kept_storages,
    plan_graph_memory,
    scratch_size,
    storage_sizes,
)

MIB = 1 << 20

_ORT_PROBE = """
import json, os, sys
import numpy as np, onnxruntime as ort
def kib(field):
    # this process's own counters (VmRSS now, VmHWM peak); ru_maxrss would not do: Linux
    # carries it across exec, so a probe started by a big parent reports the parent's peak
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit(field + " missing from /proc/self/status")
data = open(sys.argv[1], "rb").read()
inputs = dict(np.load(sys.argv[2]))
before = kib("VmRSS")
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1
sess = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
sess.run(None, inputs)
print(json.dumps({"kib": kib("VmHWM") - before}))
"""


def onnxruntime_peak_growth(model: bytes, inputs: dict[str, np.ndarray]) -> float:
    """Peak RSS growth (MiB) of onnxruntime creating a session and running once, measured
    from the resident size just before (a fresh process holding only the model bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        (path / "m.onnx").write_bytes(model)
        np.savez(path / "in.npz", **inputs)
        out = subprocess.run(
            [sys.executable, "-c", _ORT_PROBE, str(path / "m.onnx"), str(path / "in.npz")],
            capture_output=True,
            text=True,
            check=True,
        )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["kib"]) / 1024


def measure(name: str, with_ort: bool) -> list[str]:
    """One table row for model ``name``."""
    case = make_model(name)
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    aot = ember.lower(mod, "c", params, executor="aot").aot
    assert aot is not None
    plan = aot.memory
    graph = ember.lower(mod, "c", params).plan.graph
    executor = plan_graph_memory(graph).workspace_size
    kept = kept_storages(graph)
    by_storage = sum(n for sid, n in storage_sizes(graph).items() if sid not in kept)
    by_storage += scratch_size(graph)
    model = case.model.SerializeToString()
    ort = f"{onnxruntime_peak_growth(model, case.inputs):.2f}" if with_ort else "-"
    return [
        name,
        f"{plan.size / MIB:.2f}",
        f"{plan.lower_bound / MIB:.2f}",
        f"{plan.size / max(plan.lower_bound, 1):.3f}",
        f"{executor / MIB:.2f}",
        f"{by_storage / MIB:.2f}",
        ort,
        plan.algorithm,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the memory table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument("--no-ort", action="store_true", help="skip the onnxruntime column")
    args = parser.parse_args(argv)
    names = [n for n in args.models.split(",") if n] or MODELS.names()
    for name in names:
        MODELS.get(name)  # an unknown name fails before any work, listing the known ones
    header = [
        "model",
        "planned",
        "bound",
        "ratio",
        "graph executor",
        "storage-id plan",
        "onnxruntime peak",
        "placement",
    ]
    rows = []
    for name in names:
        rows.append(measure(name, not args.no_ort))
        print(f"measured {name}", file=sys.stderr, flush=True)
    print("Intermediate memory, MiB (onnxruntime: peak RSS growth, whole session)\n")
    print(markdown_table(header, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
