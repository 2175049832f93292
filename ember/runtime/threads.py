"""The thread count of ember's C thread pool, which runs the parallel loops of every kernel.

One count per process: ``EMBER_NUM_THREADS`` (read once, ``ember.config``), else one
thread per core the process may use; :func:`set_num_threads` changes it at any time (the
next parallel loop uses it) and :func:`num_threads` changes it for a block. A target's
``-num-threads=N`` fixes the count of the kernels built with it. A loop that ran slower in
parallel than its caller alone would have (its worker shared a core with another busy
process) runs on the caller for its next 4 to 1024 launches, then is offered to the pool
again; and when the pool's launches together lose more than 0.4 ms lately (a worker was
descheduled holding a chunk: the caller waited a scheduler slice at the join), every launch
runs on the caller for 20-640 ms of its work, then the pool is tried again
(src/pool_adapt.h), so a busy machine costs little over one thread. And the executors run
each model under the run governor (src/pool_govern.h): with 2+ threads it times the model's
runs with the pool and on the calling thread alone, alternately, keeps the faster and probes
again now and then, so a model that a second thread does not speed up (a tiny one, or any on
a machine whose cores share data slowly) runs at its 1-thread speed. :func:`pool_stats`
counts what the pool did, :func:`run_choice` what the governor chose. Example::

    import ember
    ember.runtime.set_num_threads(1)        # single-threaded from now on
    with ember.runtime.num_threads(2):
        gmod.run()
    ember.runtime.get_num_threads()         # 1 again
"""

from __future__ import annotations

import ctypes
import functools
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ember.config import ThreadCountWarning
from ember.errors import EmberValueError
from ember.runtime import c_api
from ember.runtime.fastcall import make_prepared_call

__all__ = [
    "POOL_STATS",
    "ThreadCountWarning",
    "get_num_threads",
    "num_cores",
    "num_threads",
    "pool_policy",
    "pool_stats",
    "run_choice",
    "set_num_threads",
]

#: The most threads the C pool starts (runtime.c POOL_MAX_THREADS).
MAX_THREADS = 1024

#: The pool's counters (EmberBackendPoolStats), in the C order (src/thread_pool.h POOL_STAT_*):
#: launches split (range) or run (group) by the pool, run inline by the per-loop backoff or
#: the adaptive state; pool launches a worker joined; chunks; iterations and the caller's
#: share; ns the caller waited at joins; ns of pool launches; joins that waited over 0.2 ms
#: (a late worker) and the longest wait; times the adaptive state went serial; launches that
#: woke a sleeping worker; ns lost by launches slower than the caller alone; ns of inline runs;
#: launches whose threads shared one core; runs the run governor chose for, and of those the
#: runs it kept on the calling thread.
POOL_STATS = (
    "range",
    "group",
    "site_inline",
    "adapt_inline",
    "joined",
    "chunks",
    "iters",
    "own_iters",
    "wait_ns",
    "pool_ns",
    "late",
    "max_wait_ns",
    "stalls",
    "woke",
    "lost_ns",
    "inline_ns",
    "shared",
    "runs",
    "runs_alone",
)

#: EmberBackendPoolPolicy's values: the default (the run governor, the adaptive state and
#: the per-loop backoff), the per-loop backoff alone, none, and the default without the run
#: governor (for measuring it).
POOL_POLICIES = ("adaptive", "per-loop", "always", "ungoverned")


def num_cores() -> int:
    """The number of cores this process may run on (its CPU affinity)."""
    return int(c_api.lib().EmberBackendNumCores())


def get_num_threads() -> int:
    """The number of threads a parallel loop uses (the caller's thread included)."""
    return int(c_api.lib().EmberBackendGetNumThreads())


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (the calling one included) from now on; 0 restores the default.

    More threads than cores warns with :class:`ThreadCountWarning`: they then share cores
    and wait for each other.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_THREADS:
        raise EmberValueError(
            f"set_num_threads: expected an integer 0-{MAX_THREADS} (0: one per core), got {n!r}"
        )
    cores = num_cores()
    if n > cores:
        warnings.warn(
            f"{n} threads on {cores} cores: threads will wait for each other; use at most {cores}",
            ThreadCountWarning,
            stacklevel=2,
        )
    c_api.check_call(c_api.lib().EmberBackendSetNumThreads(n))


