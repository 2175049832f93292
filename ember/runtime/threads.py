"""The thread count of ember's C thread pool, which runs the parallel loops of every kernel.

One count per process: ``EMBER_NUM_THREADS`` (read once, ``ember.config``), else one
thread per core the process may use; :func:`set_num_threads` changes it at any time (the
next parallel loop uses it) and :func:`num_threads` changes it for a block. A target's
``-num-threads=N`` fixes the count of the kernels built with it. A loop that ran slower in
parallel than its caller alone would have (its worker shared a core with another busy
process) runs on the caller for its next 4 to 1024 launches, then is offered to the pool
again, so a busy machine costs little over one thread. Example::

    import ember
    ember.runtime.set_num_threads(1)        # single-threaded from now on
    with ember.runtime.num_threads(2):
        gmod.run()
    ember.runtime.get_num_threads()         # 1 again
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from ember.config import ThreadCountWarning
from ember.errors import EmberValueError
from ember.runtime import c_api

__all__ = ["ThreadCountWarning", "get_num_threads", "num_cores", "num_threads", "set_num_threads"]

#: The most threads the C pool starts (runtime.c POOL_MAX_THREADS).
MAX_THREADS = 1024


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
