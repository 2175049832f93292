"""The host as the benchmarks see it: one core's FMA limit, a bounded busy process, and how
far apart two cores are (:func:`core_round_trip`).

**FMA limit of one core** (float32)::

    limit = lanes x 2 flop per FMA x FMA units x clock
    lanes     = vector bits / 32 (ember's record of the host, ``target.cpu_info("native")``:
                8 with AVX2, 16 with AVX-512)
    FMA units = full-width FMAs a cycle, measured: twelve independent chains of FMAs on
                vectors of that width, against the clock below (``--fma-units`` to set
                it; 2 if it cannot be measured). The count is not a property of the
                ISA: Zen 4 runs a 512-bit FMA on both of its 256-bit pipes (1 unit at
                16 lanes), Zen 5 and Intel server cores have two full-width units.
    clock     = measured: a chain of dependent integer adds (one per cycle on every x86
                core) timed by the thread's CPU time, the best of a few tries; else the
                ``cpu MHz`` of /proc/cpuinfo (a VM's nominal clock, below a boosted one)

This project's machine of stop 40 (Zen 4, AVX-512) does 16 x 2 x 1 = 32 flop per cycle;
the Zen 5 of stops 29-39 did 16 x 2 x 2 = 64. A model's fraction is
``GFLOP / seconds / (threads x limit)``.

**A busy process** (:func:`busy_process`): one child process, nice 0, pinned to the last
core this process may use, spinning in pure Python until a deadline, until its parent
is gone, or until the ``with`` block ends (it is killed on exit, error or Ctrl-C).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ToolchainError
from ember.support.toolchain import compile_shared
from ember.target.cpu import cpu_info

_CHAIN_C = r"""
long ember_bench_add_chain(long n) {
    long x = 0;
#if defined(__x86_64__)
    for (long i = 0; i < n; ++i) {
        __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    }
#endif
    return x;
}
"""
#: dependent adds per iteration of the chain above.
_CHAIN_ADDS = 8

#: Independent FMA chains on vectors of EMBER_LANES floats: more chains than latency x
#: units on any x86 core (4-5 cycles x 2), so the pipes, not the chains, bound it.
_FMA_C = r"""
typedef float vec __attribute__((vector_size(EMBER_LANES * 4)));
long ember_bench_fma(long n) {
    vec a[12], b, c;
    for (int j = 0; j < EMBER_LANES; ++j) { b[j] = 1.0000001f; c[j] = 1e-7f; }
    for (int i = 0; i < 12; ++i)
        for (int j = 0; j < EMBER_LANES; ++j) a[i][j] = (float)i;
    for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; ++i) a[i] = a[i] * b + c;
    }
    float s = 0;
    for (int i = 0; i < 12; ++i) s += a[i][0];
    return (long)s;
}
"""
#: FMAs per iteration of the loop above.
_FMA_CHAINS = 12


@dataclass(frozen=True)
class FmaLimit:
    """One core's float32 FMA limit and where its numbers came from."""

    lanes: int
    fma_units: int
    ghz: float
    clock_source: str
    units_source: str = "given"

    @property
    def flops_per_cycle(self) -> int:
        """lanes x 2 (an FMA is two flops) x FMA units."""
        return self.lanes * 2 * self.fma_units

    @property
    def gflops(self) -> float:
        """The limit of one core in GFLOP/s."""
        return self.flops_per_cycle * self.ghz

    def describe(self) -> str:
        """The formula with this host's numbers, for the report."""
        return (
            f"FMA limit per core = {self.lanes} lanes x 2 x {self.fma_units} FMA units "
            f"({self.units_source}) x "
            f"{self.ghz:.2f} GHz ({self.clock_source}) = {self.flops_per_cycle} flop/cycle = "
            f"{self.gflops:.1f} GFLOP/s"
        )


