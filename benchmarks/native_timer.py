"""Time one native call from C: an AOT model's run with no Python around it.

``benchmarks/models.py`` times each engine from Python; what the AOT executor costs on top
of its run function shows only against the same run timed where it is called: in C. The
helper compiled here reads both clocks (``CLOCK_MONOTONIC``, ``CLOCK_THREAD_CPUTIME_ID``)
right before and after one call of an ``EmberPackedCFunc`` over argument arrays built
once, as a deployed C program calling ``ember_<mod>_run_model`` would; Python's call of
the helper is outside both readings. Example::

    timer = NativeTimer(tmp_dir)
    run = timer.timed(aot.module.native_call())   # None: the run function has no C entry
    wall_s, cpu_s = run()
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ember.support.toolchain import compile_shared

SOURCE = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <time.h>

typedef int32_t (*packed_fn)(void*, void*, int32_t, void*, void*, void*);

static double seconds(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* one call of fn; out[0] its wall seconds, out[1] the calling thread's CPU seconds */
int32_t ember_bench_timed_call(void* fn, void* values, void* codes, int32_t num_args,
                               void* ret, void* ret_code, void* resource, double* out) {
  double wall = seconds(CLOCK_MONOTONIC);
  double cpu = seconds(CLOCK_THREAD_CPUTIME_ID);
  int32_t status = ((packed_fn)fn)(values, codes, num_args, ret, ret_code, resource);
  out[1] = seconds(CLOCK_THREAD_CPUTIME_ID) - cpu;
  out[0] = seconds(CLOCK_MONOTONIC) - wall;
  return status;
}
"""

#: (C function address, its six packed-call arguments as integers, objects to keep alive),
#: as ``AotExecutorModule.native_call()`` returns it.
NativeCall = tuple[int, tuple[int, ...], tuple[Any, ...]]


class NativeTimer:
    """The compiled helper (built once into ``folder``)."""

    def __init__(self, folder: str | Path) -> None:
        src = Path(folder) / "ember_bench_timer.c"
        src.write_text(SOURCE)
        lib = compile_shared([src], Path(folder) / "libember_bench_timer.so", openmp=False)
        self._lib = ctypes.CDLL(str(lib))
        self._fn = self._lib.ember_bench_timed_call
        self._fn.restype = ctypes.c_int32
        argtypes: list[Any] = [ctypes.c_void_p] * 3 + [ctypes.c_int32] + [ctypes.c_void_p] * 3
        self._fn.argtypes = [*argtypes, ctypes.POINTER(ctypes.c_double)]

    def timed(self, call: NativeCall | None) -> Callable[[], tuple[float, float]] | None:
        """A function making ``call`` once from C and returning its (wall, CPU) seconds;
        None when there is no C entry to call."""
        if call is None:
            return None
        address, (values, codes, nargs, ret, ret_code, resource), keep = call
        out = (ctypes.c_double * 2)()
        fn = self._fn

        def run() -> tuple[float, float]:
            if fn(address, values, codes, nargs, ret, ret_code, resource or None, out):
                raise RuntimeError(f"the native call failed (kept alive: {len(keep)} objects)")
            return out[0], out[1]

        return run
