"""The tracker: a pool of RPC servers by device key, handed out one session at a time.

``ember rpc tracker --port 9190`` runs :class:`Tracker`. Servers send REGISTER (key,
address, sessions started, sessions active) every second; a client sends REQUEST (key,
priority, timeout) and gets the address of a free server, the highest priority first, in
arrival order within a priority. A server handed out counts as busy until its heartbeat
shows the new session started and ended, or for :data:`LEASE_SECONDS` if the client never
connects. Every connection carries one request, after the same handshake as a server::

    tracker = ember.rpc.connect_tracker("127.0.0.1", 9190)
    sess = tracker.request("rk3399", priority=1, session_timeout=60)
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ember.errors import RPCError
from ember.rpc.client import Session, connect
from ember.rpc.protocol import (
    DEFAULT_MAX_FRAME,
    Msg,
    client_handshake,
    recv_frame,
    send_frame,
    server_handshake,
)

#: Seconds a handed-out server stays reserved while its client has not connected.
LEASE_SECONDS = 10.0
#: Seconds without a heartbeat after which a server is considered gone.
STALE_SECONDS = 5.0
_TRACKER_FRAME = 1 << 20


@dataclass
class _Entry:
    key: str
    host: str
    port: int
    started: int = 0
    active: int = 0
    last_seen: float = 0.0
    lease_started: int = -1
    lease_until: float = 0.0

    def state(self, now: float) -> str:
        if now - self.last_seen > STALE_SECONDS:
            return "lost"
        if self.lease_until > now and self.started < self.lease_started:
            return "busy"
        return "busy" if self.active else "free"


@dataclass
class _Waiter:
    key: str
    priority: int
    order: int
    event: threading.Event = field(default_factory=threading.Event)
    result: tuple[str, int] | None = None


class TrackerState:
    """The pool and the queue, guarded by one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.servers: dict[tuple[str, int], _Entry] = {}
        self.waiters: list[_Waiter] = []
        self._order = itertools.count()

    def register(self, info: dict[str, Any]) -> None:
        """Record a server's heartbeat and hand it to a waiting client if it is free."""
        addr = (str(info["host"]), int(info["port"]))
        with self.lock:
            entry = self.servers.get(addr)
            if entry is None or entry.key != str(info["key"]):
                entry = self.servers[addr] = _Entry(str(info["key"]), *addr)
            entry.started = int(info["started"])
            entry.active = int(info["active"])
            entry.last_seen = time.monotonic()
            self._dispatch()

    def request(self, key: str, priority: int, timeout: float) -> tuple[str, int]:
        """The address of a free server under ``key``, waiting up to ``timeout`` seconds."""
        waiter = _Waiter(key, priority, next(self._order))
        with self.lock:
            self.waiters.append(waiter)
            self._dispatch()
        waiter.event.wait(max(0.0, timeout))
        with self.lock:
            if waiter.result is None:
                self.waiters.remove(waiter)
                known = sorted({e.key for e in self.servers.values()})
                raise RPCError(
                    f"tracker: no free server with key {key!r} within {timeout:g} s; "
                    f"keys in the pool: {known}; see 'ember rpc status'"
                )
            return waiter.result

    def _dispatch(self) -> None:
        now = time.monotonic()
        for waiter in sorted(self.waiters, key=lambda w: (-w.priority, w.order)):
            for addr in sorted(self.servers):
                entry = self.servers[addr]
                if entry.key == waiter.key and entry.state(now) == "free":
                    entry.lease_started = entry.started + 1
                    entry.lease_until = now + LEASE_SECONDS
                    waiter.result = addr
                    self.waiters.remove(waiter)
                    waiter.event.set()
                    break

    def status(self) -> dict[str, Any]:
        """The pool (servers with their state) and the queue length per key."""
        now = time.monotonic()
        with self.lock:
            servers = [
                {
                    "key": e.key,
                    "host": e.host,
                    "port": e.port,
                    "state": e.state(now),
                    "sessions": e.started,
                }
                for _, e in sorted(self.servers.items())
            ]
            queue: dict[str, int] = {}
            for w in self.waiters:
                queue[w.key] = queue.get(w.key, 0) + 1
        return {"servers": servers, "queue": queue}


