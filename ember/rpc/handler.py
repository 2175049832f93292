"""The server side of one session: its directory, its object table, one reply per request.

:class:`SessionHandler` owns a session directory (files are plain names inside it, see
:func:`check_name`) and a table of the objects the client holds by handle (modules,
functions, arrays). ``handle_frame(frame) -> reply frame`` is all a transport needs: the
socket worker (:mod:`ember.rpc.worker`) and :class:`ember.rpc.LocalSession` both use it.
An exception raised by a request becomes an ERROR reply; the session goes on.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ember.errors import RPCError
from ember.rpc.codec import ProtocolError, RefHooks, RefKind
from ember.rpc.protocol import DEFAULT_MAX_UPLOAD, Message, Msg, pack_frame, unpack_frame
from ember.runtime.device import Device
from ember.runtime.library_module import load_module
from ember.runtime.module import Module
from ember.runtime.ndarray import NDArray
from ember.runtime.ndarray import array as nd_array
from ember.runtime.packed_func import PackedFunc, as_packed_func
from ember.runtime.registry import get_global_func

MAX_NAME = 255
#: Built-in functions every session offers (looked up before the global registry).
BUILTINS: dict[str, Callable[..., Any]] = {
    "rpc.echo": lambda *args: args[0] if args else None,
    "rpc.noop": lambda *args: None,
}


def check_name(name: str) -> str:
    """``name`` if it is a plain file name; raise RPCError for paths, '..', NUL and the like."""
    bad = (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_NAME
        or any(c in name for c in ("/", "\\", "\0"))
        or ".." in name
        or name in (".", "~")
        or os.path.isabs(name)
    )
    if bad:
        raise RPCError(
            f"rpc: {name!r} is not a plain file name; use a name without path separators, "
            f"'..' or NUL, at most {MAX_NAME} characters"
        )
    return name


class SessionHandler:
    """One session's state on the server, and the dispatch of its requests."""

    def __init__(self, directory: str | os.PathLike[str], max_upload: int = DEFAULT_MAX_UPLOAD):
        self.dir = Path(directory)
        self.max_upload = max_upload
        self.objects: dict[int, Any] = {}
        self._next_id = 1
        self.closed = False
        self.hooks = RefHooks(to_ref=self._to_ref, from_ref=self._from_ref)

    # ---- handles ----------------------------------------------------------------------
    def _to_ref(self, obj: Any) -> tuple[RefKind, int, Any] | None:
        if isinstance(obj, Module):
            return RefKind.MODULE, self._keep(obj), obj.type_key
        if isinstance(obj, PackedFunc):
            return RefKind.FUNC, self._keep(obj), None
        if isinstance(obj, NDArray):
            return RefKind.NDARRAY, self._keep(obj), (obj.dtype, list(obj.shape))
        return None

    def _keep(self, obj: Any) -> int:
        ident = self._next_id
        self._next_id += 1
        self.objects[ident] = obj
        return ident

    def _from_ref(self, kind: RefKind, ident: int, meta: Any) -> Any:
        obj = self.objects.get(ident)
        want = {RefKind.MODULE: Module, RefKind.FUNC: PackedFunc, RefKind.NDARRAY: NDArray}[kind]
        if not isinstance(obj, want):
            raise RPCError(f"rpc: no {kind.name.lower()} with handle {ident} in this session")
        return obj

    def get(self, ident: int, kind: RefKind) -> Any:
        """The object behind handle ``ident``, checked to be of ``kind``."""
        return self._from_ref(kind, ident, None)

    # ---- files ------------------------------------------------------------------------
    def path(self, name: str, must_exist: bool = True) -> Path:
        """The path of file ``name`` in the session directory (never a symlink)."""
        path = self.dir / check_name(name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            if must_exist:
                raise RPCError(f"rpc: no file {name!r} in the session; upload it first") from None
            return path
        if not stat.S_ISREG(st.st_mode):
            raise RPCError(f"rpc: {name!r} is not a regular file in the session directory")
        return path

    def upload(self, name: str, offset: int, data: bytes) -> int:
        """Write a chunk at ``offset`` (0 starts the file anew, then chunks follow in order)."""
        path = self.path(name, must_exist=offset != 0)
        size = 0 if offset == 0 else path.stat().st_size
        if offset != size:
            raise RPCError(f"rpc: upload of {name!r}: chunk at {offset}, file has {size} bytes")
        if offset + len(data) > self.max_upload:
            raise RPCError(
                f"rpc: upload of {name!r} exceeds the limit of {self.max_upload} bytes "
                "per file; start the server with a larger --max-upload"
            )
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if offset == 0 else 0)
        fd = os.open(path, flags, 0o600)
        try:
            os.lseek(fd, offset, os.SEEK_SET)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        return offset + len(data)

    def download(self, name: str, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes of file ``name`` from ``offset``."""
        fd = os.open(self.path(name), os.O_RDONLY | os.O_NOFOLLOW)
        try:
            return os.pread(fd, max(0, size), max(0, offset))
        finally:
            os.close(fd)

    # ---- dispatch -----------------------------------------------------------------------
    def handle_frame(self, frame: bytes | bytearray | memoryview) -> bytes | None:
        """The reply frame to one request frame (None for messages without a reply)."""
        try:
            msg = unpack_frame(frame, self.hooks)
        except ProtocolError:
            raise
        except RPCError as exc:  # e.g. a stale handle inside the arguments
            seq = int.from_bytes(bytes(frame[1:5]), "little") if len(frame) >= 5 else 0
            return pack_frame(Msg.ERROR, seq, ("RPCError", str(exc)))
        return self.handle(msg)

    def handle(self, msg: Message) -> bytes | None:
        """Run one decoded request; exceptions become ERROR replies."""
        if msg.type == Msg.FREE:
            for ident in msg.body[0]:
                if isinstance(ident, int):
                    self.objects.pop(ident, None)
            return None
        try:
            value = self._dispatch(msg)
            return pack_frame(Msg.RETURN, msg.seq, (value,), self.hooks)
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the client
            return pack_frame(Msg.ERROR, msg.seq, (type(exc).__name__, str(exc)))

    def _dispatch(self, msg: Message) -> Any:
        body = msg.body
        kind = msg.type
        if kind == Msg.CALL:
            return self.get(body[0], RefKind.FUNC)(*body[1])
        if kind == Msg.GET_FUNC:
            mod: Module = self.get(body[0], RefKind.MODULE)
            return mod.get_function(body[1]) if body[1] in mod else None
        if kind == Msg.FUNC_NAMES:
            return self.get(body[0], RefKind.MODULE).function_names()
        if kind == Msg.GLOBAL_FUNC:
            builtin = BUILTINS.get(body[0])
            return as_packed_func(builtin) if builtin else get_global_func(body[0])
        if kind == Msg.LOAD_MODULE:
            return load_module(str(self.path(body[0])))
        if kind == Msg.UPLOAD:
            return self.upload(*body)
        if kind == Msg.DOWNLOAD:
            return self.download(*body)
        if kind == Msg.REMOVE:
            self.path(body[0]).unlink()
            return None
        if kind == Msg.LIST_FILES:
            return sorted(p.name for p in self.dir.iterdir())
        if kind == Msg.ARRAY:
            return self._array(body[0], body[1])
        if kind == Msg.TO_NUMPY:
            return _local_array(body[0]).numpy()
        if kind == Msg.COPY_FROM:
            _local_array(body[0]).copyfrom(body[1])
            return None
        if kind == Msg.TIME_EVAL:
            return self._time_eval(*body)
        if kind == Msg.CLOSE:
            self.closed = True
            return None
        raise RPCError(f"rpc: {kind.name} is not a session request")

    @staticmethod
    def _array(source: Any, device: Any) -> NDArray:
        if not isinstance(source, np.ndarray) or not isinstance(device, Device):
            raise RPCError("rpc: ARRAY needs a tensor and a device")
        return nd_array(source, Device(device.device_type, device.device_id))

    def _time_eval(
        self,
        mod_id: int,
        name: str,
        device: Any,
        number: int,
        repeat: int,
        min_repeat_ms: int,
        cooldown_ms: int,
        args: tuple[Any, ...],
    ) -> list[float]:
        mod: Module = self.get(mod_id, RefKind.MODULE)
        if not isinstance(device, Device):
            raise RPCError("rpc: time_evaluator needs a device")
        timer = mod.time_evaluator(
            name,
            device,
            number=number,
            repeat=repeat,
            min_repeat_ms=min_repeat_ms,
            cooldown_interval_ms=cooldown_ms,
        )
        return list(timer(*args).results)

    def release(self) -> None:
        """Drop every object of the session (modules before the files they came from)."""
        self.objects.clear()


def _local_array(value: Any) -> NDArray:
    if not isinstance(value, NDArray):
        raise RPCError(f"rpc: expected a remote array handle, got {type(value).__name__}")
    return value