@contextmanager
def num_threads(n: int) -> Iterator[None]:
    """Use ``n`` threads inside the ``with`` block, then the count from before it."""
    before = get_num_threads()
    set_num_threads(n)
    try:
        yield
    finally:
        c_api.check_call(c_api.lib().EmberBackendSetNumThreads(before))


def pool_stats() -> dict[str, int]:
    """The thread pool's cumulative counters (:data:`POOL_STATS`; subtract two readings)."""
    out = (ctypes.c_int64 * len(POOL_STATS))()
    c_api.lib().EmberBackendPoolStats(out, len(POOL_STATS))
    return dict(zip(POOL_STATS, (int(v) for v in out), strict=True))


def pool_policy(policy: str | None = None, reset: bool = False) -> str:
    """Set the pool's policy (:data:`POOL_POLICIES`; for measurements and tests; ``None``
    keeps it); what the pool learnt stays unless ``reset``. Returns the policy before."""
    if policy is not None and policy not in POOL_POLICIES:
        raise EmberValueError(f"pool_policy: expected one of {POOL_POLICIES}, got {policy!r}")
    code = POOL_POLICIES.index(policy) if policy is not None else -1
    before = int(c_api.lib().EmberBackendPoolPolicy(code, int(reset)))
    if before < 0:
        c_api.check_call(before)
    return POOL_POLICIES[before]


def _address(name: str) -> int:
    """The address of the C runtime's function ``name``."""
    return int(ctypes.cast(getattr(c_api.lib(), name), ctypes.c_void_p).value or 0)


def governed_address() -> int:
    """The address of EmberBackendGovernedCall (a packed function: see :func:`governed_entry`)."""
    return _address("EmberBackendGovernedCall")


class _GovernedCall(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("resource", ctypes.c_void_p)]


def governed_entry(address: int, resource: int) -> tuple[int, int, object]:
    """The packed C function at ``address`` (with its ``resource``) as a governed run:
    ``(address, resource, keepalive)`` of EmberBackendGovernedCall, which calls it between
    EmberBackendRunBegin and EmberBackendRunEnd; ``resource`` is the run's site (see
    :func:`run_choice`). Keep ``keepalive`` alive while the entry is used."""
    call = _GovernedCall(address, resource or None)
    return governed_address(), ctypes.addressof(call), call


class RunSite:
    """A site of governed runs for a run made of several calls (the graph executor's):
    call ``begin()`` before its first call and ``end()`` after its last, also when it
    failed; ``site`` is the address :func:`run_choice` takes."""

    def __init__(self) -> None:
        self._cell = ctypes.c_char()  # its address is the site
        self.site = ctypes.addressof(self._cell)
        # the graph executor calls both every run: through the FFI extension as packed
        # calls (0.1 us each), else through ctypes with the argument prebuilt (0.2 us)
        self._ret = (ctypes.c_int64(), ctypes.c_int32())
        ret, code = (ctypes.addressof(r) for r in self._ret)
        begin, end = (
            make_prepared_call(_address(name + "Packed"), 0, 0, 0, ret, code, self.site)
            for name in ("EmberBackendRunBegin", "EmberBackendRunEnd")
        )
        self.begin: Callable[[], object]
        self.end: Callable[[], object]
        if begin is not None and end is not None:
            self.begin, self.end = begin, end
            return
        lib, arg = c_api.lib(), ctypes.c_void_p(self.site)
        self.begin = functools.partial(lib.EmberBackendRunBegin, arg)
        self.end = functools.partial(lib.EmberBackendRunEnd, arg)


def run_choice(site: int, threads: int | None = None) -> dict[str, int] | None:
    """What the run governor chose for the runs of ``site`` (an executor's ``run_site``) at
    ``threads`` threads (default: the current count): ``parallel`` (1: the pool, 0: the
    calling thread alone), ``runs`` seen, ``changes`` (probes that changed the choice) and
    ``trying`` (1: runs still alternate between the two); None before its first run."""
    n = get_num_threads() if threads is None else threads
    out = (ctypes.c_int64 * 4)()
    if not c_api.lib().EmberBackendRunChoice(site, n, out, 4):
        return None
    return dict(zip(("parallel", "runs", "changes", "trying"), (int(v) for v in out), strict=True))
