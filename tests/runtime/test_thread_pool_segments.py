"""Which chunks of a range loop each thread of ember's pool runs (src/thread_pool.h): every
participant starts on a contiguous segment of its own (the caller the first), and takes
what is left of the others' only after its own."""

from __future__ import annotations

import pytest
from runtime_test_util import build_library, pool_under_test

pytestmark = pytest.mark.cc

C_SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
typedef struct {
  pthread_t caller;
  int64_t half;                   /* where the second segment starts */
  int64_t caller_first, worker_first; /* the first chunk's start of each (-1: none yet) */
  int64_t straddles, iterations, worker_chunks;
  int64_t worker_last;            /* the worker's last chunk start in its own segment */
  int64_t worker_backwards;       /* its chunks in its own segment out of order */
  int64_t worker_took_zero;       /* the worker ran the loop's first chunk (a late caller) */
} Seen;
static int32_t note(int64_t begin, int64_t end, void* cdata) {
  Seen* s = (Seen*)cdata;
  __atomic_add_fetch(&s->iterations, end - begin, __ATOMIC_RELAXED);
  if (begin < s->half && end > s->half) __atomic_add_fetch(&s->straddles, 1, __ATOMIC_RELAXED);
  if (pthread_equal(pthread_self(), s->caller)) {
    if (s->caller_first < 0) s->caller_first = begin;
  } else {
    if (s->worker_first < 0) s->worker_first = begin;
    if (begin == 0) s->worker_took_zero = 1;
    s->worker_chunks += 1;
    if (begin >= s->half) {
      if (begin < s->worker_last) s->worker_backwards += 1;
      s->worker_last = begin;
    }
  }
  return 0;
}
/* args: extent, grain, launches, the second segment's start; returns the launches a worker
 * took part in, or -1 when a launch broke a rule: an iteration lost or run twice, a chunk
 * across the two segments, the caller not starting at 0 (unless the worker ran chunk 0
 * first), the worker not starting in the
 * second segment, or its chunks there out of order. */
EMBER_DLL int32_t segments(EMBER_ARGS) {
  int64_t extent = args[0].v_int64, grain = args[1].v_int64, joined = 0;
  for (int64_t k = 0; k < args[2].v_int64; ++k) {
    Seen s = {pthread_self(), args[3].v_int64, -1, -1, 0, 0, 0, -1, 0, 0};
    if (EmberBackendParallelFor(note, &s, extent, grain, 0) != 0) return -1;
    /* a caller descheduled right after publishing may find its first chunk taken by a
     * worker that finished its own segment: then the caller starts later (a busy machine) */
    int bad = s.iterations != extent || s.straddles != 0 ||
              (s.caller_first != 0 && !s.worker_took_zero);
    if (s.worker_chunks > 0) {
      joined += 1;
      bad |= s.worker_first < s.half || s.worker_backwards != 0;
    }
    if (bad) { ret->v_int64 = -1; *ret_code = EMBER_INT; return 0; }
  }
  ret->v_int64 = joined; *ret_code = EMBER_INT; return 0;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):  # type: ignore[no-untyped-def]
    return build_library(tmp_path_factory.mktemp("segments"), C_SOURCE, "segments")


@pytest.fixture(autouse=True)
def _two_threads():  # type: ignore[no-untyped-def]
    """Two threads, every launch split (policy "always")."""
    with pool_under_test("always"):
        yield


@pytest.mark.parametrize(
    ("extent", "grain", "half"),
    [
        (800, 1, 400),  # 8 chunks of 100: 4 each
        (801, 1, 404),  # 7 chunks of 101 and one of 94
        (100, 20, 50),  # 4 chunks of 25
        (64, 24, 32),  # 2 chunks of 32
    ],
)
def test_each_thread_starts_on_its_own_half(lib, extent, grain, half) -> None:  # type: ignore[no-untyped-def]
    """The caller's first chunk is the loop's first; a worker's first chunk is in the second
    half and it runs that half in order; no chunk crosses the halves; every iteration runs
    once (a late worker's half is run by the caller: launches without the worker check
    the rest; a late caller may find the loop's first chunk taken by the worker)."""
    got = lib["segments"](extent, grain, 300, half)
    assert got != -1
