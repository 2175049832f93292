"""ember's thread pool (src/thread_pool.h): range loops, nesting, errors, counts, fork."""

from __future__ import annotations

import subprocess
import threading
import warnings

import pytest
from runtime_test_util import build_library, pool_under_test

import ember.runtime as rt
from ember.config import ThreadCountWarning, config_from
from ember.errors import EmberValueError, FFIError
from ember.runtime import libruntime
from ember.support.toolchain import compile_executable

C_SOURCE = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
extern int usleep(unsigned int usec); /* unistd.h hides it under strict C11 */
typedef struct {
  int64_t* out;
  int64_t n;
  pthread_t owner[64];
  int32_t owners;
  int64_t fail_at;
} Range;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void note_thread(Range* r) {
  pthread_t me = pthread_self();
  pthread_mutex_lock(&g_lock);
  int32_t seen = 0;
  for (int32_t k = 0; k < r->owners; ++k) seen |= pthread_equal(r->owner[k], me);
  if (!seen && r->owners < 64) r->owner[r->owners++] = me;
  pthread_mutex_unlock(&g_lock);
}
static int32_t add_index(int64_t begin, int64_t end, void* cdata) {
  Range* r = (Range*)cdata;
  note_thread(r);
  for (int64_t i = begin; i < end; ++i) {
    if (i == r->fail_at) { EmberAPISetLastError("chunk failed on purpose"); return -1; }
    r->out[i] += i;
  }
  return 0;
}
/* args: extent, grain, launches, fail_at (-1: none); returns the distinct threads used, or
 * -2 when a sum is wrong */
EMBER_DLL int32_t range_sum(EMBER_ARGS) {
  int64_t extent = args[0].v_int64, launches = args[2].v_int64;
  int64_t* out = (int64_t*)calloc((size_t)extent, sizeof(int64_t));
  Range r;
  memset(&r, 0, sizeof(r));
  r.out = out; r.n = extent; r.fail_at = args[3].v_int64;
  for (int64_t k = 0; k < launches; ++k) {
    if (EmberBackendParallelFor(add_index, &r, extent, args[1].v_int64, 0) != 0) {
      free(out);
      return -1;
    }
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < extent; ++i) bad += out[i] != i * launches;
  free(out);
  ret->v_int64 = bad ? -2 : r.owners; *ret_code = EMBER_INT; return 0;
}

typedef struct {
  int64_t inner_threads;
  int64_t total;
  pthread_t outer;
  int32_t nested_tasks;
} Nest;
static int32_t inner_chunk(int64_t begin, int64_t end, void* cdata) {
  Nest* s = (Nest*)cdata;
  if (!pthread_equal(pthread_self(), s->outer)) {
    __atomic_add_fetch(&s->inner_threads, 1, __ATOMIC_RELAXED);
  }
  __atomic_add_fetch(&s->total, end - begin, __ATOMIC_RELAXED);
  return 0;
}
static int32_t inner_task(int32_t id, EmberParallelGroupEnv* penv, void* cdata) {
  __atomic_add_fetch(&((Nest*)cdata)->nested_tasks, penv->num_task + id, __ATOMIC_RELAXED);
  return 0;
}
static int32_t outer_chunk(int64_t begin, int64_t end, void* cdata) {
  for (int64_t i = begin; i < end; ++i) {
    Nest s;
    memset(&s, 0, sizeof(s));
    s.outer = pthread_self();
    if (EmberBackendParallelFor(inner_chunk, &s, 1000, 1, 0) != 0) return -1;
    if (EmberBackendParallelLaunch(inner_task, &s, 4) != 0) return -1;
    /* nested: inline on this thread, the group launch as one task with num_task 1 */
    if (s.inner_threads != 0 || s.total != 1000 || s.nested_tasks != 1) {
      EmberAPISetLastError("a nested launch left its thread");
      return -1;
    }
  }
  return 0;
}
EMBER_DLL int32_t nested(EMBER_ARGS) {
  return EmberBackendParallelFor(outer_chunk, NULL, 64, 1, 0);
}

