"""Helpers of the RPC tests: servers and trackers in child processes that stop by themselves,
and a small compiled model (graph and AOT) exported as shared libraries."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import ember
from ember.ir import Function, IRModule, TensorType, Var, call

ROOT = Path(ember.__file__).resolve().parents[1]
#: Every server or tracker a test starts stops by itself after this many seconds.
LIFETIME = 240.0


@dataclass
class Proc:
    """A server or tracker process and the port it listens on."""

    proc: subprocess.Popen[bytes]
    port: int

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return int(self.proc.returncode)


def start(*args: str, lifetime: float = LIFETIME, wait: float = 60.0) -> Proc:
    """Run ``python -m ember rpc ARGS --port 0`` and read the port it prints."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    cmd = [sys.executable, "-m", "ember", "rpc", *args, "--port", "0"]
    cmd += ["--max-lifetime", str(lifetime)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + wait
    line = b""
    while time.monotonic() < deadline and not line.endswith(b"\n"):
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 256)
            if not chunk:
                break
            line += chunk
    if b"listening on" not in line:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{cmd} did not start: {line!r}")
    return Proc(proc, int(line.rsplit(b":", 1)[1]))


def small_model() -> tuple[IRModule, dict[str, np.ndarray]]:
    """y = sum(sigmoid(relu(x + w))) * s: two inputs, one parameter."""
    x = Var("x", TensorType((2, 64), "float32"))
    w = Var("w", TensorType((2, 64), "float32"))
    s = Var("s", TensorType((2, 1), "float32"))
    h = call("relu", call("add", x, w))
    y = call("multiply", call("sum", call("sigmoid", h), axes=(1,), keepdims=True), s)
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(2, 64)}
    return IRModule.from_expr(Function((x, w, s), y)), params


def model_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs of :func:`small_model`."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((2, 64)).astype("float32"),
        "s": rng.standard_normal((2, 1)).astype("float32"),
    }


def export_model(directory: Path, executor: str = "graph") -> Path:
    """Compile :func:`small_model` and export it as ``directory/model_<executor>.so``."""
    mod, params = small_model()
    arts = ember.build(mod, "c", params, executor=executor)
    return Path(ember.export_library(arts, directory / f"model_{executor}.so"))


def local_outputs(lib: Path, executor: str, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run the exported library in this process."""
    dev = ember.cpu(0)
    cls = ember.AotExecutor if executor == "aot" else ember.GraphExecutor
    ex = cls(ember.load_module(str(lib))["default"](dev))
    ex.set_input(**inputs)
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]
