"""Fuzzing a live server: malformed, truncated and oversized frames, wrong tokens and
path-traversal names are refused; the server keeps serving; nothing is written outside a
session directory."""

from __future__ import annotations

import os
import random
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rpc_util import Proc, start

from ember.errors import RPCError
from ember.rpc import connect
from ember.rpc.protocol import (
    MAGIC,
    PROTOCOL_VERSION,
    Msg,
    client_handshake,
    pack_frame,
    recv_frame,
)

TOKEN = "fuzz-token"


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Proc, Path]]:
    """One token-protected server for the module, its work root under a fresh directory."""
    base = tmp_path_factory.mktemp("fuzz")
    (base / "token").write_text(TOKEN)
    work = base / "work"
    work.mkdir()
    proc = start(
        "server",
        "--token-file",
        str(base / "token"),
        "--work-dir",
        str(work),
        "--max-frame",
        "65536",
        "--max-sessions",
        "8",
        "--idle-timeout",
        "60",
    )
    yield proc, base
    proc.stop()


def _raw(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True when the server closes the connection (after at most an ERROR frame)."""
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionError, TimeoutError):
        return True
    finally:
        sock.close()
    return False


def _authed(port: int) -> socket.socket:
    sock = _raw(port)
    client_handshake(sock, TOKEN.encode(), 65536, None)
    return sock


def _still_serves(port: int) -> None:
    with connect("127.0.0.1", port, token=TOKEN, timeout=20) as sess:
        assert sess.get_function("rpc.echo")("alive") == "alive"


def _files(base: Path) -> set[str]:
    return {str(p.relative_to(base)) for p in base.rglob("*")}


def _settled(base: Path) -> set[str]:
    """The files under ``base`` once no session directory is left (waits up to 20 s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any("session-" in f for f in _files(base)):
        time.sleep(0.05)
    return _files(base)


def test_garbage_before_the_handshake(fuzz_server: tuple[Proc, Path]) -> None:
    proc, _ = fuzz_server
    rng = random.Random(1)
    payloads = [
        b"GET / HTTP/1.1\r\n\r\n",
        struct.pack("<I", 0xFFFFFFFF),
        struct.pack("<I", 100) + b"short",
        pack_frame(Msg.CALL, 1, (1, ())),
        pack_frame(Msg.HELLO, 0, ("not-ember", PROTOCOL_VERSION, None)),
        pack_frame(Msg.HELLO, 0, (MAGIC, PROTOCOL_VERSION + 1, None)),
    ] + [bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) for _ in range(3)]
    for payload in payloads:
        sock = _raw(proc.port)
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        assert _closed_by_server(sock), payload
    _still_serves(proc.port)


def test_wrong_tokens(fuzz_server: tuple[Proc, Path]) -> None:
    proc, _ = fuzz_server
    for token in ("", "fuzz-toke", "fuzz-token ", "x" * 1000):
        with pytest.raises(RPCError, match="token"):
            connect("127.0.0.1", proc.port, token=token or None, timeout=10)
    sock = _raw(proc.port)  # a forged answer of the wrong length
    sock.sendall(pack_frame(Msg.HELLO, 0, (MAGIC, PROTOCOL_VERSION, None)))
    recv_frame(sock, 65536)
    sock.sendall(pack_frame(Msg.AUTH, 0, (b"\x00" * 7,)))
    reply = recv_frame(sock, 65536)
    assert reply.type == Msg.ERROR and "wrong token" in reply.body[1]
    assert _closed_by_server(sock)
    _still_serves(proc.port)


def test_malformed_frames_after_the_handshake(fuzz_server: tuple[Proc, Path]) -> None:
    proc, _ = fuzz_server
    rng = random.Random(2)
    valid = pack_frame(Msg.GET_FUNC, 3, (1, "run"))
    bodies = [
        struct.pack("<I", 70000) + b"x" * 16,  # over --max-frame
        struct.pack("<I", 3) + b"abc",  # shorter than a header
        struct.pack("<I", 5) + bytes([250, 0, 0, 0, 0]),  # unknown type
        pack_frame(Msg.CALL, 1, ("one", ())),  # wrong field types
    ]
    for _ in range(10):
        frame = bytearray(valid)
        pos = rng.randrange(4, len(frame))
        frame[pos] = rng.randrange(256)
        bodies.append(bytes(frame))
    for body in bodies:
        sock = _authed(proc.port)
        sock.sendall(body)
        try:
            reply = recv_frame(sock, 65536)
            assert reply.type == Msg.ERROR
        except (ConnectionError, TimeoutError, RPCError):
            pass
        sock.close()
    sock = _authed(proc.port)  # truncated: the peer stops mid-frame
    sock.sendall(valid[:9])
    sock.shutdown(socket.SHUT_WR)
    assert _closed_by_server(sock)
    _still_serves(proc.port)


def test_path_traversal_is_refused_and_nothing_escapes(fuzz_server: tuple[Proc, Path]) -> None:
    proc, base = fuzz_server
    before = _settled(base)
    names = [
        "../escape",
        "../../escape",
        "/tmp/escape",
        "a/b",
        "..",
        ".",
        "sub/../x",
        "x\0y",
        "..\\escape",
        "\u2215etc",
        "~",
        "escape/",
    ]
    with connect("127.0.0.1", proc.port, token=TOKEN, timeout=20) as sess:
        for name in names:
            for call in (
                lambda n=name: sess.upload(b"evil", n),
                lambda n=name: sess.download(n),
                lambda n=name: sess.remove(n),
                lambda n=name: sess.load_module(n),
            ):
                try:
                    call()
                except RPCError:
                    continue
                assert name == "\u2215etc", f"{name!r} was accepted"  # a plain unicode name
        session_files = sess.listdir()
    assert set(session_files) <= {"\u2215etc"}
    assert not Path("/tmp/escape").exists()
    assert _settled(base) == before, "files were left outside or after the session"


def test_busy_server_refuses_politely(fuzz_server: tuple[Proc, Path]) -> None:
    proc, _ = fuzz_server
    held = [connect("127.0.0.1", proc.port, token=TOKEN, timeout=20) for _ in range(8)]
    try:
        with pytest.raises(RPCError, match="server busy"):
            connect("127.0.0.1", proc.port, token=TOKEN, timeout=20)
    finally:
        for sess in held:
            sess.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            _still_serves(proc.port)
            break
        except RPCError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert os.path.isdir(fuzz_server[1] / "work")