typedef struct {
  pthread_t caller;
  int32_t others;
  int64_t worker_us, caller_us;
} Slow;
static int32_t slow_chunk(int64_t begin, int64_t end, void* cdata) {
  Slow* s = (Slow*)cdata;
  (void)end;
  if (!pthread_equal(pthread_self(), s->caller)) {
    __atomic_add_fetch(&s->others, 1, __ATOMIC_RELAXED);
    if (s->worker_us > 0) usleep((unsigned int)s->worker_us);
  } else if (begin == 0 && s->caller_us > 0) {
    usleep((unsigned int)s->caller_us);
  }
  return 0;
}
/* args: launches, worker_us (a worker's chunk sleeps), caller_us (the caller's first chunk
 * sleeps); returns how many launches another thread took part in */
EMBER_DLL int32_t slow_loop(EMBER_ARGS) {
  Slow s;
  memset(&s, 0, sizeof(s));
  s.caller = pthread_self();
  s.worker_us = args[1].v_int64;
  s.caller_us = args[2].v_int64;
  int64_t shared = 0;
  for (int64_t k = 0; k < args[0].v_int64; ++k) {
    s.others = 0;
    if (EmberBackendParallelFor(slow_chunk, &s, 64, 1, 0) != 0) return -1;
    shared += s.others > 0;
  }
  ret->v_int64 = shared; *ret_code = EMBER_INT; return 0;
}
static int32_t slow_task(int32_t id, EmberParallelGroupEnv* penv, void* cdata) {
  Slow* s = (Slow*)cdata;
  (void)id;
  if (penv->num_task > 1) __atomic_add_fetch(&s->others, 1, __ATOMIC_RELAXED);
  if (!pthread_equal(pthread_self(), s->caller) && s->worker_us > 0) {
    usleep((unsigned int)s->worker_us);
  }
  return 0;
}
/* args: launches, worker_us; returns how many launches ran as more than one task */
EMBER_DLL int32_t slow_group(EMBER_ARGS) {
  Slow s;
  memset(&s, 0, sizeof(s));
  s.caller = pthread_self();
  s.worker_us = args[1].v_int64;
  int64_t shared = 0;
  for (int64_t k = 0; k < args[0].v_int64; ++k) {
    s.others = 0;
    if (EmberBackendParallelLaunch(slow_task, &s, 0) != 0) return -1;
    shared += s.others > 0;
  }
  ret->v_int64 = shared; *ret_code = EMBER_INT; return 0;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):  # type: ignore[no-untyped-def]
    return build_library(tmp_path_factory.mktemp("pool"), C_SOURCE, "pool")


@pytest.fixture(autouse=True)
def _restore_thread_count():  # type: ignore[no-untyped-def]
    """Each test starts from a pool that learnt nothing, with the per-loop backoff alone
    (the process-wide serial stretches: test_pool_adapt.py)."""
    with pool_under_test("per-loop", threads=None):
        yield


@pytest.mark.cc
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_many_range_launches_cover_every_iteration_once(lib, threads) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ThreadCountWarning)
        rt.set_num_threads(threads)
    for extent, grain in ((1, 1), (7, 1), (1000, 3), (4096, 64), (10, 100)):
        used = lib["range_sum"](extent, grain, 300, -1)
        assert 1 <= used <= threads
    assert lib["range_sum"](5000, 1, 1, -1) <= threads


@pytest.mark.cc
def test_one_thread_runs_everything_on_the_caller(lib) -> None:  # type: ignore[no-untyped-def]
    rt.set_num_threads(1)
    assert lib["range_sum"](100000, 1, 20, -1) == 1
    assert rt.get_num_threads() == 1


@pytest.mark.cc
def test_nested_launches_run_inline(lib) -> None:  # type: ignore[no-untyped-def]
    rt.set_num_threads(2)
    for _ in range(20):
        lib["nested"]()


@pytest.mark.cc
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_error_from_a_chunk_reaches_the_caller(lib, threads) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ThreadCountWarning)
        rt.set_num_threads(threads)
    for fail_at in (0, 777, 9999):
        with pytest.raises(FFIError, match="chunk failed on purpose"):
            lib["range_sum"](10000, 16, 3, fail_at)
    assert lib["range_sum"](10000, 16, 3, -1) >= 1  # the pool still works


