"""The thread pool's adaptive state (src/pool_adapt.h), driven with made-up times, and the
pool's serial stretches seen through ember.runtime.threads (no timings asserted)."""

from __future__ import annotations

import pytest
from runtime_test_util import build_library, pool_under_test

from ember.errors import EmberValueError
from ember.runtime import libruntime
from ember.runtime.threads import POOL_STATS, pool_policy, pool_stats

MS = 1_000_000  # ns
FLOOR, CAP, WINDOW_MIN, WINDOW_MAX, PROBE = 400_000, MS, 20 * MS, 640 * MS, 20 * MS

DRIVER = r"""
#include "%s"
static PoolAdapt g_a;
/* args: op (0 reset, 1 parallel launch (all_ns, saved_ns), 2 inline launch (ns), 3 adapt_saved
 * (own, total, own_ns, all_ns, woke), 4 adapt_shared (saved, all_ns)); returns after 0-2 a
 * field: 0 parallel?, 1 serial_left_ns, 2 window, 3 probe_left_ns, 4 stalls, 5 balance_ns */
EMBER_DLL int32_t step(EMBER_ARGS) {
  int64_t op = args[0].v_int64, v;
  if (op == 0) memset(&g_a, 0, sizeof(g_a));
  if (op == 1) adapt_parallel_ran(&g_a, args[1].v_int64, args[2].v_int64);
  if (op == 2) adapt_serial_ran(&g_a, args[1].v_int64);
  if (op == 3) {
    v = adapt_saved(args[1].v_int64, args[2].v_int64, args[3].v_int64, args[4].v_int64,
                    (int)args[5].v_int64);
  } else if (op == 4) {
    v = adapt_shared(args[1].v_int64, args[2].v_int64);
  } else {
    int64_t f[6] = {adapt_parallel(&g_a), g_a.serial_left_ns, adapt_window(&g_a),
                    g_a.probe_left_ns, g_a.stalls, g_a.balance_ns};
    v = f[args[n - 1].v_int64];
  }
  ret->v_int64 = v; *ret_code = EMBER_INT; return 0;
}
"""

FIELDS = ("parallel", "serial_left", "window", "probe_left", "stalls", "balance")


class Adapt:
    """The C state machine behind a small Python face."""

    def __init__(self, step) -> None:  # type: ignore[no-untyped-def]
        self.step = step
        step(0, 0)

    def launch(self, all_ns: int, saved_ns: int) -> None:
        self.step(1, all_ns, saved_ns, 0)

    def run_inline(self, ns: int) -> None:
        self.step(2, ns, 0)

    def __getattr__(self, name: str) -> int:
        return int(self.step(5, FIELDS.index(name)))


@pytest.fixture(scope="module")
def step(tmp_path_factory):  # type: ignore[no-untyped-def]
    header = libruntime._HERE / "src" / "pool_adapt.h"
    return build_library(tmp_path_factory.mktemp("adapt"), DRIVER % header, "adapt")["step"]


@pytest.fixture
def adapt(step) -> Adapt:  # type: ignore[no-untyped-def]
    return Adapt(step)


def test_gains_and_small_losses_stay_parallel(adapt: Adapt) -> None:
    for _ in range(1000):
        adapt.launch(50_000, 10_000)
    adapt.launch(50_000, -FLOOR)  # the saved-up gains (capped at 1 ms) absorb it
    assert adapt.parallel == 1 and adapt.stalls == 0


def test_a_stall_sends_the_pool_serial_for_a_stretch_of_inline_work(adapt: Adapt) -> None:
    adapt.launch(3 * MS, -2 * MS)  # a descheduled worker held a chunk
    assert (adapt.parallel, adapt.stalls, adapt.serial_left) == (0, 1, WINDOW_MIN)
    for _ in range(19):
        adapt.run_inline(MS)
    assert adapt.parallel == 0
    adapt.run_inline(MS)
    assert adapt.parallel == 1 and adapt.probe_left == PROBE  # a retry, on trial


def test_small_losses_add_up_to_a_stall(adapt: Adapt) -> None:
    for _ in range(80):
        adapt.launch(20_000, -5_000)
    assert adapt.stalls == 0
    for _ in range(2):
        adapt.launch(20_000, -5_000)
    assert adapt.stalls == 1 and adapt.parallel == 0


