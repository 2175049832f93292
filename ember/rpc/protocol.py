"""The RPC wire protocol: length-prefixed frames of typed messages and a versioned handshake.

A frame is ``u32 length (little endian) | u8 message type | u32 sequence | body``, where
``length`` counts the bytes after itself and the body is one codec value (see
:mod:`ember.rpc.codec`), a tuple whose shape :data:`SCHEMAS` fixes per message type. A
frame longer than the receiver's limit is refused before anything is allocated.

Handshake (client first)::

    HELLO   (MAGIC, version, session_timeout)
    CHALLENGE (MAGIC, version, nonce, auth_required)   or ERROR
    AUTH    (hmac_sha256(token, AUTH_CONTEXT + nonce) or b"",)
    WELCOME (info dict)                                or ERROR

A version mismatch is refused by both sides with both versions in the message; the token
is checked with :func:`hmac.compare_digest`. The whole layout is in docs/rpc.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import socket
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ember.errors import RPCError
from ember.rpc.codec import ProtocolError, RefHooks, decode, encode_parts

MAGIC = "ember-rpc"
#: The protocol version; bump on any incompatible change of frames, messages or values.
PROTOCOL_VERSION = 1
AUTH_CONTEXT = b"ember-rpc-auth-v1:"
NONCE_BYTES = 32
#: Default largest frame either side accepts (bytes).
DEFAULT_MAX_FRAME = 64 << 20
#: Default largest file a session may upload (bytes).
DEFAULT_MAX_UPLOAD = 1 << 30
#: Seconds a peer has to complete the handshake.
HANDSHAKE_TIMEOUT = 10.0

_HEADER = struct.Struct("<IBI")


class Msg(IntEnum):
    """Message types; requests come from the client, RETURN/ERROR from the server."""

    HELLO = 1
    CHALLENGE = 2
    AUTH = 3
    WELCOME = 4
    RETURN = 5
    ERROR = 6
    CALL = 10
    GET_FUNC = 11
    FUNC_NAMES = 12
    GLOBAL_FUNC = 13
    LOAD_MODULE = 14
    UPLOAD = 15
    DOWNLOAD = 16
    REMOVE = 17
    LIST_FILES = 18
    ARRAY = 19
    TO_NUMPY = 20
    COPY_FROM = 21
    TIME_EVAL = 22
    FREE = 23
    CLOSE = 24
    REGISTER = 30
    REQUEST = 31
    STATUS = 32


#: The Python types of each message's body fields (``object``: any value).
SCHEMAS: dict[Msg, tuple[type | tuple[type, ...], ...]] = {
    Msg.HELLO: (str, int, (float, int, type(None))),
    Msg.CHALLENGE: (str, int, bytes, bool),
    Msg.AUTH: (bytes,),
    Msg.WELCOME: (dict,),
    Msg.RETURN: (object,),
    Msg.ERROR: (str, str),
    Msg.CALL: (int, tuple),
    Msg.GET_FUNC: (int, str),
    Msg.FUNC_NAMES: (int,),
    Msg.GLOBAL_FUNC: (str,),
    Msg.LOAD_MODULE: (str,),
    Msg.UPLOAD: (str, int, bytes),
    Msg.DOWNLOAD: (str, int, int),
    Msg.REMOVE: (str,),
    Msg.LIST_FILES: (),
    Msg.ARRAY: (object, object),
    Msg.TO_NUMPY: (object,),
    Msg.COPY_FROM: (object, object),
    Msg.TIME_EVAL: (int, str, object, int, int, int, int, tuple),
    Msg.FREE: (list,),
    Msg.CLOSE: (),
    Msg.REGISTER: (dict,),
    Msg.REQUEST: (str, int, (float, int)),
    Msg.STATUS: (),
}


@dataclass(frozen=True)
class Message:
    """One decoded frame: its type, sequence number and body fields."""

    type: Msg
    seq: int
    body: tuple[Any, ...]


def pack_frame(msg: Msg, seq: int, body: tuple[Any, ...], hooks: RefHooks | None = None) -> bytes:
    """The frame bytes of a message (length prefix included)."""
    parts = encode_parts(tuple(body), hooks)
    size = sum(len(p) for p in parts)
    return b"".join([_HEADER.pack(size + 5, int(msg), seq & 0xFFFFFFFF), *parts])


def unpack_frame(data: bytes | bytearray | memoryview, hooks: RefHooks | None = None) -> Message:
    """Decode and type-check a frame without its length prefix (type, seq, body)."""
    if len(data) < 5:
        raise ProtocolError(f"rpc: a frame of {len(data)} bytes is shorter than its header")
    kind, seq = struct.unpack_from("<BI", data)
    try:
        msg = Msg(kind)
    except ValueError:
        raise ProtocolError(f"rpc: unknown message type {kind}") from None
    body = decode(memoryview(data)[5:], hooks)
    schema = SCHEMAS[msg]
    ok = isinstance(body, tuple) and len(body) == len(schema)
    if ok:
        ok = all(
            t is object or (isinstance(v, t) and not (isinstance(v, bool) and t is int))
            for v, t in zip(body, schema, strict=True)
        )
    if not ok:
        raise ProtocolError(f"rpc: malformed {msg.name} message: {_short(body)}")
    return Message(msg, seq, body)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def recv_exact(sock: socket.socket, n: int) -> bytearray:
    """Exactly ``n`` bytes; raises ConnectionError when the peer closes first."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError(f"peer closed the connection ({got} of {n} bytes read)")
        got += k
    return buf


