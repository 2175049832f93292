"""The client: ``ember.rpc.connect(host, port, token=..., timeout=...)`` returns a Session.

A :class:`Session` talks to one server session through a transport (a socket here, the
handler itself in :class:`ember.rpc.LocalSession`). Every request names its call; a
timeout, or a server that goes away, raises :class:`RPCError` naming the call, and the
session is then closed. Example::

    sess = ember.rpc.connect("127.0.0.1", 9090, token=b"secret", timeout=30)
    sess.upload("model.so")
    dev = sess.cpu(0)
    gmod = ember.GraphExecutor(sess.load_module("model.so")["default"](dev))
    gmod.set_input("x", x)
    gmod.run()
    y = gmod.get_output(0).numpy()
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ember.errors import RPCError
from ember.rpc.codec import RefHooks, RefKind
from ember.rpc.protocol import (
    DEFAULT_MAX_FRAME,
    Message,
    Msg,
    client_handshake,
    pack_frame,
    recv_frame,
    unpack_frame,
)
from ember.rpc.remote import (
    RemoteDevice,
    RemoteModule,
    RemoteNDArray,
    RemotePackedFunc,
    ref_kind,
)
from ember.runtime.device import RPC_SESS_MASK, Device

#: Default seconds for connecting and the handshake (includes starting a session process).
CONNECT_TIMEOUT = 30.0
#: Bytes per UPLOAD/DOWNLOAD chunk (kept well under the frame limit).
CHUNK = 4 << 20
_SESSION_INDEX = itertools.count()

#: ``(frame bytes, expects a reply, what) -> reply Message or None``
Exchange = Callable[[bytes, bool, str], Message | None]


class Session:
    """A remote session: files, modules, devices and arrays on the server."""

    def __init__(self, exchange: Exchange, closer: Callable[[], None], peer: str) -> None:
        self._exchange = exchange
        self._closer = closer
        self.peer = peer
        self.index = next(_SESSION_INDEX) % 1000
        self.closed = False
        #: What the server said about itself in the handshake (key, limits, process id).
        self.info: dict[str, Any] = {}
        self._seq = itertools.count(1)
        self._lock = threading.RLock()
        self._to_free: list[int] = []
        self.hooks = RefHooks(
            to_ref=lambda obj: ref_kind(obj, self), from_ref=self._from_ref, device=self.device
        )

    # ---- plumbing ---------------------------------------------------------------------
    def _from_ref(self, kind: RefKind, ident: int, meta: Any) -> Any:
        if kind == RefKind.MODULE:
            return RemoteModule(self, ident, str(meta))
        if kind == RefKind.FUNC:
            return RemotePackedFunc(self, ident, f"#{ident}")
        dtype, shape = meta
        return RemoteNDArray(self, ident, str(dtype), tuple(shape), self.cpu(0))

    def _release(self, ident: int) -> None:
        if not self.closed:
            self._to_free.append(ident)

    def _request(self, msg: Msg, body: tuple[Any, ...], what: str) -> Any:
        with self._lock:
            if self.closed:
                raise RPCError(f"rpc: call '{what}' on a closed session to {self.peer}")
            if self._to_free:
                freed, self._to_free = self._to_free, []
                self._exchange(pack_frame(Msg.FREE, 0, (freed,)), False, "free")
            seq = next(self._seq) & 0xFFFFFFFF
            reply = self._exchange(pack_frame(msg, seq, body, self.hooks), True, what)
        if reply is None or reply.seq != seq:
            raise RPCError(f"rpc: call '{what}': reply out of order from {self.peer}")
        if reply.type == Msg.ERROR:
            raise RPCError(
                f"rpc: call '{what}' failed on {self.peer}: {reply.body[0]}: {reply.body[1]}"
            )
        return reply.body[0]

    def _simple(self, msg_name: str, body: tuple[Any, ...], what: str) -> Any:
        return self._request(Msg[msg_name], body, what)

    def _request_ref(self, msg_name: str, arr: RemoteNDArray, what: str, *rest: Any) -> Any:
        return self._request(Msg[msg_name], (arr, *rest), what)

    def _call(self, ident: int, args: tuple[Any, ...], name: str) -> Any:
        return self._request(Msg.CALL, (ident, tuple(args)), name)

    def _get_function(self, mod_id: int, name: str) -> RemotePackedFunc | None:
        func = self._request(Msg.GET_FUNC, (mod_id, name), f"module[{name!r}]")
        if isinstance(func, RemotePackedFunc):
            func._name = name
        return func

    # ---- the public API ---------------------------------------------------------------
    def upload(self, data: str | os.PathLike[str] | bytes, target: str | None = None) -> str:
        """Copy a local file (or bytes) into the session directory; returns its name."""
        if isinstance(data, bytes | bytearray):
            if target is None:
                raise RPCError("upload(bytes, name): a name is needed for bytes")
            blob = bytes(data)
        else:
            blob = Path(data).read_bytes()
            target = target or Path(data).name
        offset = 0
        while True:
            chunk = blob[offset : offset + CHUNK]
            self._request(Msg.UPLOAD, (target, offset, chunk), f"upload({target!r})")
            offset += len(chunk)
            if offset >= len(blob):
                return target

    def download(self, name: str) -> bytes:
        """The contents of file ``name`` of the session directory."""
        parts: list[bytes] = []
        offset = 0
        while True:
            chunk = self._request(Msg.DOWNLOAD, (name, offset, CHUNK), f"download({name!r})")
            parts.append(chunk)
            offset += len(chunk)
            if len(chunk) < CHUNK:
                return b"".join(parts)

    def remove(self, name: str) -> None:
        """Delete file ``name`` from the session directory."""
        self._request(Msg.REMOVE, (name,), f"remove({name!r})")

    def listdir(self) -> list[str]:
        """The names of the files in the session directory."""
        names: list[str] = self._request(Msg.LIST_FILES, (), "listdir")
        return names

    def load_module(self, name: str) -> RemoteModule:
        """Load an uploaded shared library on the server; returns the remote module."""
        mod: RemoteModule = self._request(Msg.LOAD_MODULE, (name,), f"load_module({name!r})")
        return mod

    def get_function(self, name: str) -> RemotePackedFunc:
        """A global function of the server (``rpc.echo`` and ``rpc.noop`` always exist)."""
        func: RemotePackedFunc = self._request(Msg.GLOBAL_FUNC, (name,), f"get_function({name!r})")
        func._name = name
        return func

    def device(self, dev: Device | int, dev_id: int = 0) -> RemoteDevice:
        """The session's device ``dev`` (a local Device or device type)."""
        if isinstance(dev, Device):
            dev_type, dev_id = dev.device_type % RPC_SESS_MASK, dev.device_id
        else:
            dev_type = int(dev)
        return RemoteDevice(dev_type + RPC_SESS_MASK * (self.index + 1), dev_id, self)

    def cpu(self, dev_id: int = 0) -> RemoteDevice:
        """The server's CPU ``dev_id``."""
        return self.device(1, dev_id)

    def close(self) -> None:
        """End the session (the server removes its directory); safe to call twice."""
        with self._lock:
            if self.closed:
                return
            with contextlib.suppress(RPCError, OSError):
                self._exchange(pack_frame(Msg.CLOSE, 0, ()), False, "close")
            self.closed = True
            self._closer()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<ember.rpc.Session {self.peer}{' closed' if self.closed else ''}>"


