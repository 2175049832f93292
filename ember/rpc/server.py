"""The RPC server: accept connections, run each session in its own process and directory.

``ember rpc server --host 127.0.0.1 --port 9090 [--key K] [--tracker H:P] [--token-file F]``.
The accepting process is one thread and never loads a model: each connection is handed
to a fresh ``python -m ember.rpc.worker`` (the socket passed as an inherited descriptor)
with a new directory under the server's work root. When a session process ends - closed,
timed out or crashed - the server reaps it and removes its directory; on stop it ends
the sessions left and removes the work root. A crashing kernel therefore kills one
session, never the server. Binding to anything but loopback needs a token.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ember.errors import RPCError
from ember.rpc.protocol import DEFAULT_MAX_FRAME, DEFAULT_MAX_UPLOAD, Msg, send_frame
from ember.rpc.tracker import register_with_tracker

#: The folder holding the ``ember`` package (put first on the session processes' path).
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


@dataclass
class ServerConfig:
    """Everything ``ember rpc server`` takes (times in seconds, sizes in bytes)."""

    host: str = "127.0.0.1"
    port: int = 9090
    key: str = ""
    token: bytes | None = None
    tracker: tuple[str, int] | None = None
    advertise: str | None = None
    max_sessions: int = 4
    max_frame: int = DEFAULT_MAX_FRAME
    max_upload: int = DEFAULT_MAX_UPLOAD
    idle_timeout: float = 300.0
    max_lifetime: float | None = None
    work_dir: str | None = None
    heartbeat: float = 1.0


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1 or localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    directory: str
    started: float = field(default_factory=time.monotonic)


class Server:
    """An RPC server bound to ``config.host:config.port`` (port 0 picks a free port)."""

    def __init__(self, config: ServerConfig) -> None:
        if not is_loopback(config.host) and not config.token:
            raise RPCError(
                f"rpc server: binding to {config.host!r} (not loopback) needs a token; "
                "pass --token-file FILE (a shared secret the clients also pass)"
            )
        self.config = config
        family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((config.host, config.port))
        self.sock.listen(16)
        self.port: int = self.sock.getsockname()[1]
        self.root = tempfile.mkdtemp(prefix="ember-rpc-server-", dir=config.work_dir)
        self.children: list[_Child] = []
        self.started = 0
        self.stopping = False
        self._next_beat = 0.0
        self._tracker_warned = False

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the server listens on."""
        return self.config.host, self.port

    def serve(self) -> None:
        """Accept and supervise sessions until :meth:`stop` or ``max_lifetime``."""
        deadline = None
        if self.config.max_lifetime:
            deadline = time.monotonic() + self.config.max_lifetime
        try:
            while not self.stopping and (deadline is None or time.monotonic() < deadline):
                ready, _, _ = select.select([self.sock], [], [], 0.1)
                if ready:
                    self._accept()
                self._reap()
                self._beat()
        finally:
            self.close()

    def stop(self) -> None:
        """Ask :meth:`serve` to return (safe from a signal handler)."""
        self.stopping = True

    def _accept(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            if len(self.children) >= self.config.max_sessions:
                conn.settimeout(1.0)
                with contextlib.suppress(OSError):
                    send_frame(conn, Msg.ERROR, 0, ("RPCError", self._busy_message()))
                return
            try:
                self._spawn(conn)
            except OSError as exc:  # e.g. out of processes or disk: refuse this one only
                print(f"ember rpc server: cannot start a session: {exc}", file=sys.stderr)
                conn.settimeout(1.0)
                with contextlib.suppress(OSError):
                    send_frame(conn, Msg.ERROR, 0, ("RPCError", f"server: {exc}"))

    def _busy_message(self) -> str:
        return (
            f"server busy: {len(self.children)} of {self.config.max_sessions} sessions "
            "running; retry later or use a tracker"
        )

    def _spawn(self, conn: socket.socket) -> None:
        cfg = self.config
        directory = tempfile.mkdtemp(prefix="session-", dir=self.root)
        cmd = [sys.executable, "-m", "ember.rpc.worker", "--fd", str(conn.fileno())]
        cmd += ["--dir", directory, "--parent", str(os.getpid()), "--key", cfg.key]
        cmd += ["--max-frame", str(cfg.max_frame), "--max-upload", str(cfg.max_upload)]
        cmd += ["--idle-timeout", str(cfg.idle_timeout)]
        if cfg.token:
            cmd.append("--auth")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p
        )
        try:
            proc = subprocess.Popen(
                cmd,
                pass_fds=[conn.fileno()],
                stdin=subprocess.PIPE if cfg.token else subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        if proc.stdin is not None:
            try:
                proc.stdin.write(cfg.token or b"")
                proc.stdin.close()
            except OSError:
                pass
        self.children.append(_Child(proc, directory))
        self.started += 1
        self._next_beat = 0.0

    def _reap(self) -> None:
        alive = []
        for child in self.children:
            if child.proc.poll() is None:
                alive.append(child)
            else:
                shutil.rmtree(child.directory, ignore_errors=True)
                self._next_beat = 0.0
        self.children = alive

    def _beat(self) -> None:
        if self.config.tracker is None or time.monotonic() < self._next_beat:
            return
        self._next_beat = time.monotonic() + self.config.heartbeat
        info = {
            "key": self.config.key,
            "host": self.config.advertise or self.config.host,
            "port": self.port,
            "started": self.started,
            "active": len(self.children),
            "capacity": self.config.max_sessions,
        }
        try:
            register_with_tracker(self.config.tracker, info, self.config.token)
            self._tracker_warned = False
        except RPCError as exc:
            if not self._tracker_warned:
                print(f"ember rpc server: tracker unreachable: {exc}", file=sys.stderr)
                self._tracker_warned = True

    def close(self) -> None:
        """End every session, remove every session directory and the work root."""
        self.sock.close()
        for child in self.children:
            if child.proc.poll() is None:
                child.proc.terminate()
        for child in self.children:
            try:
                child.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait()
        self.children = []
        shutil.rmtree(self.root, ignore_errors=True)
