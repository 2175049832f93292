"""Client-side stand-ins for objects that live in a remote session.

* :class:`RemoteDevice` is a :class:`Device` whose type carries the session mark
  (``device_type + RPC_SESS_MASK * (session index + 1)``, as in TVM), so
  ``ember.nd.array(x, sess.cpu(0))`` allocates on the server (through the runtime's
  ``remote_ndarray`` hook, registered here).
* :class:`RemoteNDArray` holds a server array by handle; ``numpy()`` copies it back.
* :class:`RemoteModule` is a :class:`Module` whose functions are :class:`RemotePackedFunc`,
  so the graph and AOT executors bind them through ``module[name]`` unchanged, and whose
  ``time_evaluator`` measures on the server.

Dropping a stand-in queues its handle; the session frees queued handles with its next
request (no I/O happens in ``__del__``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ember.errors import RPCError
from ember.rpc.codec import RefKind
from ember.runtime.device import RPC_SESS_MASK, Device
from ember.runtime.hooks import REMOTE_NDARRAY, register_hook
from ember.runtime.module import Module
from ember.runtime.packed_func import PackedFunc
from ember.runtime.time_evaluator import BenchmarkResult, TimeEvaluator


class Session(Protocol):
    """What the stand-ins need of their session (:class:`ember.rpc.client.Session`)."""

    closed: bool

    def _release(self, ident: int) -> None: ...

    def _simple(self, msg_name: str, body: tuple[Any, ...], what: str) -> Any: ...

    def _request_ref(self, msg_name: str, arr: RemoteNDArray, what: str, *rest: Any) -> Any: ...

    def _call(self, ident: int, args: tuple[Any, ...], name: str) -> Any: ...

    def _get_function(self, mod_id: int, name: str) -> RemotePackedFunc | None: ...


@dataclass(frozen=True, slots=True)
class RemoteDevice(Device):
    """A device of a remote session (its type carries the session mark)."""

    session: Any = field(default=None, compare=False, repr=False)

    @property
    def local(self) -> Device:
        """The device as the server names it."""
        return Device(self.device_type % RPC_SESS_MASK, self.device_id)

    def __str__(self) -> str:
        return f"remote[{self.device_type // RPC_SESS_MASK - 1}]:{self.local}"

    def __repr__(self) -> str:
        return f"ember.{self}"

    @property
    def exist(self) -> bool:
        """Whether the session is open."""
        return self.session is not None and not self.session.closed


class RemoteObject:
    """A handle to an object in a remote session; freed on the server when dropped."""

    def __init__(self, session: Session, ident: int) -> None:
        self._session = session
        self._id = ident

    @property
    def session(self) -> Session:
        """The session holding the object."""
        return self._session

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None:
            session._release(self._id)


class RemoteNDArray(RemoteObject):
    """An array that lives on the server; ``numpy()`` copies it back."""

    def __init__(
        self, session: Session, ident: int, dtype: str, shape: tuple[int, ...], device: Device
    ) -> None:
        super().__init__(session, ident)
        self.dtype = dtype
        self.shape = tuple(shape)
        self.device = device

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    def numpy(self) -> np.ndarray:
        """A local numpy copy of the contents."""
        out: np.ndarray = self._session._request_ref("TO_NUMPY", self, "NDArray.numpy")
        return out

    asnumpy = numpy

    def copyfrom(self, source: Any) -> RemoteNDArray:
        """Copy ``source`` (numpy array or array-like) into the remote array; returns self."""
        data = np.asarray(source)
        if data.shape != self.shape:
            raise RPCError(f"copyfrom: source shape {data.shape} is not the array's {self.shape}")
        self._session._request_ref("COPY_FROM", self, "NDArray.copyfrom", data.astype(self.dtype))
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        if not (isinstance(index, slice) and index == slice(None)):
            raise RPCError("a remote NDArray supports only arr[:] = value")
        self.copyfrom(np.broadcast_to(np.asarray(value, dtype=self.dtype), self.shape))

    def __repr__(self) -> str:
        return f"<ember.RemoteNDArray shape={self.shape} dtype={self.dtype} device={self.device}>"


class RemotePackedFunc(PackedFunc):
    """A function of a remote session; calling it runs it on the server."""

    __slots__ = ("_session", "_id", "_name")

    def __init__(self, session: Session, ident: int, name: str) -> None:
        super().__init__()
        self._session = session
        self._id = ident
        self._name = name

    def __call__(self, *args: Any) -> Any:
        return self._session._call(self._id, args, self._name)

    def _make_handle(self) -> int:
        raise RPCError(
            f"remote function {self._name!r} cannot be passed to local C code; "
            "call it from Python or pass it back to the same session"
        )

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None:
            session._release(self._id)

    def __repr__(self) -> str:
        return f"<RemotePackedFunc {self._name!r} of {self._session!r}>"


class RemoteModule(Module):
    """A module of a remote session: functions by name, timed on the server."""

    def __init__(self, session: Session, ident: int, type_key: str) -> None:
        super().__init__()
        self._session = session
        self._id = ident
        self.type_key = f"rpc:{type_key}"

    @property
    def session(self) -> Session:
        """The session holding the module."""
        return self._session

    def _get_function(self, name: str) -> PackedFunc | None:
        func: PackedFunc | None = self._session._get_function(self._id, name)
        return func

    def function_names(self) -> list[str]:
        """The names of the remote module's own functions."""
        names: list[str] = self._session._simple("FUNC_NAMES", (self._id,), "function_names")
        return names

    def time_evaluator(
        self,
        func_name: str,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        cooldown_interval_ms: int = 0,
    ) -> RemoteTimeEvaluator:
        """A callable timing ``func_name`` on the server (TVM's remote time_evaluator)."""
        return RemoteTimeEvaluator(
            self, func_name, dev, number, repeat, min_repeat_ms, cooldown_interval_ms
        )

    def export_library(self, path: Any) -> Any:
        """Not possible for a remote module: export locally, then upload."""
        raise RPCError("a remote module cannot be exported; export locally and upload instead")

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None:
            session._release(self._id)

    def __repr__(self) -> str:
        return f"RemoteModule({self.type_key}, handle {self._id})"


