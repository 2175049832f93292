"""The backend API generated code calls: workspace, parallel launch, C-side globals."""

from __future__ import annotations

import pytest
from runtime_test_util import build_library

import ember.runtime as rt
from ember.errors import FFIError
from ember.runtime import c_api

C_SOURCE = r"""
#include <stdint.h>
EMBER_DLL int32_t workspace_check(EMBER_ARGS) {
  int64_t bad = 0;
  for (int i = 1; i < 50; ++i) {
    char* p = (char*)EmberBackendAllocWorkspace(kDLCPU, 0, (uint64_t)(i * 13), kDLFloat, 32);
    if (p == NULL) return -1;
    if (((uintptr_t)p) % 64 != 0) bad++;
    memset(p, 1, (size_t)(i * 13));
    if (EmberBackendFreeWorkspace(kDLCPU, 0, p) != 0) return -1;
  }
  ret->v_int64 = bad; *ret_code = EMBER_INT; return 0;
}
EMBER_DLL int32_t workspace_bad_device(EMBER_ARGS) {
  return EmberBackendAllocWorkspace(kDLCUDA, 0, 16, kDLFloat, 32) == NULL ? -1 : 0;
}

typedef struct { int64_t* slots; int64_t n; int64_t sum; } Work;
static int32_t fill(int32_t task_id, EmberParallelGroupEnv* penv, void* cdata) {
  Work* w = (Work*)cdata;
  for (int64_t i = task_id; i < w->n; i += penv->num_task) w->slots[i] = i;
  EmberBackendParallelBarrier(task_id, penv);
  if (task_id == 0) { /* after the barrier every slot is written */
    int64_t s = 0;
    for (int64_t i = 0; i < w->n; ++i) s += w->slots[i];
    w->sum = s;
  }
  return 0;
}
EMBER_DLL int32_t parallel_sum(EMBER_ARGS) {
  int64_t slots[1000];
  Work w = {slots, 1000, -1};
  if (EmberBackendParallelLaunch(fill, &w, (int32_t)args[0].v_int64) != 0) return -1;
  ret->v_int64 = w.sum; *ret_code = EMBER_INT; return 0;
}
static int32_t failing_task(int32_t task_id, EmberParallelGroupEnv* penv, void* cdata) {
  EmberAPISetLastError("task failed on purpose");
  return -1;
}
EMBER_DLL int32_t parallel_fail(EMBER_ARGS) {
  return EmberBackendParallelLaunch(failing_task, NULL, 2);
}

static int32_t c_square(EMBER_ARGS) {
  ret->v_int64 = args[0].v_int64 * args[0].v_int64; *ret_code = EMBER_INT; return 0;
}
EMBER_DLL int32_t register_square(EMBER_ARGS) {
  EmberFunctionHandle f;
  if (EmberFuncCreateFromCFunc(c_square, NULL, NULL, &f) != 0) return -1;
  int32_t rc = EmberFuncRegisterGlobal(args[0].v_str, f, 1);
  EmberFuncFree(f);  /* the registry holds its own reference */
  return rc;
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build_library(tmp_path_factory.mktemp("backend"), C_SOURCE, "backend")


@pytest.mark.cc
def test_workspace_is_aligned_and_reusable(lib):
    assert lib["workspace_check"]() == 0
    with pytest.raises(FFIError, match="not supported"):
        lib["workspace_bad_device"]()


@pytest.mark.cc
@pytest.mark.parametrize("num_task", [0, 1, 2, 3])
def test_parallel_launch_with_barrier(lib, num_task):
    assert lib["parallel_sum"](num_task) == sum(range(1000))


@pytest.mark.cc
def test_parallel_task_error_reaches_caller(lib):
    with pytest.raises(FFIError, match="task failed on purpose"):
        lib["parallel_fail"]()


@pytest.mark.cc
def test_num_threads_setting():
    lib = c_api.lib()
    old = lib.EmberBackendGetNumThreads()
    assert old >= 1
    c_api.check_call(lib.EmberBackendSetNumThreads(3))
    assert lib.EmberBackendGetNumThreads() == 3
    c_api.check_call(lib.EmberBackendSetNumThreads(0))


@pytest.mark.cc
def test_c_registered_global_visible_to_python(lib):
    lib["register_square"]("test_backend.square")
    assert "test_backend.square" in rt.list_global_funcs()
    square = rt.get_global_func("test_backend.square")
    assert square(9) == 81
    assert square.c_entry() is not None  # called directly, timed by the C loop
    timer = rt.TimeEvaluator(square, rt.cpu(0), number=3)
    assert timer.uses_c_loop and len(timer(5).results) == 1


PARALLEL_CALLBACK_SOURCE = r"""
typedef struct { EmberFunctionHandle f; int64_t results[64]; } Ctx;
static int32_t call_python(int32_t task_id, EmberParallelGroupEnv* penv, void* cdata) {
  Ctx* ctx = (Ctx*)cdata;
  EmberValue a[1];
  int32_t c[1] = {EMBER_INT};
  a[0].v_int64 = task_id;
  EmberValue r;
  int32_t rc;
  if (EmberFuncCall(ctx->f, a, c, 1, &r, &rc) != 0) return -1;
  ctx->results[task_id] = r.v_int64;
  return 0;
}
/* run the Python global args[0] once per worker thread; return the sum of its results */
EMBER_DLL int32_t parallel_python(EMBER_ARGS) {
  Ctx ctx;
  if (EmberFuncGetGlobal(args[0].v_str, &ctx.f) != 0 || ctx.f == NULL) return -1;
  int32_t status = EmberBackendParallelLaunch(call_python, &ctx, 4);
  EmberFuncFree(ctx.f);
  if (status != 0) return -1;
  int64_t s = 0;
  for (int i = 0; i < 4; ++i) s += ctx.results[i];
  ret->v_int64 = s; *ret_code = EMBER_INT; return 0;
}
"""


@pytest.mark.cc
def test_worker_threads_call_python(tmp_path):
    lib = build_library(tmp_path, PARALLEL_CALLBACK_SOURCE, "parallel_py")
    threads = set()

    def square(k):
        import threading

        threads.add(threading.get_ident())
        return k * k

    rt.register_func("test_backend.square_py", square, override=True)
    assert lib["parallel_python"]("test_backend.square_py") == 0 + 1 + 4 + 9
    assert len(threads) == 4  # four OpenMP workers each called into Python

    def fails(k):
        raise RuntimeError(f"worker {k} failed")

    rt.register_func("test_backend.fails_py", fails, override=True)
    with pytest.raises(RuntimeError, match=r"worker \d failed"):
        lib["parallel_python"]("test_backend.fails_py")
