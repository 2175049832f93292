"""The run governor (src/pool_govern.h), driven with made-up run times, and governed runs
through ember.runtime.threads and the executors (no timings asserted)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from runtime_test_util import build_library, pool_under_test

from ember.runtime import libruntime, threads
from ember.runtime.threads import RunSite, pool_stats, run_choice

WARM, SKIP, BLOCK, TRIAL_BLOCKS, PERIOD_MIN, PERIOD_MAX = 2, 1, 3, 1, 64, 4096
SKIP_NS = 300_000
MS = 1_000_000  # runs of a millisecond: a block skips one run

DRIVER = r"""
#include "%s"
static PoolGov g_g;
/* args: op (0 reset, 1 run (parallel, ns), 2 choose); after 0-1 a field: 0 parallel,
 * 1 runs, 2 period, 3 changes, 4 blocks_left, 5 next_probe */
EMBER_DLL int32_t step(EMBER_ARGS) {
  int64_t op = args[0].v_int64, v;
  if (op == 0) gov_init(&g_g);
  if (op == 1) gov_record(&g_g, (int)args[1].v_int64, args[2].v_int64);
  if (op == 2) {
    v = gov_choose(&g_g);
  } else {
    int64_t f[6] = {g_g.parallel, g_g.runs, g_g.period, g_g.changes, g_g.blocks_left,
                    g_g.next_probe};
    v = f[args[n - 1].v_int64];
  }
  ret->v_int64 = v; *ret_code = EMBER_INT; return 0;
}
"""

FIELDS = ("parallel", "runs", "period", "changes", "blocks_left", "next_probe")


class Gov:
    """The C state machine behind a small Python face: ``run(times)`` makes one run with
    the choice the governor asks for, timed by ``times(parallel)``."""

    def __init__(self, step) -> None:  # type: ignore[no-untyped-def]
        self.step = step
        step(0, 0)
        self.choices: list[int] = []

    def choose(self) -> int:
        return int(self.step(2))

    def record(self, parallel: int, ns: int) -> None:
        self.step(1, parallel, ns, 0)

    def run(self, times: Callable[[int], int], count: int = 1) -> None:
        for _ in range(count):
            parallel = self.choose()
            self.choices.append(parallel)
            self.record(parallel, times(parallel))

    def __getattr__(self, name: str) -> int:
        return int(self.step(3, FIELDS.index(name)))


def speeds(pool: int, alone: int) -> Callable[[int], int]:
    return lambda parallel: pool if parallel else alone


@pytest.fixture(scope="module")
def step(tmp_path_factory):  # type: ignore[no-untyped-def]
    header = libruntime._HERE / "src" / "pool_govern.h"
    return build_library(tmp_path_factory.mktemp("govern"), DRIVER % header, "govern")["step"]


@pytest.fixture
def gov(step) -> Gov:  # type: ignore[no-untyped-def]
    return Gov(step)


TRIAL = 2 * TRIAL_BLOCKS * (SKIP + BLOCK)


def test_the_first_trial_runs_blocks_of_each_choice_then_keeps_the_faster(gov: Gov) -> None:
    gov.run(speeds(MS // 2, 4 * MS // 5), WARM + TRIAL)
    block = SKIP + BLOCK
    assert gov.choices == [1] * WARM + ([1] * block + [0] * block) * TRIAL_BLOCKS
    assert (gov.parallel, gov.period, gov.changes) == (1, PERIOD_MIN, 0)
    gov.run(speeds(MS // 2, 4 * MS // 5), 10)
    assert gov.choices[-10:] == [1] * 10


def test_a_model_a_second_thread_does_not_speed_up_runs_alone(gov: Gov) -> None:
    gov.run(speeds(108 * MS // 100, 76 * MS // 100), WARM + TRIAL)  # resnet8, vCPUs far apart
    assert gov.parallel == 0
    gov.run(speeds(108 * MS // 100, 76 * MS // 100), 20)
    assert gov.choices[-20:] == [0] * 20


def test_the_pool_must_save_five_percent_to_be_kept(gov: Gov) -> None:
    gov.run(speeds(96 * MS // 100, MS), WARM + TRIAL)  # 4% faster: noise
    assert gov.parallel == 0
    other = Gov(gov.step)
    other.run(speeds(94 * MS // 100, MS), WARM + TRIAL)
    assert other.parallel == 1


def test_the_first_run_of_each_block_is_not_timed(gov: Gov) -> None:
    """A switch costs the run right after it: that run must not decide."""
    seen = {0: 0, 1: 0}

    def times(parallel: int) -> int:
        seen[parallel] += 1
        first_of_block = gov.runs >= WARM and (gov.runs - WARM) % (SKIP + BLOCK) == 0
        return 10 * MS if parallel and first_of_block else (MS // 2 if parallel else 4 * MS // 5)

    gov.run(times, WARM + TRIAL)
    assert gov.parallel == 1


def test_short_runs_skip_until_the_switch_is_paid_for(gov: Gov) -> None:
    """Runs of 20 us: each block leaves its first 300 us untimed (15 runs), then times 3;
    the pool's runs right after the switch are slow and must not decide."""
    block_runs: list[int] = []

    def times(parallel: int) -> int:
        if not block_runs or block_runs[-1] != parallel or gov.runs == WARM:
            block_runs.clear()  # a new block (the first begins after the warm-up)
        block_runs.append(parallel)
        if parallel and len(block_runs) <= 4:
            return 36_000  # waking the worker, warming its caches
        return 17_000 if parallel else 23_000

    gov.run(times, WARM + 2 * (SKIP_NS // 17_000 + 1 + BLOCK) + 10)
    assert gov.blocks_left == 0 and gov.parallel == 1
    skipped = gov.choices[WARM:].index(0)
    assert skipped == -(-(SKIP_NS - 4 * 36_000) // 17_000) + 4 + BLOCK


def test_medians_shrug_off_one_slow_run(gov: Gov) -> None:
    slow = iter([False] * (WARM + SKIP) + [True] + [False] * 100)
    gov.run(lambda p: 5 * MS if next(slow) else (MS // 2 if p else 4 * MS // 5), WARM + TRIAL)
    assert gov.parallel == 1


def test_probes_that_hold_double_the_gap_up_to_the_most(gov: Gov) -> None:
    fast = speeds(200_000, 300_000)  # 4096 runs are under a second: the gap is in runs
    gov.run(fast, 30)
    assert gov.blocks_left == 0 and gov.parallel == 1
    periods = []
    for _ in range(9):
        periods.append(gov.period)
        gov.run(fast, gov.next_probe - gov.runs)
        assert gov.blocks_left == 2  # the probe began
        start = len(gov.choices)
        while gov.blocks_left:
            gov.run(fast)
        probe = gov.choices[start:]  # a block of the other choice, then one of this
        alone = probe.index(1)
        assert probe == [0] * alone + [1] * (len(probe) - alone) and alone == SKIP + BLOCK
        assert gov.parallel == 1
    assert periods == [min(PERIOD_MIN * 2**k, PERIOD_MAX) for k in range(9)]
    assert gov.changes == 0


def test_long_runs_are_probed_at_least_once_a_second(gov: Gov) -> None:
    slow = speeds(3 * MS, 5 * MS)  # mobilenet_v2-sized runs
    gov.run(slow, WARM + TRIAL)
    for _ in range(6):  # the gap doubles in runs, but never passes a second of runs
        gap = gov.runs
        gov.run(slow, 1)
        while gov.blocks_left == 0:
            gov.run(slow, 1)
        assert gov.runs - gap <= max(PERIOD_MIN, 1_000 // 3 + 1)
        gov.run(slow, 2 * (SKIP + BLOCK))


def test_a_probe_follows_the_machine_when_it_changes(gov: Gov) -> None:
    gov.run(speeds(MS // 2, 4 * MS // 5), WARM + TRIAL)  # vCPUs close: the pool
    gov.run(speeds(MS // 2, 4 * MS // 5), gov.next_probe - gov.runs + 2 * (SKIP + BLOCK))
    assert gov.period == 2 * PERIOD_MIN
    far = speeds(11 * MS // 10, 78 * MS // 100)  # the host moved the vCPUs apart
    gov.run(far, gov.next_probe - gov.runs + 2 * (SKIP + BLOCK))
    assert (gov.parallel, gov.changes, gov.period) == (0, 1, PERIOD_MIN)
    near = speeds(MS // 2, 4 * MS // 5)  # and back
    gov.run(near, gov.next_probe - gov.runs + 2 * (SKIP + BLOCK))
    assert (gov.parallel, gov.changes) == (1, 2)


def test_a_run_of_the_other_choice_during_a_block_is_ignored(gov: Gov) -> None:
    """Two threads running one model: runs chosen before the block changed."""
    gov.run(speeds(MS // 2, 4 * MS // 5), WARM + 2)  # inside the pool block
    gov.record(0, 1)  # two caller-alone runs of 1 ns: counted, they would win the trial
    gov.record(0, 1)
    gov.run(speeds(MS // 2, 4 * MS // 5), TRIAL - 2)
    assert gov.blocks_left == 0 and gov.parallel == 1


# ---------------------------------------------------------------- governed runs


def test_run_site_counts_governed_runs_at_two_threads_only() -> None:
    site = RunSite()
    with pool_under_test("adaptive", threads=1):
        before = pool_stats()["runs"]
        site.begin()
        site.end()
        assert pool_stats()["runs"] == before
        assert run_choice(site.site, 1) is None
    with pool_under_test("adaptive", threads=2):
        site.begin()
        site.end()
        choice = run_choice(site.site, 2)
        assert choice is not None and choice["runs"] == 1 and choice["trying"] == 1
    for policy in ("always", "per-loop", "ungoverned"):
        with pool_under_test(policy, threads=2):
            other = RunSite()
            other.begin()
            other.end()
            assert run_choice(other.site, 2) is None  # a policy without the governor


def test_run_site_without_the_ffi_extension_governs_through_ctypes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(threads, "make_prepared_call", lambda *args: None)
    site = RunSite()
    with pool_under_test("adaptive", threads=2):
        site.begin()
        site.end()
        choice = run_choice(site.site, 2)
        assert choice is not None and choice["runs"] == 1


def test_nested_runs_are_decided_by_the_outer_one_and_an_unmatched_end_is_harmless() -> None:
    outer, inner = RunSite(), RunSite()
    with pool_under_test("adaptive", threads=2):
        inner.end()  # no run began: nothing happens
        outer.begin()
        inner.begin()
        inner.end()
        outer.end()
        assert run_choice(inner.site, 2) is None
        assert run_choice(outer.site, 2)["runs"] == 1  # type: ignore[index]


def test_reset_forgets_the_governed_runs() -> None:
    site = RunSite()
    with pool_under_test("adaptive", threads=2):
        site.begin()
        site.end()
        assert run_choice(site.site, 2) is not None
    assert run_choice(site.site, 2) is None  # pool_under_test resets on the way out


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_executors_run_governed_with_the_same_outputs_either_way(executor: str) -> None:
    import ember
    from ember.examples.models import make_model
    from ember.testing import compile_onnx

    case = make_model("ds_cnn_kws")
    dev = ember.cpu(0)
    built = compile_onnx(case.model, shape=case.shapes, target="c", executor=executor)
    module = ember.load_artifacts(built, dev)["default"](dev)
    ex = ember.AotExecutor(module) if executor == "aot" else ember.GraphExecutor(module)
    ex.set_input(**case.inputs)
    with pool_under_test("adaptive", threads=2):
        outs, alone = [], 0
        for _ in range(1000):  # the trial: ~40 runs of ~20 us
            before = pool_stats()["runs_alone"]
            ex.run()
            alone += pool_stats()["runs_alone"] - before
            outs.append(ex.get_output(0).numpy().copy())
            choice = ex.thread_choice()
            assert choice is not None
            if not choice["trying"]:
                break
        assert choice["trying"] == 0 and choice["parallel"] in (0, 1)
        assert alone >= SKIP + BLOCK  # the trial's caller-alone block ran
        for out in outs[1:]:  # the pool and the caller alone compute the same bits
            np.testing.assert_array_equal(out, outs[0])
    with pool_under_test("adaptive", threads=1):
        ex.run()
        assert ex.thread_choice() is None
