"""End to end over loopback: a server process, sessions in child processes, timeouts, a
server killed mid-call, tokens, and the session directories removed afterwards."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from rpc_util import Proc, local_outputs, model_inputs, start

import ember
from ember.errors import RPCError
from ember.rpc import connect
from ember.rpc.server import Server, ServerConfig, is_loopback
from ember.runtime.libruntime import include_dir
from ember.support.toolchain import compile_shared

pytestmark = pytest.mark.cc


def _sessions(work: Path) -> list[Path]:
    return [p for root in work.iterdir() for p in root.iterdir()]


def _wait(predicate, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _remote_gmod(sess: ember.rpc.Session, lib: Path) -> ember.rpc.RemoteModule:
    sess.upload(lib, "m.so")
    gmod = sess.load_module("m.so")["default"](sess.cpu(0))
    for name, value in model_inputs().items():
        gmod["set_input"](name, value)
    return gmod


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("kind", ["graph", "aot"])
def test_compile_upload_run_compare(
    kind: str, server: Proc, graph_lib: Path, aot_lib: Path, tmp_path: Path
) -> None:
    lib = graph_lib if kind == "graph" else aot_lib
    want = local_outputs(lib, kind, model_inputs())
    cls = ember.AotExecutor if kind == "aot" else ember.GraphExecutor
    with connect("127.0.0.1", server.port, timeout=60) as sess:
        sess.upload(lib, "m.so")
        dev = sess.cpu(0)
        ex = cls(sess.load_module("m.so")["default"](dev))
        ex.set_input("x", ember.nd.array(model_inputs()["x"], dev))
        ex.set_input("s", model_inputs()["s"])
        ex.run()
        got = [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        assert len(_sessions(tmp_path / "work")) == 1
        if kind == "graph":
            report = ex.profile(2)
            assert report.repeat == 2 and len(report.rows) >= 1
    assert _wait(lambda: not _sessions(tmp_path / "work"))


def test_remote_time_evaluator_runs_on_the_server(server: Proc, graph_lib: Path) -> None:
    with connect("127.0.0.1", server.port, timeout=60) as sess:
        dev = sess.cpu(0)
        gmod = _remote_gmod(sess, graph_lib)
        timer = gmod.time_evaluator("run", dev, number=20, repeat=3)
        result = timer()
        assert len(result.results) == 3 and 0 < result.median < 0.05
        # a remote loop: far below one round trip per call
        noop = sess.get_function("rpc.noop")
        begin = time.perf_counter()
        for _ in range(20):
            noop()
        per_call = (time.perf_counter() - begin) / 20
        assert result.median < per_call


def test_several_sessions_at_once(server: Proc, graph_lib: Path) -> None:
    errors: list[BaseException] = []
    pids: list[int] = []

    def one(seed: int) -> None:
        try:
            with connect("127.0.0.1", server.port, timeout=60) as sess:
                pids.append(int(sess.info["pid"]))
                sess.upload(graph_lib, "m.so")
                ex = ember.GraphExecutor(sess.load_module("m.so")["default"](sess.cpu(0)))
                ex.run(**model_inputs(seed))
                want = local_outputs(graph_lib, "graph", model_inputs(seed))[0]
                assert np.array_equal(ex.get_output(0).numpy(), want)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(set(pids)) == 3


def test_a_slow_call_times_out_naming_the_call(server: Proc, graph_lib: Path) -> None:
    sess = connect("127.0.0.1", server.port, timeout=1.0)
    gmod = _remote_gmod(sess, graph_lib)
    timer = gmod.time_evaluator("run", sess.cpu(0), min_repeat_ms=5000)
    begin = time.monotonic()
    with pytest.raises(RPCError, match=r"call 'time_evaluator\('run'\)' timed out after 1 s"):
        timer()
    assert time.monotonic() - begin < 5
    with pytest.raises(RPCError, match="broken|closed"):
        sess.listdir()
    sess.close()


def test_killed_server_gives_rpc_error_within_the_timeout(tmp_path: Path, graph_lib: Path) -> None:
    proc = start("server", "--work-dir", str(tmp_path))
    try:
        sess = connect("127.0.0.1", proc.port, timeout=30)
        worker = int(sess.info["pid"])
        gmod = _remote_gmod(sess, graph_lib)
        timer = gmod.time_evaluator("run", sess.cpu(0), min_repeat_ms=20000)
        threading.Timer(1.0, os.kill, args=(proc.proc.pid, signal.SIGKILL)).start()
        begin = time.monotonic()
        with pytest.raises(RPCError, match=r"time_evaluator\('run'\).*connection .* was lost"):
            timer()
        assert time.monotonic() - begin < 15
        assert _wait(lambda: not _pid_alive(worker), 10), "the session outlived its server"
        sess.close()
    finally:
        proc.stop()


def test_token_is_required_and_checked(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("correct horse\n")
    proc = start("server", "--token-file", str(token_file), "--work-dir", str(tmp_path))
    try:
        with pytest.raises(RPCError, match="requires a token"):
            connect("127.0.0.1", proc.port, timeout=20)
        with pytest.raises(RPCError, match="authentication failed"):
            connect("127.0.0.1", proc.port, token="wrong", timeout=20)
        with connect("127.0.0.1", proc.port, token="correct horse", timeout=20) as sess:
            assert sess.get_function("rpc.echo")(5) == 5
    finally:
        proc.stop()


def test_non_loopback_bind_needs_a_token() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    with pytest.raises(RPCError, match="needs a token"):
        Server(ServerConfig(host="0.0.0.0", port=0))


def test_connect_to_nothing_is_an_rpc_error() -> None:
    server = Server(ServerConfig(port=0))
    port = server.port
    server.close()
    with pytest.raises(RPCError, match="cannot connect"):
        connect("127.0.0.1", port, timeout=2)


def test_session_timeout_ends_the_session(server: Proc) -> None:
    sess = connect("127.0.0.1", server.port, timeout=10, session_timeout=1.0)
    time.sleep(1.5)
    with pytest.raises(RPCError, match="lost|broken"):
        sess.listdir()


CRASH_C = r"""
#include <ember/runtime_api.h>
EMBER_DLL int32_t crash(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv,
                        int32_t* rc, void* rh) {
  *(volatile int*)0 = 1;
  return 0;
}
"""


def test_a_crashing_kernel_ends_only_its_session(server: Proc, tmp_path: Path) -> None:
    src = tmp_path / "crash.c"
    src.write_text(CRASH_C)
    lib = compile_shared([src], tmp_path / "crash.so", include_dirs=[include_dir()])
    other = connect("127.0.0.1", server.port, timeout=30)
    with connect("127.0.0.1", server.port, timeout=30) as sess:
        sess.upload(lib)
        crash = sess.load_module("crash.so")["crash"]
        with pytest.raises(RPCError, match="call 'crash' failed: the connection .* was lost"):
            crash()
    assert other.get_function("rpc.echo")("still here") == "still here"
    other.close()
    with connect("127.0.0.1", server.port, timeout=30) as again:
        assert again.listdir() == []
    assert server.proc.poll() is None
    assert _wait(lambda: not _sessions(tmp_path / "work"))
