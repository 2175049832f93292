"""The main job, end to end on the bundled example model (``make demo``).

1. import the ONNX model, 2. compile it for the C target into artifacts, 3. show the
artifacts, 4. load them through the code-loading process and run the graph executor,
5. check the result against ember's numpy reference evaluator, 6. export a package and run
it back, 7. time it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ember
from ember.examples import EXAMPLE_MODEL
from ember.ir import evaluate
from ember.tools.package import load_package, write_package


def main(model_path: Path = EXAMPLE_MODEL) -> int:
    """Run the demo; return a process exit code."""
    print(f"ember {ember.__version__}: demo on {model_path.name}")
    start = time.perf_counter()
    mod, params = ember.frontend.from_onnx(model_path)
    print(f"[1] imported: {len(params)} parameters, inputs {[p.name for p in mod.main.params]}")
    artifacts = ember.build(mod, target="c", params=params)
    print(f"[2] compiled in {time.perf_counter() - start:.2f} s into {len(artifacts)} artifacts:")
    print(artifacts.inspect())
    dev = ember.cpu(0)
    factory = ember.load_artifacts(artifacts, dev)
    ge = ember.GraphExecutor(factory["default"](dev))
    image = np.random.default_rng(0).random((1, 1, 28, 28), dtype=np.float32)
    ge.set_input("image", image)
    ge.run()
    probs = ge.get_output(0).numpy()
    print(f"[3] ran: class probabilities {np.array2string(probs[0], precision=4)}")
    reference = evaluate(mod, {"image": image}, params)[0]
    err = float(np.abs(probs - reference).max())
    print(f"[4] max |ember - numpy reference| = {err:.2e}")
    with tempfile.TemporaryDirectory() as tmp:
        package = write_package(artifacts, Path(tmp) / "mnist_cnn.tar")
        loaded, _ = load_package(package, tmp)
        again = ember.GraphExecutor(loaded["default"](dev))
        again.set_input("image", image)
        again.run()
        same = np.array_equal(again.get_output(0).numpy(), probs)
        print(f"[5] package {package.name}: {package.stat().st_size} bytes, reloaded: {same}")
    timing = ge.benchmark(dev, repeat=5, number=20)
    print(f"[6] latency: median {timing.median * 1e6:.1f} us over 5 x 20 runs")
    ok = err < 1e-4 and same
    print("demo OK" if ok else "demo FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
