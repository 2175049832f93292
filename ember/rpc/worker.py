"""One server session in its own process: ``python -m ember.rpc.worker --fd N --dir D``.

The server accepts a connection and starts this program with the socket inherited as
file descriptor N and a fresh session directory D (which the server removes when the
process ends, however it ends). The token, if any, arrives on stdin. The worker runs the
handshake, then serves requests until CLOSE, a protocol error, the peer going away, the
idle timeout or the session timeout. It dies with the server (``PR_SET_PDEATHSIG``), so a
killed server leaves no session running.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence

from ember.errors import RPCError
from ember.rpc.codec import ProtocolError
from ember.rpc.handler import SessionHandler
from ember.rpc.protocol import (
    HANDSHAKE_TIMEOUT,
    Msg,
    recv_exact,
    send_frame,
    server_handshake,
)

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when its parent exits; exit now if it already has."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(3)


def serve_session(
    sock: socket.socket,
    handler: SessionHandler,
    token: bytes | None,
    max_frame: int,
    idle_timeout: float,
    info: dict[str, object],
) -> None:
    """Handshake, then answer requests until the session ends."""
    sock.settimeout(HANDSHAKE_TIMEOUT)
    session_timeout = server_handshake(sock, token, max_frame, info)
    if session_timeout:
        timer = threading.Timer(session_timeout, os._exit, args=(4,))
        timer.daemon = True
        timer.start()
    sock.settimeout(idle_timeout)
    while not handler.closed:
        header = recv_exact(sock, 4)
        length = int.from_bytes(header, "little")
        if length > max_frame:
            raise ProtocolError(
                f"rpc: a frame of {length} bytes exceeds the limit of {max_frame} bytes"
            )
        reply = handler.handle_frame(recv_exact(sock, length))
        if reply is not None:
            sock.sendall(reply)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the session process."""
    parser = argparse.ArgumentParser(prog="ember.rpc.worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--max-frame", type=int, required=True)
    parser.add_argument("--max-upload", type=int, required=True)
    parser.add_argument("--idle-timeout", type=float, required=True)
    parser.add_argument("--key", default="")
    parser.add_argument("--auth", action="store_true", help="read the token from stdin")
    args = parser.parse_args(argv)
    die_with_parent(args.parent)
    token = sys.stdin.buffer.read() if args.auth else None
    sock = socket.socket(fileno=args.fd)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    handler = SessionHandler(args.dir, max_upload=args.max_upload)
    info: dict[str, object] = {"key": args.key, "max_frame": args.max_frame, "pid": os.getpid()}
    try:
        serve_session(sock, handler, token, args.max_frame, args.idle_timeout, info)
    except ProtocolError as exc:
        with contextlib.suppress(OSError):
            send_frame(sock, Msg.ERROR, 0, ("ProtocolError", str(exc)))
        return 2
    except (RPCError, OSError):
        return 1
    finally:
        handler.release()
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
