"""Frames, typed messages and the handshake (over a socket pair, no server)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ember.errors import RPCError
from ember.rpc import protocol
from ember.rpc.codec import ProtocolError
from ember.rpc.protocol import (
    Msg,
    client_handshake,
    pack_frame,
    recv_frame,
    server_handshake,
    unpack_frame,
)


def test_frame_round_trip_and_layout() -> None:
    frame = pack_frame(Msg.GET_FUNC, 7, (3, "run"))
    length, kind, seq = struct.unpack_from("<IBI", frame)
    assert (length, kind, seq) == (len(frame) - 4, Msg.GET_FUNC, 7)
    msg = unpack_frame(frame[4:])
    assert msg.type == Msg.GET_FUNC and msg.seq == 7 and msg.body == (3, "run")


@pytest.mark.parametrize(
    ("msg", "body"),
    [
        (Msg.GET_FUNC, ("3", "run")),
        (Msg.GET_FUNC, (3,)),
        (Msg.CALL, (True, ())),
        (Msg.UPLOAD, ("a", 0, "text")),
    ],
)
def test_bodies_are_type_checked(msg: Msg, body: tuple[Any, ...]) -> None:
    with pytest.raises(ProtocolError, match=f"malformed {msg.name}"):
        unpack_frame(pack_frame(msg, 1, body)[4:])


def test_unknown_type_and_short_frames_are_refused() -> None:
    with pytest.raises(ProtocolError, match="unknown message type"):
        unpack_frame(bytes([200, 0, 0, 0, 0]) + pack_frame(Msg.CLOSE, 0, ())[9:])
    with pytest.raises(ProtocolError, match="shorter than its header"):
        unpack_frame(b"\x01")


def test_oversized_frame_is_refused_before_reading_it() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(struct.pack("<I", 2**31))
        with pytest.raises(ProtocolError, match="exceeds the limit of 1024 bytes"):
            recv_frame(b, 1024)


def _handshake(
    server_token: bytes | None, client_token: bytes | None, patch: Callable[[], None] | None = None
) -> tuple[Any, Any]:
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    result: dict[str, Any] = {}

    def serve() -> None:
        try:
            result["server"] = server_handshake(b, server_token, 1 << 16, {"key": "k"})
        except (RPCError, OSError) as exc:
            result["server"] = exc

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        client: Any = client_handshake(a, client_token, 1 << 16, 12.5)
    except RPCError as exc:
        client = exc
    thread.join(10)
    a.close()
    b.close()
    return client, result["server"]


def test_handshake_without_token() -> None:
    client, server = _handshake(None, None)
    assert client == {"key": "k"} and server == 12.5


def test_handshake_with_the_right_token() -> None:
    client, server = _handshake(b"s3cret", b"s3cret")
    assert client == {"key": "k"}


@pytest.mark.parametrize("token", [b"wrong", None])
def test_handshake_refuses_a_wrong_or_missing_token(token: bytes | None) -> None:
    client, server = _handshake(b"s3cret", token)
    assert isinstance(client, RPCError) and isinstance(server, RPCError)
    assert "token" in str(client) and "wrong token" in str(server)


def test_version_mismatch_names_both_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(5)
        protocol.send_frame(a, Msg.HELLO, 0, (protocol.MAGIC, 99, None))
        with pytest.raises(RPCError, match="speaks version 1, the peer speaks version 99"):
            server_handshake(b, None, 1 << 16, {})
        reply = recv_frame(a, 1 << 16)
        assert reply.type == Msg.ERROR and "99" in reply.body[1]


def test_client_names_the_server_version(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5)
        protocol.send_frame(b, Msg.CHALLENGE, 0, (protocol.MAGIC, 7, b"n" * 32, False))
        with pytest.raises(RPCError, match="the peer speaks version 7"):
            client_handshake(a, None, 1 << 16, None)
