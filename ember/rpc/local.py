"""LocalSession: the RPC session API run in this process (for tests and examples).

Requests are encoded into frames and handled by the same :class:`SessionHandler` the
server uses, so the codec and the dispatch are exercised without a socket; the session
directory is a temporary directory removed by ``close()``. Example::

    with ember.rpc.LocalSession() as sess:
        sess.upload("model.so")
        mod = sess.load_module("model.so")
"""

from __future__ import annotations

import shutil
import tempfile

from ember.rpc.client import Session, decode_reply
from ember.rpc.handler import SessionHandler
from ember.rpc.protocol import DEFAULT_MAX_UPLOAD, Message


class LocalSession(Session):
    """A session whose server side runs in this process."""

    def __init__(self, max_upload: int = DEFAULT_MAX_UPLOAD) -> None:
        self.directory = tempfile.mkdtemp(prefix="ember-rpc-local-")
        self.handler = SessionHandler(self.directory, max_upload=max_upload)
        super().__init__(self._exchange_local, self._cleanup, "local")

    def _exchange_local(self, frame: bytes, reply: bool, what: str) -> Message | None:
        answer = self.handler.handle_frame(memoryview(frame)[4:])
        if not reply or answer is None:
            return None
        return decode_reply(answer, self.hooks)

    def _cleanup(self) -> None:
        self.handler.release()
        shutil.rmtree(self.directory, ignore_errors=True)