class RemoteTimeEvaluator(TimeEvaluator):
    """Calling it with the function's arguments times it on the server (same semantics)."""

    def __init__(
        self,
        module: RemoteModule,
        name: str,
        dev: Device,
        number: int,
        repeat: int,
        min_repeat_ms: int,
        cooldown_interval_ms: int,
    ) -> None:
        super().__init__(
            module.get_function(name), dev, number, repeat, min_repeat_ms, cooldown_interval_ms
        )
        self.module = module
        self.name = name

    def __call__(self, *args: Any) -> BenchmarkResult:
        counts = (self.number, self.repeat, self.min_repeat_ms, self.cooldown_interval_ms)
        body = (self.module._id, self.name, self.dev, *counts, tuple(args))
        what = f"time_evaluator({self.name!r})"
        results: list[float] = self.module.session._simple("TIME_EVAL", body, what)
        return BenchmarkResult(tuple(float(r) for r in results))


def ref_kind(obj: Any, session: Session) -> tuple[RefKind, int, Any] | None:
    """The REF of a stand-in belonging to ``session`` (None for other values)."""
    if isinstance(obj, RemoteNDArray | RemoteModule | RemotePackedFunc):
        if obj._session is not session:
            raise RPCError(f"{obj!r} belongs to another RPC session")
        kind = (
            RefKind.NDARRAY
            if isinstance(obj, RemoteNDArray)
            else RefKind.MODULE
            if isinstance(obj, RemoteModule)
            else RefKind.FUNC
        )
        return kind, obj._id, None
    return None


def _remote_ndarray(kind: str, first: Any, device: Device, dtype: Any) -> RemoteNDArray:
    """The runtime hook behind ``ember.nd.array`` / ``ember.nd.empty`` on a RemoteDevice."""
    session = getattr(device, "session", None)
    if session is None:
        raise RPCError(f"device {device!r} has no open RPC session; use sess.cpu(0)")
    if kind == "empty":
        data = np.zeros(first, dtype=np.dtype(str(dtype)))
    else:
        data = np.asarray(first, dtype=None if dtype is None else np.dtype(str(dtype)))
    result: RemoteNDArray = session._simple("ARRAY", (data, device), "nd.array")
    return result


register_hook(REMOTE_NDARRAY, _remote_ndarray)
