"""GraphPlan: graph JSON -> allocated storage, fixed DLTensors and a prebuilt list of kernel calls.

Everything a run needs is built once here, so that :meth:`GraphPlan.run` is a tight loop of
ctypes calls with no allocation:

1. **memory** (:func:`ember.formats.graph_memory.plan_graph_memory`, computed here from the
   graph, no offset read from the file): ONE 64-byte aligned **workspace** holding every
   intermediate entry and every kernel node's scratch at the static planner's offsets (the
   AOT build's plan of the same model), and one NDArray per storage id of a model input,
   parameter or graph output (``storage``), sized for its largest entry; entries sharing a
   storage id share memory;
2. **entries**: per node output, an NDArray view of its storage (TVM's ``CreateView``): its
   DLTensor (data pointer, shape, dtype) is fixed for the executor's lifetime; plus a numpy
   view of the same memory (``arrays``) for fast copies in and out;
3. **calls**: per ``tvm_op`` node, the packed-call argument arrays (an ``EmberValue`` per
   input and output pointing at the DLTensors, and the type codes) and the kernel's raw C
   function pointer, bound once as a PreparedCall of the CPython extension (a ctypes
   function without it); a node with attribute ``scratch_bytes`` also gets its **scratch**,
   that many bytes of the workspace live for its call only, as its last argument.

Kernels come from a ``resolve(func_name) -> PackedFunc`` callback (raising LookupError for
a missing one). A kernel with a C body (``PackedFunc.c_entry()``) is called through its raw
function pointer; one written in Python through the PackedFunc. ``__nop`` nodes are
skipped and ``__copy`` nodes copy their input into their output, as in TVM. A kernel
returning non-zero raises :class:`ember.errors.ExecutorError` naming the node, its kernel
and the C error message.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.errors import EmberError, EmberValueError, ExecutorError
from ember.formats.graph_json import COPY_FUNC, NOP_FUNC, OP_KERNEL, GraphJSON
from ember.formats.graph_memory import plan_graph_memory
from ember.formats.metadata import STORAGE_ALIGNMENT
from ember.runtime import c_api, ndarray
from ember.runtime.device import Device
from ember.runtime.dtype import dtype as as_dtype
from ember.runtime.fastcall import make_prepared_call
from ember.runtime.ndarray import NDArray
from ember.runtime.packed_func import PackedFunc
from ember.runtime.strings import StringArena
from ember.runtime.threads import RunSite, governed_entry

_TENSOR_CODE = int(c_api.TypeCode.DLTENSOR_HANDLE)

KernelResolver = Callable[[str], PackedFunc]
#: the clocks a per-node profile can read: wall time, or the calling thread's CPU time
PROFILE_CLOCKS: dict[str, Callable[[], int]] = {
    "wall": time.perf_counter_ns,
    "thread": time.thread_time_ns,
}


@dataclass
class _Call:
    """One prebuilt kernel call (kept alive with its ctypes buffers)."""

    node_id: int
    name: str
    func_name: str
    eids: tuple[int, ...]
    fn: Callable[..., int]
    args: tuple[Any, ...]
    keepalive: tuple[Any, ...]


def _unchecked_packed_cfunc(address: int) -> Callable[..., int]:
    """An ``EmberPackedCFunc`` pointer callable without per-call argument conversion.

    The prototype is ``c_api.EmberPackedCFunc``; the executor prebuilds the six arguments
    as ctypes objects of exactly those C types (``c_void_p``, ``c_int32``), so ctypes need
    not convert them on every call (about 3x less overhead per kernel than through
    ``argtypes``). Only ever call it with such prebuilt arguments.
    """
    fn = _NO_ARGTYPES(address)
    fn.argtypes = None  # type: ignore[assignment]  # no per-call conversion
    return fn


_NO_ARGTYPES = ctypes.CFUNCTYPE(ctypes.c_int32)


def prepare_call(
    kernel: PackedFunc,
    tensors: list[NDArray],
    handles: list[NDArray] | None = None,
    accelerated: bool = False,
    governed: bool = False,
) -> tuple[Callable[..., int], tuple[Any, ...], tuple[Any, ...]] | None:
    """``kernel(*tensors, *handles)`` with its packed arguments built once: ``(fn, args,
    keepalive)``, where ``fn(*args)`` makes the call and returns its status (non-zero:
    failed, the message is the runtime's last error). ``handles`` (a kernel's scratch) go
    as tensors too, so the kernel checks their length against its plan: their size came
    from graph.json, which is data. With ``accelerated``, ``fn`` is the CPython extension's
    PreparedCall when it is available (``args`` empty; 0.1 us per call against ctypes'
    0.6). With ``governed``, the call goes through EmberBackendGovernedCall (a whole
    model's run: the run governor decides whether its loops use the thread pool; the
    site is the returned ``keepalive[0]``'s address). None for a kernel with no C entry (one
    written in Python)."""
    entry = kernel.c_entry()
    if entry is None:
        return None
    extra = handles or []
    nargs = len(tensors) + len(extra)
    values = (c_api.EmberValue * nargs)()
    codes = (ctypes.c_int32 * nargs)(*[_TENSOR_CODE] * nargs)
    for k, tensor in enumerate([*tensors, *extra]):
        values[k].v_handle = tensor.handle
    ret_value, ret_code = c_api.EmberValue(), ctypes.c_int32(0)
    address, resource = entry
    gate: tuple[Any, ...] = ()
    if governed:
        address, resource, call = governed_entry(address, resource or 0)
        gate = (call,)
    args = (
        ctypes.c_void_p(ctypes.addressof(values)),
        ctypes.c_void_p(ctypes.addressof(codes)),
        ctypes.c_int32(nargs),
        ctypes.c_void_p(ctypes.addressof(ret_value)),
        ctypes.c_void_p(ctypes.addressof(ret_code)),
        ctypes.c_void_p(resource) if resource else None,
    )
    keep = (*gate, kernel, *tensors, *extra, values, codes, ret_value, ret_code)
    if accelerated:
        fast = make_prepared_call(
            address,
            ctypes.addressof(values),
            ctypes.addressof(codes),
            nargs,
            ctypes.addressof(ret_value),
            ctypes.addressof(ret_code),
            resource or 0,
        )
        if fast is not None:
            return fast, (), keep
    return _unchecked_packed_cfunc(address), args, keep


def _python_call(kernel: PackedFunc, tensors: list[NDArray]) -> Callable[..., int]:
    def call(*_: Any) -> int:
        kernel(*tensors)
        return 0

    return call


def _copy_call(dst: int, src: int, nbytes: int) -> Callable[..., int]:
    def copy(*_: Any) -> int:
        ctypes.memmove(dst, src, nbytes)
        return 0

    return copy


def numpy_view(array: NDArray) -> np.ndarray:
    """A writable numpy array over ``array``'s memory (no copy; ``array`` must outlive it)."""
    npdt = array.data_type.numpy_dtype()
    if array.nbytes == 0:
        return np.empty(array.shape, npdt)  # nothing to share
    raw = (ctypes.c_uint8 * array.nbytes).from_address(array.data_ptr)
    return np.frombuffer(memoryview(raw), dtype=np.uint8).view(npdt).reshape(array.shape)


