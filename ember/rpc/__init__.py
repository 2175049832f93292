"""ember.rpc: upload, run and time compiled models on another machine (TVM's RPC).

``connect(host, port, token=...)`` opens a session on an ``ember rpc server``;
``connect_tracker(host, port).request(key)`` asks a tracker for a free server;
``LocalSession()`` runs the same API in process. The protocol is in docs/rpc.md. The
package imports only the runtime side (runtime, executor, formats), never the compiler.
"""

from ember.rpc.client import Session, connect
from ember.rpc.handler import SessionHandler, check_name
from ember.rpc.local import LocalSession
from ember.rpc.protocol import PROTOCOL_VERSION
from ember.rpc.remote import RemoteDevice, RemoteModule, RemoteNDArray, RemotePackedFunc
from ember.rpc.tracker import TrackerClient, connect_tracker

__all__ = [
    "PROTOCOL_VERSION",
    "LocalSession",
    "RemoteDevice",
    "RemoteModule",
    "RemoteNDArray",
    "RemotePackedFunc",
    "Session",
    "SessionHandler",
    "TrackerClient",
    "check_name",
    "connect",
    "connect_tracker",
]