@pytest.mark.cc
def test_launches_from_several_python_threads(lib) -> None:  # type: ignore[no-untyped-def]
    rt.set_num_threads(2)
    results: list[int] = []

    def run() -> None:
        for _ in range(50):
            results.append(lib["range_sum"](3000, 8, 2, -1))

    workers = [threading.Thread(target=run) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(results) == 150 and all(1 <= r <= 2 for r in results)


@pytest.mark.cc
def test_a_loop_that_loses_in_parallel_runs_inline_then_tries_again(lib) -> None:  # type: ignore[no-untyped-def]
    """A worker holding a chunk far longer than the caller's whole share (a worker on a
    busy core) makes the loop a loss: its next POOL_BACKOFF_MIN (4) launches run on the
    caller alone, even where a worker would have had time to join; later it is offered
    to the workers again."""
    rt.set_num_threads(2)
    # a loss: a worker joins while the caller's first chunk sleeps 10 ms, then sleeps 50 ms
    # (a worker that never joined a launch that had to wake it would not count)
    lib["slow_loop"](1, 50000, 10000)
    assert lib["slow_loop"](4, 0, 2000) == 0
    assert lib["slow_loop"](60, 0, 2000) >= 1


@pytest.mark.cc
def test_a_group_launch_that_loses_runs_as_one_task_then_tries_again(lib) -> None:  # type: ignore[no-untyped-def]
    rt.set_num_threads(2)
    assert lib["slow_group"](1, 20000) == 1  # the worker's task slept: a loss
    assert lib["slow_group"](4, 0) == 0  # the next 4 launches: one task on the caller
    assert lib["slow_group"](40, 0) >= 1  # offered to the workers again


@pytest.mark.cc
def test_thread_count_setting_and_context() -> None:
    rt.set_num_threads(1)
    with rt.num_threads(2):
        assert rt.get_num_threads() == 2
    assert rt.get_num_threads() == 1
    rt.set_num_threads(0)  # the default: EMBER_NUM_THREADS or one per core
    assert rt.get_num_threads() >= 1
    for bad in (-1, 1.5, True, 5000):
        with pytest.raises(EmberValueError, match="set_num_threads"):
            rt.set_num_threads(bad)  # type: ignore[arg-type]


@pytest.mark.cc
def test_more_threads_than_cores_warns() -> None:
    cores = rt.threads.num_cores()
    with pytest.warns(ThreadCountWarning, match=f"{cores + 1} threads on {cores} cores"):
        rt.set_num_threads(cores + 1)
    assert rt.get_num_threads() == cores + 1
    with pytest.warns(ThreadCountWarning, match="EMBER_NUM_THREADS"):
        config_from({"EMBER_NUM_THREADS": str(cores + 1)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ThreadCountWarning)
        rt.set_num_threads(cores)
        config_from({"EMBER_NUM_THREADS": str(cores)})


FORK_MAIN = r"""
#define _GNU_SOURCE
#include <ember/runtime_api.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static int g_slow = 0; /* the workers' tasks sleep, no barrier: a launch that loses */
static int32_t task(int32_t id, EmberParallelGroupEnv* penv, void* cdata) {
  if (g_slow) {
    if (id != 0) usleep(20000);
    return 0;
  }
  EmberBackendParallelBarrier(id, penv);
  __atomic_add_fetch((int*)cdata, 1, __ATOMIC_RELAXED);
  return 0;
}
int main(void) {
  int hits = 0, ignored = 0;
  if (EmberBackendParallelLaunch(task, &hits, 3) != 0) return 1;
  g_slow = 1; /* the parent's pool backs this launch off (as one task) ... */
  if (EmberBackendParallelLaunch(task, &ignored, 3) != 0) return 1;
  g_slow = 0;
  pid_t pid = fork();
  if (pid == 0) { /* ... the child has no workers yet: the pool starts afresh, learnt nothing */
    int child_hits = 0;
    _exit(EmberBackendParallelLaunch(task, &child_hits, 3) == 0 && child_hits == 3 ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  printf("%d %d\n", hits, WEXITSTATUS(status));
  return 0;
}
"""


@pytest.mark.cc
def test_pool_works_in_a_forked_child(tmp_path) -> None:  # type: ignore[no-untyped-def]
    main = tmp_path / "fork.c"
    main.write_text(FORK_MAIN)
    exe = compile_executable(
        [main, libruntime.source_path()],
        tmp_path / "fork",
        include_dirs=[libruntime.include_dir()],
        flags=["-pthread"],
        openmp=False,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["3", "0"]