class GraphPlan:
    """Storage, entry tensors and prebuilt kernel calls of one graph on one device."""

    def __init__(self, graph: GraphJSON, resolve: KernelResolver, device: Device) -> None:
        self.graph = graph
        self.device = device
        self._resolve = resolve
        # a whole run is one governed run (threads.RunSite: the pool or the caller alone)
        self.run_site = RunSite()
        self.memory = plan_graph_memory(graph, STORAGE_ALIGNMENT)
        # zeroed (deterministic even if a kernel misreads) but not touched: a storage that
        # only a shared parameter would use never becomes resident (see rebind)
        self.workspace = ndarray.zeros(max(self.memory.workspace_size, STORAGE_ALIGNMENT), device)
        self.storage: dict[int, NDArray] = {
            sid: ndarray.zeros(max(nbytes, STORAGE_ALIGNMENT), device)
            for sid, nbytes in self.memory.storages.items()
        }
        self._users: dict[int, list[int]] = {}  # kept storage id -> the entries living in it
        for eid, sid in enumerate(graph.storage_id):
            if sid in self.storage:
                self._users.setdefault(sid, []).append(eid)
        self._moved: set[int] = set()  # entries rebound out of their planned storage
        self.entries: list[NDArray] = [
            self._view(eid, graph.shape[eid]) for eid in range(graph.num_entries)
        ]
        self.arrays: list[np.ndarray] = [numpy_view(e) for e in self.entries]
        # each kernel node's scratch: its bytes of the workspace, live for its call only
        self.scratch: dict[int, NDArray] = {
            nid: ndarray.view_from_pointer(
                self.workspace.data_ptr + offset,
                (nbytes,),
                as_dtype("uint8"),
                device,
                owner=self.workspace,
            )
            for nid, (offset, nbytes) in self.memory.scratch.items()
        }
        self.calls: list[_Call] = []
        missing: dict[str, list[str]] = {}
        for nid, node in enumerate(graph.nodes):
            if node.op != OP_KERNEL or node.attrs is None or node.attrs.func_name == NOP_FUNC:
                continue
            try:
                self.calls.append(self._build_call(nid, resolve))
            except LookupError:
                missing.setdefault(node.attrs.func_name, []).append(node.name)
        if missing:
            listed = "; ".join(f"'{f}' (used by {', '.join(n[:3])})" for f, n in missing.items())
            raise ExecutorError(
                f"the host module lacks {len(missing)} kernel(s) the graph calls: {listed}; "
                "build the graph and the library together, or import the module that "
                "defines them"
            )
        self._loop = [(c.fn, c.args) for c in self.calls]
        # the strings kernels make live in this arena until the next run (docs/strings.md)
        self.arena = StringArena() if "string" in graph.dltype else None

    # ------------------------------------------------------------------ building
    def _view(self, eid: int, shape: tuple[int, ...]) -> NDArray:
        """An NDArray over the entry's memory (a fresh DLTensor, shared memory): its
        offset of the workspace, or its kept storage."""
        offset = self.memory.entry_offsets.get(eid)
        if offset is None:
            buf = self.storage[self.graph.storage_id[eid]]
            address = buf.data_ptr
        else:
            buf, address = self.workspace, self.workspace.data_ptr + offset
        dtype = as_dtype(self.graph.dltype[eid])
        return ndarray.view_from_pointer(address, shape, dtype, self.device, owner=buf)

    def _build_call(self, nid: int, resolve: KernelResolver) -> _Call:
        graph = self.graph
        node = graph.nodes[nid]
        assert node.attrs is not None  # guarded by the caller
        in_eids = [graph.entry_id(e) for e in node.inputs]
        out_eids = [graph.node_row_ptr[nid] + i for i in range(node.attrs.num_outputs)]
        eids = in_eids + out_eids
        if node.attrs.func_name == COPY_FUNC:
            if len(in_eids) != 1 or len(out_eids) != 1:
                raise ExecutorError(f"node {node.name!r}: {COPY_FUNC} takes one input, one output")
            nbytes = self.entries[in_eids[0]].nbytes
            if self.entries[out_eids[0]].nbytes != nbytes:
                raise ExecutorError(f"node {node.name!r}: {COPY_FUNC} between different sizes")
            dst, src = self.entries[out_eids[0]].data_ptr, self.entries[in_eids[0]].data_ptr
            fn = _copy_call(dst, src, nbytes)
            keep_copy = (self.entries[out_eids[0]], self.entries[in_eids[0]])
            return _Call(nid, node.name, COPY_FUNC, tuple(eids), fn, (), keep_copy)
        kernel = resolve(node.attrs.func_name)
        tensors = []
        for eid in eids:
            tensor = self.entries[eid]
            if node.attrs.flatten_data:
                tensor = ndarray.view_from_pointer(
                    tensor.data_ptr, (tensor.size,), tensor.data_type, self.device, owner=tensor
                )
            tensors.append(tensor)
        extra = [self.scratch[nid]] if nid in self.scratch else []
        prepared = prepare_call(kernel, tensors, extra, accelerated=True)
        if prepared is None:  # a kernel written in Python: call it through the PackedFunc
            py_fn = _python_call(kernel, [*tensors, *extra])
            keep_py = (kernel, *tensors, *extra)
            return _Call(nid, node.name, node.attrs.func_name, tuple(eids), py_fn, (), keep_py)
        fn, args, keep = prepared
        return _Call(nid, node.name, node.attrs.func_name, tuple(eids), fn, args, keep)

    def rebind(self, eid: int, array: NDArray) -> None:
        """Make entry ``eid`` live in ``array`` (zero copy); the calls using it are rebuilt.

        The planned storage block is released once no entry lives in it any more, so a
        model's weights shared from the caller's arrays are held once, not twice.
        """
        self.entries[eid] = array
        self.arrays[eid] = numpy_view(array)
        self._moved.add(eid)
        sid = self.graph.storage_id[eid]
        if sid in self._users and all(e in self._moved for e in self._users[sid]):
            self.storage.pop(sid, None)
        for i, call in enumerate(self.calls):
            if eid in call.eids:
                self.calls[i] = self._build_call(call.node_id, self._resolve)
        self._loop = [(c.fn, c.args) for c in self.calls]

    # ------------------------------------------------------------------ running
    def run(self) -> None:
        """Execute every kernel once, in graph order (one governed run)."""
        site = self.run_site
        site.begin()
        try:
            if self.arena is not None:
                with self.arena.run():
                    return self._run(len(self.graph.nodes))
            for fn, args in self._loop:
                if fn(*args):
                    self._raise_failed(fn)
        finally:
            site.end()

    def run_through(self, node_id: int) -> None:
        """Execute the kernels of nodes ``0..node_id`` only (the debug executor's partial run)."""
        with self.arena.run() if self.arena is not None else nullcontext():
            self._run(node_id)

    def _run(self, node_id: int) -> None:
        for call, (fn, args) in zip(self.calls, self._loop, strict=True):
            if call.node_id > node_id:
                break
            if fn(*args):
                self._raise_failed(fn)

    def run_timed(self, clock: str = "wall") -> list[int]:
        """Execute once, returning each call's time in nanoseconds (debug mode): wall time,
        or with ``clock="thread"`` the calling thread's CPU time (robust on a busy machine,
        meaningful when the kernels run on this thread only, i.e. at one thread)."""
        times: list[int] = []
        read = PROFILE_CLOCKS.get(clock)
        if read is None:
            raise EmberValueError(
                f"profile clock must be one of {sorted(PROFILE_CLOCKS)}, got {clock!r}"
            )
        clock_ns = read
        with self.arena.run() if self.arena is not None else nullcontext():
            for fn, args in self._loop:
                start = clock_ns()
                rc = fn(*args)
                times.append(clock_ns() - start)
                if rc:
                    self._raise_failed(fn)
        return times

    def _raise_failed(self, fn: Callable[..., int]) -> None:
        call = next(c for c in self.calls if c.fn is fn)
        try:
            c_api.check_call(-1)
        except EmberError as exc:
            raise ExecutorError(
                f"node {call.node_id} '{call.name}' (kernel '{call.func_name}') failed: {exc}"
            ) from exc