def test_gains_are_capped_so_a_new_stall_still_counts(adapt: Adapt) -> None:
    for _ in range(1000):
        adapt.launch(MS, MS)
    adapt.launch(MS, -CAP)  # one stall: forgiven
    assert adapt.stalls == 0 and adapt.balance == 0
    adapt.launch(MS, -FLOOR - 1)  # the credit is used up: a second one counts
    assert adapt.stalls == 1


def test_failed_retries_double_the_stretch_up_to_the_most(adapt: Adapt) -> None:
    windows = []
    adapt.launch(MS, -MS)
    for _ in range(8):
        windows.append(adapt.serial_left)
        adapt.run_inline(adapt.serial_left)  # the whole stretch at once
        assert adapt.parallel == 1
        adapt.launch(MS, -MS)  # the retry stalls at once
    assert windows == [WINDOW_MIN * 2**k for k in range(6)] + [WINDOW_MAX, WINDOW_MAX]


def test_a_retry_that_holds_halves_the_next_stretch(adapt: Adapt) -> None:
    adapt.launch(MS, -MS)
    for _ in range(3):  # 20 -> 40 -> 80 -> 160 ms
        adapt.run_inline(adapt.serial_left)
        adapt.launch(MS, -MS)
    assert adapt.window == 160 * MS
    adapt.run_inline(adapt.serial_left)
    trial = adapt.probe_left
    assert trial == 40 * MS  # a quarter of the window, at least ADAPT_PROBE_NS
    for _ in range(trial // MS):
        adapt.launch(MS, 0)
    assert adapt.probe_left == 0 and adapt.window == 80 * MS and adapt.parallel == 1
    adapt.launch(MS, -MS)  # a stall after the trial: the halved stretch, not doubled
    assert adapt.serial_left == 80 * MS


def test_inline_launches_outside_a_stretch_change_nothing(adapt: Adapt) -> None:
    adapt.run_inline(5 * MS)
    assert (adapt.parallel, adapt.serial_left, adapt.probe_left) == (1, 0, 0)


def test_saved_time_estimate(step) -> None:  # type: ignore[no-untyped-def]
    assert step(3, 50, 100, 1000, 1000, 0, 0) == 1000  # half the work in 1000 ns: 2000 alone
    assert step(3, 100, 100, 1000, 1100, 0, 0) == -100  # ran it all, then waited
    assert step(3, 100, 100, 1000, 1100, 1, 0) == 0  # ran it all while a worker woke
    assert step(3, 0, 100, 0, 5000, 0, 0) == 0  # no rate: the caller ran nothing
    assert step(4, 1000, 800, 0) == -400  # one core shared: a gain becomes a loss
    assert step(4, -900, 800, 0) == -900


# ---- the real pool ---------------------------------------------------------------------

POOL_C = r"""
extern int usleep(unsigned int usec);
typedef struct { pthread_t caller; _Atomic int32_t others; int64_t sleep_us; } Late;
static int32_t late_chunk(int64_t begin, int64_t end, void* cdata) {
  Late* s = (Late*)cdata;
  (void)end;
  if (!pthread_equal(pthread_self(), s->caller)) {
    s->others++;
    if (s->sleep_us > 0) usleep((unsigned int)s->sleep_us);
  } else if (begin == 0 && s->sleep_us > 0) {
    usleep(300); /* time for a sleeping worker to wake and join */
  }
  return 0;
}
typedef struct { int64_t* out; } Count;
typedef struct { int64_t* out; pthread_t outer; int32_t others; } Inner;
static int32_t count_inner(int64_t begin, int64_t end, void* cdata) {
  Inner* c = (Inner*)cdata;
  if (!pthread_equal(pthread_self(), c->outer)) c->others++;
  for (int64_t i = begin; i < end; ++i) c->out[i]++;
  return 0;
}
static int32_t count_outer(int64_t begin, int64_t end, void* cdata) {
  Count* c = (Count*)cdata;
  for (int64_t i = begin; i < end; ++i) c->out[i]++;
  /* nested: inline on this thread, over this chunk's indices */
  Inner inner = {c->out + begin, pthread_self(), 0};
  if (EmberBackendParallelFor(count_inner, &inner, end - begin, 1, 0) != 0) return -1;
  return inner.others == 0 ? 0 : -1;
}
/* args: launches of a loop whose worker chunks sleep sleep_us; returns the launches a
 * worker took part in */
EMBER_DLL int32_t late_loop(EMBER_ARGS) {
  Late s = {pthread_self(), 0, args[1].v_int64};
  int64_t joined = 0;
  for (int64_t k = 0; k < args[0].v_int64; ++k) {
    s.others = 0;
    if (EmberBackendParallelFor(late_chunk, &s, 64, 1, 0) != 0) return -1;
    joined += s.others > 0;
  }
  ret->v_int64 = joined; *ret_code = EMBER_INT; return 0;
}
/* args: extent, launches; every index of a loop and of the loops its chunks start must be
 * counted twice per launch (outer + inner). Returns 0, or -2 when one is not. */
EMBER_DLL int32_t exactly_once(EMBER_ARGS) {
  int64_t extent = args[0].v_int64, launches = args[1].v_int64, bad = 0;
  int64_t* out = (int64_t*)calloc((size_t)extent, sizeof(int64_t));
  Count c = {out};
  for (int64_t k = 0; k < launches; ++k) {
    if (EmberBackendParallelFor(count_outer, &c, extent, 1, 0) != 0) { free(out); return -1; }
  }
  for (int64_t i = 0; i < extent; ++i) bad += out[i] != 2 * launches;
  free(out);
  ret->v_int64 = bad ? -2 : 0; *ret_code = EMBER_INT; return 0;
}
"""


@pytest.fixture(scope="module")
def pool(tmp_path_factory):  # type: ignore[no-untyped-def]
    src = "#include <pthread.h>\n#include <stdlib.h>\n" + POOL_C
    return build_library(tmp_path_factory.mktemp("adapt_pool"), src, "adapt_pool")


@pytest.fixture(autouse=True)
def _two_threads():  # type: ignore[no-untyped-def]
    with pool_under_test("adaptive"):
        yield


@pytest.mark.parametrize("policy", ["adaptive", "per-loop", "always"])
def test_every_iteration_runs_exactly_once(pool, policy: str) -> None:  # type: ignore[no-untyped-def]
    pool_policy(policy)
    assert pool["exactly_once"](1000, 50) == 0
    assert pool["late_loop"](20, 2000) >= 0  # may go serial midway
    assert pool["exactly_once"](1000, 50) == 0


def test_a_late_worker_sends_every_loop_to_the_caller(pool) -> None:  # type: ignore[no-untyped-def]
    """A worker that holds its chunk 5 ms (as if descheduled) costs the caller a wait at
    the join: the pool goes serial, and later loops, other loops too, run inline."""
    before = pool_stats()
    for _ in range(50):  # until a worker took part and was waited for (on a busy machine,
        # it may not join, or the caller itself may be descheduled longer than it slept)
        if pool["late_loop"](1, 5000) == 1 and pool_stats()["stalls"] > before["stalls"]:
            break
    else:
        pytest.skip("no launch was slowed by its worker: nothing to check on this machine")
    after = pool_stats()
    assert pool["late_loop"](30, 0) == 0  # all inline: 20 ms of inline work is far off
    assert pool_stats()["adapt_inline"] >= after["adapt_inline"] + 30
    assert pool["exactly_once"](100, 5) == 0  # nested loops inside a stretch: inline too


def test_per_loop_policy_never_goes_serial_for_the_process(pool) -> None:  # type: ignore[no-untyped-def]
    pool_policy("per-loop")
    before = pool_stats()
    pool["late_loop"](10, 2000)
    after = pool_stats()
    assert after["stalls"] == before["stalls"]
    assert after["adapt_inline"] == before["adapt_inline"]


def test_stats_and_policy_api() -> None:
    stats = pool_stats()
    assert tuple(stats) == POOL_STATS and all(v >= 0 for v in stats.values())
    assert pool_policy("always") == "adaptive"
    assert pool_policy() == "always"
    assert pool_policy("adaptive") == "always"
    with pytest.raises(EmberValueError):
        pool_policy("sometimes")
