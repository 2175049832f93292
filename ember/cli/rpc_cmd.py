"""``ember rpc server | tracker | status``: run an RPC server or tracker, print a tracker's pool.

    ember rpc server --host 127.0.0.1 --port 9090 [--key K] [--tracker H:P] [--token-file F]
    ember rpc tracker --host 127.0.0.1 --port 9190 [--token-file F]
    ember rpc status --tracker 127.0.0.1:9190 [--token-file F]

Servers and trackers run until interrupted (or ``--max-lifetime`` seconds); this command
loads only the runtime side of ember (see docs/rpc.md).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from ember.cli.args import existing_dir, existing_file, int_range, positive_float
from ember.errors import EmberValueError, UsageError
from ember.rpc.protocol import DEFAULT_MAX_FRAME, DEFAULT_MAX_UPLOAD
from ember.rpc.server import Server, ServerConfig, is_loopback
from ember.rpc.tracker import Tracker, connect_tracker

#: Argument types: a TCP port (0: any free one) and a byte count.
PORT = int_range(0, 65535)
BYTES = int_range(1, 2**62)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the ``server``, ``tracker`` and ``status`` subcommands."""
    sub = parser.add_subparsers(dest="rpc_command", metavar="{server,tracker,status}")
    sub.required = True
    server = sub.add_parser("server", help="serve RPC sessions on this machine")
    server.add_argument("--host", default="127.0.0.1")
    server.add_argument("--port", type=PORT, default=9090, help="0 picks a free port")
    server.add_argument("--key", default="", help="device key announced to the tracker")
    server.add_argument("--tracker", help="HOST:PORT of a tracker to register with")
    server.add_argument("--advertise", help="address announced to the tracker (default --host)")
    server.add_argument("--max-sessions", type=int_range(1, 4096), default=4)
    server.add_argument("--max-frame", type=BYTES, default=DEFAULT_MAX_FRAME, help="bytes")
    server.add_argument("--max-upload", type=BYTES, default=DEFAULT_MAX_UPLOAD, help="bytes")
    server.add_argument("--idle-timeout", type=positive_float, default=300.0, help="seconds")
    server.add_argument("--work-dir", type=existing_dir, help="where session directories are made")
    _common(server)
    tracker = sub.add_parser("tracker", help="run a tracker for a pool of servers")
    tracker.add_argument("--host", default="127.0.0.1")
    tracker.add_argument("--port", type=PORT, default=9190, help="0 picks a free port")
    _common(tracker)
    status = sub.add_parser("status", help="print a tracker's servers and queue")
    status.add_argument("--tracker", default="127.0.0.1:9190", help="HOST:PORT")
    status.add_argument("--token-file", type=existing_file, help="file holding the shared token")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token-file", type=existing_file, help="file holding the shared token")
    parser.add_argument("--max-lifetime", type=positive_float, help="stop after this many seconds")


def parse_address(text: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _token(path: Path | None) -> bytes | None:
    return path.read_bytes().strip() if path is not None else None


def run(args: argparse.Namespace) -> int:
    """Run the chosen RPC subcommand."""
    token = _token(args.token_file)
    if args.rpc_command == "status":
        host, port = parse_address(args.tracker)
        print(connect_tracker(host, port, token=token).text_summary())
        return 0
    if args.rpc_command == "tracker":
        if not is_loopback(args.host) and not token:
            raise EmberValueError("a tracker bound to a non-loopback address needs --token-file")
        tracker = Tracker(args.host, args.port, token)

        def stop_tracker(signum: int, frame: FrameType | None) -> None:
            # shutdown() waits for serve_forever, which runs in this (the main) thread
            threading.Thread(target=tracker.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop_tracker)
        signal.signal(signal.SIGINT, stop_tracker)
        print(f"ember rpc tracker listening on {args.host}:{tracker.port}", flush=True)
        tracker.serve(args.max_lifetime)
        return 0
    config = ServerConfig(
        host=args.host,
        port=args.port,
        key=args.key,
        token=token,
        tracker=parse_address(args.tracker) if args.tracker else None,
        advertise=args.advertise,
        max_sessions=args.max_sessions,
        max_frame=args.max_frame,
        max_upload=args.max_upload,
        idle_timeout=args.idle_timeout,
        max_lifetime=args.max_lifetime,
        work_dir=args.work_dir,
    )
    server = Server(config)

    def stop(signum: int, frame: FrameType | None) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"ember rpc server listening on {args.host}:{server.port}", flush=True)
    server.serve()
    sys.stdout.flush()
    return 0
