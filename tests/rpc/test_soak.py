"""A bounded soak: 200 sessions, 4 at a time, over loopback. Afterwards the server has no
session processes left, the same open file descriptors, no session directories, and its
resident memory grew by less than MEMORY_BOUND (measured after 8 warm-up sessions)."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from rpc_util import start

import ember
from ember.rpc import connect

pytestmark = pytest.mark.slow

SESSIONS = 200
PARALLEL = 4
#: Allowed growth of the server's resident memory over the soak.
MEMORY_BOUND = 8 << 20


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _session(port: int, index: int) -> None:
    with connect("127.0.0.1", port, timeout=60) as sess:
        data = np.full((16, 16), index, dtype="float32")
        arr = ember.nd.array(data, sess.cpu(0))
        assert float(arr.numpy().sum()) == 256.0 * index
        sess.upload(data.tobytes(), "blob.bin")
        assert sess.download("blob.bin") == data.tobytes()
        assert sess.get_function("rpc.echo")(index) == index


def _settle(pid: int, work: Path, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _children(pid) and not any(p.name.startswith("session-") for p in work.rglob("*")):
            return
        time.sleep(0.1)


def test_soak_leaks_nothing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    proc = start("server", "--work-dir", str(work), "--max-sessions", "16", lifetime=900)
    pid = proc.proc.pid
    try:
        for i in range(8):
            _session(proc.port, i)
        _settle(pid, work)
        fds, rss = _fds(pid), _rss(pid)
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda i: _session(proc.port, i), range(SESSIONS)))
        _settle(pid, work)
        assert _children(pid) == [], "session processes left behind"
        assert [p.name for p in work.rglob("*")] == [next(work.iterdir()).name]
        assert _fds(pid) == fds
        growth = _rss(pid) - rss
        print(f"soak: {SESSIONS} sessions, server fds {fds}, RSS {rss} B, growth {growth} B")
        assert growth < MEMORY_BOUND, f"server memory grew by {growth} bytes"
    finally:
        assert proc.stop() == 0
    assert list(work.iterdir()) == []
