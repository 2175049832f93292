"""The tracker: two servers under two keys, requests by key and priority, status."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from rpc_util import Proc, local_outputs, model_inputs, start

import ember
from ember.cli.main import main as cli_main
from ember.errors import RPCError
from ember.rpc import connect_tracker
from ember.rpc.tracker import Tracker, TrackerState


@pytest.fixture
def tracker() -> Iterator[Tracker]:
    """A tracker on 127.0.0.1 (free port) served by a thread, shut down after the test."""
    trk = Tracker("127.0.0.1", 0)
    thread = threading.Thread(target=trk.serve, args=(240.0,), daemon=True)
    thread.start()
    yield trk
    trk.shutdown()
    thread.join(10)


def _servers(tracker: Tracker, tmp_path: Path, keys: list[str]) -> list[Proc]:
    procs = []
    for key in keys:
        work = tmp_path / key
        work.mkdir()
        procs.append(
            start(
                "server",
                "--key",
                key,
                "--tracker",
                f"127.0.0.1:{tracker.port}",
                "--work-dir",
                str(work),
            )
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(tracker.state.servers) < len(keys):
        time.sleep(0.1)
    return procs


def test_two_servers_two_keys(
    tracker: Tracker, tmp_path: Path, graph_lib: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    procs = _servers(tracker, tmp_path, ["alpha", "beta"])
    try:
        client = connect_tracker("127.0.0.1", tracker.port)
        want = local_outputs(graph_lib, "graph", model_inputs())[0]
        ports = {}
        for key in ("alpha", "beta"):
            with client.request(key, session_timeout=60, timeout=30) as sess:
                assert sess.info["key"] == key
                ports[key] = int(sess.peer.rsplit(":", 1)[1])
                sess.upload(graph_lib, "m.so")
                ex = ember.GraphExecutor(sess.load_module("m.so")["default"](sess.cpu(0)))
                ex.run(**model_inputs())
                assert np.array_equal(ex.get_output(0).numpy(), want)
        assert ports == {"alpha": procs[0].port, "beta": procs[1].port}
        # both at once: one host drives both servers
        a = client.request("alpha", timeout=30)
        b = client.request("beta", timeout=30)
        assert a.get_function("rpc.echo")(1) == b.get_function("rpc.echo")(1) == 1
        states = {s["key"]: s["state"] for s in client.status()["servers"]}
        assert states == {"alpha": "busy", "beta": "busy"}
        with pytest.raises(RPCError, match="no free server with key 'alpha' within 0.5 s"):
            client.request("alpha", timeout=0.5)
        a.close()
        b.close()
        assert cli_main(["rpc", "status", "--tracker", f"127.0.0.1:{tracker.port}"]) == 0
        out = capsys.readouterr().out
        assert "alpha" in out and "beta" in out and "queue:" in out
    finally:
        for proc in procs:
            proc.stop()


def test_unknown_key_times_out_naming_the_known_keys() -> None:
    state = TrackerState()
    state.register({"key": "k1", "host": "127.0.0.1", "port": 1, "started": 0, "active": 0})
    with pytest.raises(RPCError, match=r"keys in the pool: \['k1'\]"):
        state.request("k2", 0, 0.05)


def test_priority_then_arrival_order() -> None:
    state = TrackerState()
    info = {"key": "k", "host": "127.0.0.1", "port": 1, "started": 0, "active": 1}
    state.register(info)
    got: list[str] = []

    def ask(name: str, priority: int) -> None:
        state.request("k", priority, 10)
        got.append(name)

    threads = []
    for name, priority in (("low", 0), ("high", 5), ("low2", 0)):
        threads.append(threading.Thread(target=ask, args=(name, priority)))
        threads[-1].start()
        time.sleep(0.05)
    assert state.status()["queue"] == {"k": 3}
    for started in range(3):  # the server reports each session started and ended
        state.register(dict(info, active=0, started=started))
        deadline = time.monotonic() + 5
        while len(got) < started + 1 and time.monotonic() < deadline:
            time.sleep(0.01)
    for t in threads:
        t.join(10)
    assert got == ["high", "low", "low2"]


def test_handed_out_server_is_busy_until_its_session_shows() -> None:
    state = TrackerState()
    info = {"key": "k", "host": "h", "port": 1, "started": 4, "active": 0}
    state.register(info)
    assert state.request("k", 0, 1) == ("h", 1)
    assert state.status()["servers"][0]["state"] == "busy"
    state.register(info)  # heartbeat before the client connected: still reserved
    assert state.status()["servers"][0]["state"] == "busy"
    state.register(dict(info, started=5, active=1))
    assert state.status()["servers"][0]["state"] == "busy"
    state.register(dict(info, started=5, active=0))
    assert state.status()["servers"][0]["state"] == "free"
