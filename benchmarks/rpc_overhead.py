"""RPC overhead on loopback: round trip of an empty remote call, and upload throughput.

Run: ``.venv/bin/python benchmarks/rpc_overhead.py [--calls 2000] [--mib 64]``. It starts
``ember rpc server`` on 127.0.0.1 (a free port, stopping by itself after 10 minutes),
times ``sess.get_function("rpc.noop")()`` (median of 5 rounds) and ``sess.upload`` of
``--mib`` MiB, then the same through Apache TVM's RPC (``tvm.rpc``) when ``tvm`` is
importable (``apache-tvm-ffi`` alone has no RPC; the script says so when TVM is missing).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import select
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ember
from ember.rpc import connect

ROOT = Path(ember.__file__).resolve().parents[1]
LIFETIME_S = 600


def start_server() -> tuple[subprocess.Popen[bytes], int]:
    """An ``ember rpc server`` on a free loopback port."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    cmd = [sys.executable, "-m", "ember", "rpc", "server", "--port", "0"]
    cmd += ["--max-lifetime", str(LIFETIME_S)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, start_new_session=True)
    assert proc.stdout is not None
    line = b""
    deadline = time.monotonic() + 60
    while b"\n" not in line and time.monotonic() < deadline:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            chunk = os.read(proc.stdout.fileno(), 256)
            if not chunk:
                break
            line += chunk
    if b"listening on" not in line:
        proc.kill()
        raise SystemExit(f"the ember rpc server did not start: {line!r}")
    return proc, int(line.split(b"\n")[0].rsplit(b":", 1)[1])


def per_call_us(func: Callable[[], Any], calls: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean microseconds per call."""
    func()
    times = []
    for _ in range(rounds):
        begin = time.perf_counter()
        for _ in range(calls):
            func()
        times.append((time.perf_counter() - begin) / calls * 1e6)
    return statistics.median(times)


def upload_mib_s(upload: Callable[[bytes], Any], mib: int) -> float:
    """MiB per second of one upload of ``mib`` MiB (best of 3)."""
    blob = os.urandom(1 << 20) * mib
    best = float("inf")
    for _ in range(3):
        begin = time.perf_counter()
        upload(blob)
        best = min(best, time.perf_counter() - begin)
    return mib / best


def bench_ember(calls: int, mib: int) -> tuple[float, float, float]:
    """(connect seconds, empty-call microseconds, upload MiB/s) for ember."""
    proc, port = start_server()
    try:
        begin = time.perf_counter()
        sess = connect("127.0.0.1", port, timeout=120)
        connect_s = time.perf_counter() - begin
        with sess:
            noop = sess.get_function("rpc.noop")
            rtt = per_call_us(noop, calls)
            rate = upload_mib_s(lambda blob: sess.upload(blob, "blob.bin"), mib)
        return connect_s, rtt, rate
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def bench_tvm(calls: int, mib: int) -> tuple[float, float, float] | None:
    """The same through tvm.rpc, or None when TVM is not importable."""
    if importlib.util.find_spec("tvm") is None:
        return None
    tvm_rpc = importlib.import_module("tvm.rpc")
    server = tvm_rpc.Server(host="127.0.0.1", port=9300, port_end=9400)
    try:
        begin = time.perf_counter()
        sess = tvm_rpc.connect("127.0.0.1", server.port, session_timeout=LIFETIME_S)
        connect_s = time.perf_counter() - begin
        echo = sess.get_function("testing.echo")
        rtt = per_call_us(lambda: echo(0), calls)
        rate = upload_mib_s(lambda blob: sess.upload(bytearray(blob), "blob.bin"), mib)
        return connect_s, rtt, rate
    finally:
        server.terminate()


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--mib", type=int, default=64)
    args = parser.parse_args()
    rows = [("ember", bench_ember(args.calls, args.mib))]
    tvm = bench_tvm(args.calls, args.mib)
    print(f"{'rpc':<8} {'connect ms':>11} {'empty call us':>14} {'upload MiB/s':>13}")
    if tvm is not None:
        rows.append(("tvm.rpc", tvm))
    for name, (connect_s, rtt, rate) in rows:
        print(f"{name:<8} {connect_s * 1e3:>11.1f} {rtt:>14.1f} {rate:>13.1f}")
    if tvm is None:
        print("tvm.rpc: not importable here (apache-tvm-ffi has no RPC; install apache-tvm)")
    else:
        ratio = rows[0][1][1] / tvm[1]
        print(f"empty call ember / tvm.rpc: {ratio:.2f}")


if __name__ == "__main__":
    main()