def recv_frame(sock: socket.socket, max_frame: int, hooks: RefHooks | None = None) -> Message:
    """Read one frame; a length above ``max_frame`` is refused before reading the body."""
    (length,) = struct.unpack("<I", recv_exact(sock, 4))
    if length > max_frame:
        raise ProtocolError(
            f"rpc: a frame of {length} bytes exceeds the limit of {max_frame} bytes; "
            "send large data in chunks (upload does) or raise --max-frame"
        )
    return unpack_frame(recv_exact(sock, length), hooks)


def send_frame(
    sock: socket.socket, msg: Msg, seq: int, body: tuple[Any, ...], hooks: RefHooks | None = None
) -> None:
    """Write one frame."""
    sock.sendall(pack_frame(msg, seq, body, hooks))


def auth_mac(token: bytes, nonce: bytes) -> bytes:
    """The client's answer to a challenge: HMAC-SHA256 over the context and nonce."""
    return hmac.new(token, AUTH_CONTEXT + nonce, hashlib.sha256).digest()


def _version_error(peer: int) -> str:
    return (
        f"rpc: protocol version mismatch: this side speaks version {PROTOCOL_VERSION}, "
        f"the peer speaks version {peer}; install matching ember versions on both sides"
    )


def client_handshake(
    sock: socket.socket, token: bytes | None, max_frame: int, session_timeout: float | None
) -> dict[str, Any]:
    """Run the client side of the handshake; returns the server's info dict."""
    send_frame(sock, Msg.HELLO, 0, (MAGIC, PROTOCOL_VERSION, session_timeout))
    reply = recv_frame(sock, max_frame)
    _raise_error(reply)
    if reply.type != Msg.CHALLENGE or reply.body[0] != MAGIC:
        raise ProtocolError(f"rpc: the peer is not an ember RPC server (sent {reply.type.name})")
    if reply.body[1] != PROTOCOL_VERSION:
        raise RPCError(_version_error(reply.body[1]))
    nonce, required = reply.body[2], reply.body[3]
    if required and not token:
        send_frame(sock, Msg.AUTH, 0, (b"",))
        raise RPCError("rpc: the server requires a token; pass token=... (or --token-file)")
    send_frame(sock, Msg.AUTH, 0, (auth_mac(token, nonce) if token else b"",))
    reply = recv_frame(sock, max_frame)
    _raise_error(reply)
    if reply.type != Msg.WELCOME:
        raise ProtocolError(f"rpc: expected WELCOME, got {reply.type.name}")
    info: dict[str, Any] = reply.body[0]
    return info


def server_handshake(
    sock: socket.socket, token: bytes | None, max_frame: int, info: dict[str, Any]
) -> float | None:
    """Run the server side; returns the session timeout the client asked for.

    Raises RPCError (after telling the peer why) on a bad greeting, version or token.
    """
    hello = recv_frame(sock, max_frame)
    if hello.type != Msg.HELLO or hello.body[0] != MAGIC:
        raise _refuse(sock, f"rpc: expected an ember HELLO, got {hello.type.name}")
    if hello.body[1] != PROTOCOL_VERSION:
        raise _refuse(sock, _version_error(hello.body[1]))
    nonce = secrets.token_bytes(NONCE_BYTES)
    send_frame(sock, Msg.CHALLENGE, 0, (MAGIC, PROTOCOL_VERSION, nonce, token is not None))
    answer = recv_frame(sock, max_frame)
    if answer.type != Msg.AUTH:
        raise _refuse(sock, f"rpc: expected AUTH, got {answer.type.name}")
    if token is not None and not hmac.compare_digest(answer.body[0], auth_mac(token, nonce)):
        raise _refuse(sock, "rpc: authentication failed: wrong token")
    send_frame(sock, Msg.WELCOME, 0, (info,))
    timeout = hello.body[2]
    return float(timeout) if timeout else None


def _refuse(sock: socket.socket, message: str) -> RPCError:
    with contextlib.suppress(OSError):
        send_frame(sock, Msg.ERROR, 0, ("RPCError", message))
    return RPCError(message)


def _raise_error(reply: Message) -> None:
    if reply.type == Msg.ERROR:
        raise RPCError(f"rpc: the server refused: {reply.body[1]}")
