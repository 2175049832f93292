"""Package size and peak memory of ``ember run`` against the ONNX file and onnxruntime.

Compiles a model with ``ember compile`` (default: the onnx-shipped ``light`` VGG-19,
``onnx/backend/test/data/light/light_vgg19.onnx``) and prints:

* the sizes of the ONNX file, of the package and of its parts (``mod.so``, the weights
  ``params.bin``), and of the ONNX model onnxruntime writes after its own constant folding
  (the weights materialised, as the package holds them), with the ratios;
* the peak resident set (``ru_maxrss``) of ``ember run model.tar`` and of one onnxruntime
  session creation and run (without writing the folded model), each in a fresh
  subprocess, and of a bare interpreter with numpy for scale.

Targets (issue 18): package within 5% of the ONNX file, ``ember run`` within 1.3x of
onnxruntime's peak. Not a test: run it by hand::

    .venv/bin/python benchmarks/package_size.py [--model path.onnx] [--target c]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import onnx

MIB = 1 << 20
LIGHT_VGG19 = Path(onnx.__file__).parent / "backend/test/data/light/light_vgg19.onnx"

_EMBER_PROBE = """
import resource, sys
from ember.cli.main import main
code = main(["run", sys.argv[1]])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(code)
"""

_ORT_PROBE = """
import resource, sys
import numpy as np, onnxruntime as ort
opts = ort.SessionOptions()
if len(sys.argv) > 2:
    opts.optimized_model_filepath = sys.argv[2]
sess = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feeds = {}
for i in sess.get_inputs():
    shape = [d if isinstance(d, int) else 1 for d in i.shape]
    feeds[i.name] = rng.random(shape).astype(np.float32)
sess.run(None, feeds)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""

_BARE_PROBE = """
import resource
import numpy
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_kib(code: str, *args: str) -> int:
    """Run ``code`` in a fresh interpreter; its last stdout line is its ru_maxrss in KiB."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return int(proc.stdout.strip().splitlines()[-1])


def compile_package(model: Path, out: Path, target: str) -> None:
    """``ember compile model -o out`` in a subprocess."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    cmd = [sys.executable, "-m", "ember", "compile", str(model), "-o", str(out)]
    subprocess.run([*cmd, "--target", target, "--quiet"], check=True, env=env)


def member_sizes(package: Path) -> dict[str, int]:
    """Size of every member of the package tar."""
    with tarfile.open(package) as tar:
        return {m.name: m.size for m in tar.getmembers() if m.isfile()}


def main() -> int:
    """Compile, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=LIGHT_VGG19)
    parser.add_argument("--target", default="c")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ember-pkgsize-") as tmp:
        pkg = Path(tmp) / "model.tar"
        folded = Path(tmp) / "ort_folded.onnx"
        compile_package(args.model, pkg, args.target)
        members = member_sizes(pkg)
        onnx_size, pkg_size = args.model.stat().st_size, pkg.stat().st_size
        ember_kib = peak_kib(_EMBER_PROBE, str(pkg))
        ort_kib = peak_kib(_ORT_PROBE, str(args.model))
        peak_kib(_ORT_PROBE, str(args.model), str(folded))  # writing it costs memory too
        bare_kib = peak_kib(_BARE_PROBE)
        folded_size = folded.stat().st_size
    params = sum(s for n, s in members.items() if n.endswith("params.bin"))
    print(f"model {args.model.name}")
    print(f"  ONNX file                      {onnx_size / MIB:10.3f} MiB")
    print(f"  ONNX after ORT constant folding{folded_size / MIB:10.3f} MiB")
    print(f"  package                        {pkg_size / MIB:10.3f} MiB")
    print(f"    mod.so                       {members.get('mod.so', 0) / MIB:10.3f} MiB")
    print(f"    params.bin (weights, once)   {params / MIB:10.3f} MiB")
    print(f"  package / ONNX file            {pkg_size / onnx_size:10.3f}x")
    print(f"  package / folded ONNX          {pkg_size / folded_size:10.3f}x")
    print(f"  peak RSS ember run             {ember_kib / 1024:10.1f} MiB")
    print(f"  peak RSS onnxruntime           {ort_kib / 1024:10.1f} MiB")
    print(f"  peak RSS python + numpy        {bare_kib / 1024:10.1f} MiB")
    print(f"  ember / onnxruntime            {ember_kib / ort_kib:10.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