class Tracker(socketserver.ThreadingTCPServer):
    """The tracker's TCP server (one thread per connection, one request per connection)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, token: bytes | None = None) -> None:
        self.state = TrackerState()
        self.token = token
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        """The port the tracker listens on."""
        return int(self.server_address[1])

    def serve(self, max_lifetime: float | None = None) -> None:
        """Serve until ``shutdown()`` or for ``max_lifetime`` seconds."""
        timer = None
        if max_lifetime:
            timer = threading.Timer(max_lifetime, self.shutdown)
            timer.daemon = True
            timer.start()
        try:
            self.serve_forever(poll_interval=0.1)
        finally:
            if timer is not None:
                timer.cancel()
            self.server_close()


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        tracker: Tracker = self.server  # type: ignore[assignment]
        sock: socket.socket = self.request
        sock.settimeout(10.0)
        try:
            server_handshake(sock, tracker.token, _TRACKER_FRAME, {"role": "tracker"})
            msg = recv_frame(sock, _TRACKER_FRAME)
            if msg.type == Msg.REGISTER:
                tracker.state.register(msg.body[0])
                value: Any = None
            elif msg.type == Msg.REQUEST:
                sock.settimeout(None)
                key, priority, wait = msg.body
                value = list(tracker.state.request(key, priority, min(float(wait), 3600.0)))
                sock.settimeout(10.0)
            elif msg.type == Msg.STATUS:
                value = tracker.state.status()
            else:
                raise RPCError(f"tracker: {msg.type.name} is not a tracker request")
            send_frame(sock, Msg.RETURN, msg.seq, (value,))
        except (RPCError, KeyError, TypeError, ValueError) as exc:
            with contextlib.suppress(OSError):
                send_frame(sock, Msg.ERROR, 0, (type(exc).__name__, str(exc)))
        except OSError:
            pass


def _one_shot(
    addr: tuple[str, int], token: bytes | None, msg: Msg, body: tuple[Any, ...], timeout: float
) -> Any:
    what = f"tracker {msg.name.lower()}"
    try:
        with socket.create_connection(addr, timeout=timeout) as sock:
            client_handshake(sock, token, DEFAULT_MAX_FRAME, None)
            send_frame(sock, msg, 1, body)
            reply = recv_frame(sock, DEFAULT_MAX_FRAME)
    except TimeoutError:
        raise RPCError(f"rpc: call '{what}' timed out after {timeout:g} s") from None
    except OSError as exc:
        raise RPCError(f"rpc: call '{what}' to {addr[0]}:{addr[1]} failed: {exc}") from None
    if reply.type == Msg.ERROR:
        raise RPCError(f"rpc: call '{what}' failed: {reply.body[1]}")
    return reply.body[0]


def register_with_tracker(
    addr: tuple[str, int], info: dict[str, Any], token: bytes | None, timeout: float = 1.0
) -> None:
    """Send one heartbeat (a server's key, address and session counts) to the tracker."""
    _one_shot(addr, token, Msg.REGISTER, (info,), timeout)


class TrackerClient:
    """A client of the tracker at ``host:port``."""

    def __init__(self, host: str, port: int, token: bytes | None = None, timeout: float = 10.0):
        self.address = (host, port)
        self.token = token
        self.timeout = timeout

    def request(
        self,
        key: str,
        priority: int = 0,
        session_timeout: float | None = None,
        timeout: float = 60.0,
        token: str | bytes | None = None,
        call_timeout: float = 60.0,
    ) -> Session:
        """A session on a free server under ``key`` (waiting up to ``timeout`` seconds)."""
        host, port = _one_shot(
            self.address, self.token, Msg.REQUEST, (key, priority, float(timeout)), timeout + 5
        )
        server_token = token if token is not None else self.token
        return connect(
            host, port, token=server_token, timeout=call_timeout, session_timeout=session_timeout
        )

    def status(self) -> dict[str, Any]:
        """The pool and the queue (what ``ember rpc status`` prints)."""
        result: dict[str, Any] = _one_shot(self.address, self.token, Msg.STATUS, (), self.timeout)
        return result

    def text_summary(self) -> str:
        """The status as a table: one line per server, then the queue."""
        status = self.status()
        lines = [f"{'key':<16} {'address':<24} {'state':<6} sessions"]
        for s in status["servers"]:
            addr = f"{s['host']}:{s['port']}"
            lines.append(f"{s['key']:<16} {addr:<24} {s['state']:<6} {s['sessions']}")
        queue = status["queue"]
        waiting = ", ".join(f"{k}={n}" for k, n in sorted(queue.items()))
        lines.append(f"queue: {waiting or 'empty'}")
        return "\n".join(lines)


def connect_tracker(
    host: str, port: int, token: str | bytes | None = None, timeout: float = 10.0
) -> TrackerClient:
    """A client of the tracker at ``host:port`` (TVM's ``rpc.connect_tracker``)."""
    key = token.encode() if isinstance(token, str) else token
    return TrackerClient(host, port, key, timeout)