def cpuinfo_ghz() -> float | None:
    """The first ``cpu MHz`` of /proc/cpuinfo in GHz, if there is one."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("cpu MHz"):
            return float(line.split(":", 1)[1]) / 1e3
    return None


def _best_loop_seconds(
    source: str, symbol: str, n: int, flags: Sequence[str] = (), tries: int = 5
) -> float | None:
    """The best thread CPU time of ``symbol(n)`` in ``source`` compiled alone, after one
    call of a tenth to wake the core to its boost clock (None off x86-64 or without a C
    compiler)."""
    if os.uname().machine not in ("x86_64", "amd64"):
        return None
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        src = Path(tmp) / "loop.c"
        src.write_text(source)
        try:
            out = compile_shared([src], Path(tmp) / "loop.so", flags=list(flags), openmp=False)
            run = getattr(ctypes.CDLL(str(out)), symbol)
        except (ToolchainError, OSError, AttributeError):
            return None
        run.argtypes, run.restype = [ctypes.c_long], ctypes.c_long
        run(n // 10)
        best = float("inf")
        for _ in range(tries):
            start = time.thread_time()
            run(n)
            best = min(best, time.thread_time() - start)
    return best if 0 < best < float("inf") else None


def measure_ghz(tries: int = 5, adds: int = 50_000_000) -> float | None:
    """This core's clock from a timed chain of dependent adds (None off x86-64 or
    without a C compiler)."""
    n = adds // _CHAIN_ADDS
    best = _best_loop_seconds(_CHAIN_C, "ember_bench_add_chain", n, tries=tries)
    return n * _CHAIN_ADDS / best / 1e9 if best else None


_PING_PONG_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
static _Atomic int64_t flag __attribute__((aligned(64)));
static int64_t rounds;
static void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
static void* answer(void* cpu) {
  pin((int)(intptr_t)cpu);
  for (int64_t i = 0; i < rounds; ++i) {
    while (atomic_load(&flag) != 2 * i + 1) {}
    atomic_store(&flag, 2 * i + 2);
  }
  return 0;
}
/* ns per round trip of a cache line between CPUs a (the calling thread, pinned there for
   the call only) and b */
double ember_bench_round_trip(int a, int b, int64_t n) {
  cpu_set_t before;
  pthread_getaffinity_np(pthread_self(), sizeof before, &before);
  rounds = n;
  atomic_store(&flag, 0);
  pthread_t t;
  pin(a);
  pthread_create(&t, 0, answer, (void*)(intptr_t)b);
  struct timespec s, e;
  clock_gettime(CLOCK_MONOTONIC, &s);
  for (int64_t i = 0; i < n; ++i) {
    atomic_store(&flag, 2 * i + 1);
    while (atomic_load(&flag) != 2 * i + 2) {}
  }
  clock_gettime(CLOCK_MONOTONIC, &e);
  pthread_join(t, 0);
  pthread_setaffinity_np(pthread_self(), sizeof before, &before);
  return ((e.tv_sec - s.tv_sec) * 1e9 + (e.tv_nsec - s.tv_nsec)) / (double)n;
}
"""


def core_round_trip(workdir: Path) -> Callable[[], float] | None:
    """A function measuring the round trip (ns) of a cache line between the first two CPUs
    this process may use: two pinned threads handing a counter back and forth. A VM's two
    vCPUs may sit on nearby or distant cores, and the host moves them: on this project's
    machine 85-160 ns near, 385-460 ns far, and every 2-thread time depends on which
    (docs/performance.md, stop 32). None with fewer than two CPUs or no C compiler."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) < 2:
        return None
    src = workdir / "ping_pong.c"
    src.write_text(_PING_PONG_C)
    try:
        out = compile_shared([src], workdir / "ping_pong.so", flags=["-pthread"], openmp=False)
        lib = ctypes.CDLL(str(out))
    except (ToolchainError, OSError):
        return None
    trip = lib.ember_bench_round_trip
    trip.restype = ctypes.c_double
    trip.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64]
    return lambda: float(trip(cpus[0], cpus[1], 100_000))


def measure_fma_rate(lanes: int, tries: int = 5, fmas: int = 60_000_000) -> float | None:
    """Vector FMAs of ``lanes`` floats this core retires per second (None off x86-64 or
    without a C compiler)."""
    n = fmas // _FMA_CHAINS
    flags = ["-march=native", "-ffp-contract=fast", f"-DEMBER_LANES={lanes}"]
    best = _best_loop_seconds(_FMA_C, "ember_bench_fma", n, flags, tries)
    return n * _FMA_CHAINS / best if best else None


def fma_limit(fma_units: int | None = None, ghz: float | None = None) -> FmaLimit:
    """One core's limit: lanes from ember's host record; the clock and the FMA units
    measured unless given."""
    lanes = cpu_info("native").lanes(32)
    measured = measure_ghz() if ghz is None or fma_units is None else None
    units_source = "given"
    if fma_units is None:
        rate = measure_fma_rate(lanes) if measured else None
        # a rate a little under a whole number of units per cycle is that number
        fma_units, units_source = (
            (max(1, round(rate / (measured * 1e9))), "measured")
            if rate and measured
            else (2, "assumed")
        )
    if ghz is not None:
        return FmaLimit(lanes, fma_units, ghz, "given", units_source)
    if measured is not None:
        return FmaLimit(lanes, fma_units, measured, "measured", units_source)
    return FmaLimit(lanes, fma_units, cpuinfo_ghz() or 1.0, "/proc/cpuinfo", units_source)


_SPIN = """
import os, sys, time
parent, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
n = 0
while time.monotonic() < deadline and os.getppid() == parent:
    for _ in range(20000):
        n += 1
"""


@contextmanager
def busy_process(seconds: float) -> Iterator[subprocess.Popen[bytes]]:
    """One spinning child process for at most ``seconds``, killed when the block ends."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    def pin() -> None:  # runs in the child before exec
        if len(cores) > 1:
            os.sched_setaffinity(0, {cores[-1]})

    child = subprocess.Popen(
        [sys.executable, "-c", _SPIN, str(os.getpid()), str(seconds)],
        preexec_fn=pin,
        stdin=subprocess.DEVNULL,
    )
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None

    def on_term(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)  # unwinds through the finally below

    if main:
        signal.signal(signal.SIGTERM, on_term)
    try:
        yield child
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
        child.kill()
        child.wait()


def busy_alive(child: subprocess.Popen[bytes]) -> bool:
    """Whether the busy process still runs (it stops at its deadline)."""
    return child.poll() is None