class SocketExchange:
    """Frames over a connected socket, with a per-call timeout."""

    def __init__(self, sock: socket.socket, peer: str, timeout: float, max_frame: int) -> None:
        self.sock = sock
        self.peer = peer
        self.timeout = timeout
        self.max_frame = max_frame
        self.hooks: RefHooks | None = None
        self.broken = False

    def __call__(self, frame: bytes, reply: bool, what: str) -> Message | None:
        if self.broken:
            raise RPCError(f"rpc: call '{what}': the connection to {self.peer} is broken")
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(frame)
            return recv_frame(self.sock, self.max_frame, self.hooks) if reply else None
        except TimeoutError:
            self.broken = True
            raise RPCError(
                f"rpc: call '{what}' timed out after {self.timeout:g} s waiting for {self.peer}; "
                "raise timeout=... if the call is slow, or check the server"
            ) from None
        except (ConnectionError, OSError) as exc:
            self.broken = True
            raise RPCError(
                f"rpc: call '{what}' failed: the connection to {self.peer} was lost ({exc}); "
                "the server may have stopped or crashed"
            ) from None

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def connect(
    host: str,
    port: int,
    token: str | bytes | None = None,
    timeout: float = 60.0,
    session_timeout: float | None = None,
    max_frame: int = DEFAULT_MAX_FRAME,
    connect_timeout: float = CONNECT_TIMEOUT,
) -> Session:
    """Open a session on the server at ``host:port`` (TVM's ``rpc.connect``).

    ``timeout`` bounds every call (seconds); ``connect_timeout`` bounds connecting and the
    handshake (the server starts a session process first); ``session_timeout`` asks the
    server to end the session after that many seconds.
    """
    peer = f"{host}:{port}"
    key = token.encode() if isinstance(token, str) else token
    try:
        sock = socket.create_connection((host, port), timeout=connect_timeout)
    except OSError as exc:
        raise RPCError(f"rpc: cannot connect to {peer}: {exc}; is the server running?") from None
    try:
        info = client_handshake(sock, key, max_frame, session_timeout)
    except TimeoutError:
        sock.close()
        raise RPCError(
            f"rpc: call 'connect' timed out after {connect_timeout:g} s during the handshake "
            f"with {peer}; the server may be overloaded (raise connect_timeout=...)"
        ) from None
    except (ConnectionError, OSError) as exc:
        sock.close()
        raise RPCError(f"rpc: call 'connect': {peer} closed the connection ({exc})") from None
    except RPCError:
        sock.close()
        raise
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    exchange = SocketExchange(sock, peer, timeout, max_frame)
    session = Session(exchange, exchange.close, peer)
    session.info = info
    exchange.hooks = session.hooks
    return session


def decode_reply(frame: bytes, hooks: RefHooks) -> Message:
    """Decode a reply frame (length prefix included) for an in-process transport."""
    return unpack_frame(memoryview(frame)[4:], hooks)
