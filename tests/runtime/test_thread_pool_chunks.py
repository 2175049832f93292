"""How ember's thread pool (src/thread_pool.h) splits a range loop into chunks, and when a
launch counts as a loss (backs the loop off)."""

from __future__ import annotations

import pytest
from runtime_test_util import build_library, pool_under_test

pytestmark = pytest.mark.cc

C_SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
typedef struct {
  int64_t chunks, smallest, largest, iterations;
} Chunks;
static int32_t note_chunk(int64_t begin, int64_t end, void* cdata) {
  Chunks* c = (Chunks*)cdata;
  int64_t n = end - begin;
  __atomic_add_fetch(&c->chunks, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&c->iterations, n, __ATOMIC_RELAXED);
  int64_t seen = __atomic_load_n(&c->largest, __ATOMIC_RELAXED);
  while (n > seen && !__atomic_compare_exchange_n(&c->largest, &seen, n, 0, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED)) {
  }
  seen = __atomic_load_n(&c->smallest, __ATOMIC_RELAXED);
  while (n < seen && !__atomic_compare_exchange_n(&c->smallest, &seen, n, 0, __ATOMIC_RELAXED,
                                                  __ATOMIC_RELAXED)) {
  }
  return 0;
}
/* args: extent, grain, launches; returns chunks * 1e6 + largest * 1e3 + smallest of the last
 * launch that was split (0 when none was: every launch ran inline), -1 on a lost iteration */
EMBER_DLL int32_t chunking(EMBER_ARGS) {
  int64_t extent = args[0].v_int64, grain = args[1].v_int64, found = 0;
  for (int64_t k = 0; k < args[2].v_int64; ++k) {
    Chunks c = {0, INT64_MAX, 0, 0};
    if (EmberBackendParallelFor(note_chunk, &c, extent, grain, 0) != 0) return -1;
    if (c.iterations != extent) { ret->v_int64 = -1; *ret_code = EMBER_INT; return 0; }
    if (c.chunks > 1) found = c.chunks * 1000000 + c.largest * 1000 + c.smallest;
  }
  ret->v_int64 = found; *ret_code = EMBER_INT; return 0;
}
extern int usleep(unsigned int usec); /* unistd.h hides it under strict C11 */
typedef struct {
  pthread_t caller;
  int64_t calls, others;
} Wake;
static int32_t wake_chunk(int64_t begin, int64_t end, void* cdata) {
  Wake* w = (Wake*)cdata;
  (void)begin; (void)end;
  __atomic_add_fetch(&w->calls, 1, __ATOMIC_RELAXED);
  if (!pthread_equal(pthread_self(), w->caller)) {
    __atomic_add_fetch(&w->others, 1, __ATOMIC_RELAXED);
  }
  return 0;
}
/* args: attempts, pause_us. An attempt pauses (the worker falls asleep), launches a loop of
 * two empty iterations and, when it was split but the caller ran both (over before the
 * worker woke), launches the same loop again at once. Returns the second launch's chunk
 * calls (1: it ran inline, backed off; 2: split), or 0 when no attempt qualified. */
EMBER_DLL int32_t wake_then_again(EMBER_ARGS) {
  for (int64_t k = 0; k < args[0].v_int64; ++k) {
    usleep((unsigned int)args[1].v_int64);
    Wake w = {pthread_self(), 0, 0};
    int64_t before[16], after[16]; /* [13]: launches that woke a sleeping worker */
    EmberBackendPoolStats(before, 16);
    if (EmberBackendParallelFor(wake_chunk, &w, 2, 1, 0) != 0) return -1;
    EmberBackendPoolStats(after, 16);
    /* on a loaded machine the worker may still be in its spin, descheduled: not asleep */
    if (w.calls != 2 || w.others != 0 || after[13] == before[13]) continue;
    Wake again = {pthread_self(), 0, 0};
    if (EmberBackendParallelFor(wake_chunk, &again, 2, 1, 0) != 0) return -1;
    ret->v_int64 = again.calls; *ret_code = EMBER_INT; return 0;
  }
  ret->v_int64 = 0; *ret_code = EMBER_INT; return 0;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):  # type: ignore[no-untyped-def]
    return build_library(tmp_path_factory.mktemp("chunks"), C_SOURCE, "chunks")


@pytest.fixture(autouse=True)
def _two_threads():  # type: ignore[no-untyped-def]
    """Two threads and a pool that learnt nothing, with the per-loop backoff alone (the
    process-wide serial stretches: test_pool_adapt.py)."""
    with pool_under_test("per-loop"):
        yield


def _split(code: int) -> tuple[int, int, int]:
    """(chunks, largest, smallest) of chunking's answer."""
    return code // 1000000, code // 1000 % 1000, code % 1000


@pytest.mark.parametrize(
    ("extent", "grain", "want"),
    [
        (64, 24, (2, 32, 32)),  # was 24, 24, 16: one thread ran two thirds
        (100, 20, (4, 25, 25)),  # five grains: four chunks, a multiple of the threads
        (800, 1, (8, 100, 100)),  # four chunks per thread
        (801, 1, (8, 101, 94)),  # as even as the extent allows
        (47, 23, (2, 24, 23)),  # two grains (47 // 23): one chunk each
    ],
)
def test_chunks_are_even_and_a_multiple_of_the_threads(lib, extent, grain, want) -> None:  # type: ignore[no-untyped-def]
    """A launch that is split (a loop that lost lately runs inline: some launches are)
    makes ``want`` chunks; every iteration runs once either way."""
    got = lib["chunking"](extent, grain, 60)
    assert got != -1
    assert _split(got) == want


def test_under_two_grains_runs_inline(lib) -> None:  # type: ignore[no-untyped-def]
    assert lib["chunking"](45, 23, 10) == 0


def test_a_launch_over_before_a_sleeping_worker_woke_is_not_a_loss(lib) -> None:  # type: ignore[no-untyped-def]
    """After a pause the worker sleeps; a short loop that the caller finished alone while
    the worker woke lost no time, so the same loop's next launch is split again (it ran
    inline for 4-1024 launches when this counted as a loss)."""
    got = lib["wake_then_again"](40, 20000)
    if got == 0:
        pytest.skip("the worker joined every short loop: nothing to check on this machine")
    assert got == 2
