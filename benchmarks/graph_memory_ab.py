"""A/B of the graph executor's memory: one buffer per storage id (a git revision's
``graph_plan.py``) against the planned workspace (this tree's), on the same built module.

For every model of ``--models`` it builds the graph build and the AOT build once, creates
two graph executors over the same loaded module, the second with the GraphPlan of revision
``--old`` (default ``main``; its file read with ``git show``) swapped in, checks that the two
and the AOT executor give the same bits, then times them at 1 thread by thread CPU time in
ONE run of interleaved rounds (models.py's ``interleaved_timings``) and prints the medians
in ms with each executor's memory for intermediates and kernel scratch (MiB).

    .venv/bin/python benchmarks/graph_memory_ab.py --models yolo,dbnet --repeat 41
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from models import interleaved_timings  # noqa: E402

import ember  # noqa: E402
from ember.examples.models import make_model  # noqa: E402
from ember.executor import GraphExecutorModule  # noqa: E402
from ember.formats.graph_memory import kept_storages  # noqa: E402
from ember.runtime import set_num_threads  # noqa: E402
from ember.testing import compile_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


def old_plan_class(rev: str) -> Any:
    """The GraphPlan class of ``ember/executor/graph_plan.py`` at git revision ``rev``."""
    source = subprocess.run(
        ["git", "show", f"{rev}:ember/executor/graph_plan.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # the storage-id helpers moved from formats.metadata to formats.graph_memory
    source = source.replace(
        "from ember.formats.metadata import STORAGE_ALIGNMENT, scratch_size, storage_sizes",
        "from ember.formats.graph_memory import scratch_size, storage_sizes\n"
        "from ember.formats.metadata import STORAGE_ALIGNMENT",
    )
    module = types.ModuleType("old_graph_plan")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:graph_plan.py", "exec"), module.__dict__)  # noqa: S102
    return module.GraphPlan


def memory_bytes(plan: Any) -> int:
    """Bytes a GraphPlan holds for intermediates and kernel scratch: its workspace, or its
    storages other than those of inputs, parameters and outputs plus its one scratch."""
    workspace = getattr(plan, "workspace", None)
    if workspace is not None:
        return int(workspace.nbytes)
    kept = kept_storages(plan.graph)
    total = sum(buf.nbytes for sid, buf in plan.storage.items() if sid not in kept)
    return total + (plan.scratch.nbytes if plan.scratch is not None else 0)


def _outputs(ex: Any, inputs: dict[str, Any]) -> list[bytes]:
    ex.set_input(**inputs)
    ex.run()
    return [ex.get_output(i).numpy().tobytes() for i in range(ex.get_num_outputs())]


def measure(name: str, repeat: int, old_plan: Any) -> str:
    """One line for model ``name``."""
    case = make_model(name)
    dev = ember.cpu(0)
    graph_arts = compile_onnx(case.model, shape=case.shapes, target="c")
    aot_arts = compile_onnx(case.model, shape=case.shapes, target="c", executor="aot")
    top = ember.load_artifacts(graph_arts, dev)
    new = ember.GraphExecutor(top["default"](dev))
    module = GraphExecutorModule(top.graph, top.host, dev)
    module.plan = old_plan(module.graph, module.plan._resolve, dev)
    module.share_params(top.params)  # as the factory does
    old = ember.GraphExecutor(module)
    aot = ember.AotExecutor(ember.load_artifacts(aot_arts, dev)["default"](dev))
    outs = [_outputs(ex, case.inputs) for ex in (old, new, aot)]
    same = outs[0] == outs[1] == outs[2]
    entries = [((lambda: None), ex.run) for ex in (old, new, aot)]
    ms = [t.cpu * 1e3 for t in interleaved_timings(entries, repeat)]
    mem_old, mem_new = memory_bytes(old.module.plan), memory_bytes(new.module.plan)
    return (
        f"{name}: bitwise {same}; memory MiB old {mem_old / MIB:.2f} new {mem_new / MIB:.2f}; "
        f"1-thread CPU ms old {ms[0]:.4f} new {ms[1]:.4f} ({ms[1] / ms[0]:.3f}, "
        f"{(ms[1] - ms[0]) * 1e3:+.0f} us) aot {ms[2]:.4f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Print one line per model."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="yolo,dbnet,crnn,pp_lcnet,mobilenet_v2,resnet50")
    parser.add_argument("--repeat", type=int, default=41, help="timed rounds")
    parser.add_argument("--old", default="main", help="git revision of the old GraphPlan")
    args = parser.parse_args(argv)
    set_num_threads(1)
    old_plan = old_plan_class(args.old)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for name in [n for n in args.models.split(",") if n]:
        print(measure(name, args.repeat, old_plan), flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
