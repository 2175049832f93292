"""The child process of the mutation replay: handle each input named on stdin, one per line.

Each line is ``KIND PATH``; KIND is ``model`` (import and build an ONNX file), ``inspect``
(read an artifact source: package or library, as ``ember inspect`` does) or ``run`` (load a
package and run it once, as ``ember run`` does). For every input the child prints
``START n`` before and ``DONE n ok|ember`` after; any other exception prints
``NONEMBER n <type>`` and exits 3, so the parent can tell which input did what, and a
signal or a hang is attributed to the last ``START``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from ember.driver import build
from ember.errors import EmberError
from ember.executor import GraphExecutor
from ember.frontend import from_onnx
from ember.runtime.device import cpu
from ember.tools.inspectors.sources import read_artifact_source
from ember.tools.package import load_package


def handle(kind: str, path: Path) -> None:
    """Process one input the way its CLI command would."""
    if kind == "model":
        mod, params = from_onnx(path)
        build(mod, target="c", params=params)
    elif kind == "inspect":
        read_artifact_source(path)
    else:
        with tempfile.TemporaryDirectory(prefix="ember-run-") as tmp:
            factory, meta = load_package(path, tmp)
        ge = GraphExecutor(factory[meta.get("mod_name", "default")](cpu(0)))
        for p in factory["get_metadata"]().inputs:
            ge.set_input(p.name, np.zeros(p.shape, p.dtype))
        ge.run()


def main() -> int:
    """Read ``KIND PATH`` lines from stdin and report on each."""
    for n, line in enumerate(sys.stdin):
        kind, _, name = line.rstrip("\n").partition(" ")
        print(f"START {n}", flush=True)
        try:
            handle(kind, Path(name))
            verdict = "ok"
        except EmberError:
            verdict = "ember"
        except Exception as err:  # noqa: BLE001 - the point is to report it
            print(f"NONEMBER {n} {type(err).__name__}: {str(err)[:200]}", flush=True)
            return 3
        print(f"DONE {n} {verdict}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
