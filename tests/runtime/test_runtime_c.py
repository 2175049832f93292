"""src/runtime.c stands alone: compiled into a program with no Python, with or without -fopenmp."""

from __future__ import annotations

import subprocess

import pytest

from ember.runtime import libruntime
from ember.support.toolchain import compile_executable

MAIN = r"""
#include <ember/runtime_api.h>
#include <stdio.h>
#include <string.h>

static int32_t mul(EmberValue* args, int32_t* codes, int32_t n, EmberValue* ret,
                   int32_t* ret_code, void* resource) {
  if (n != 2) { EmberAPISetLastError("mul: expected 2 arguments"); return -1; }
  ret->v_int64 = args[0].v_int64 * args[1].v_int64 * *(int64_t*)resource;
  *ret_code = EMBER_INT;
  return 0;
}

static int g_finalized = 0;
static void fin(void* resource) { g_finalized++; }

typedef struct { int64_t hits[64]; } Hits;
static int32_t task(int32_t id, EmberParallelGroupEnv* penv, void* cdata) {
  ((Hits*)cdata)->hits[id] = penv->num_task;
  EmberBackendParallelBarrier(id, penv);
  return 0;
}

int main(void) {
  static int64_t factor = 10;
  EmberFunctionHandle f, g;
  if (EmberFuncCreateFromCFunc(mul, &factor, fin, &f) != 0) return 1;
  if (EmberFuncRegisterGlobal("demo.mul", f, 0) != 0) return 2;
  if (EmberFuncRegisterGlobal("demo.mul", f, 0) == 0) return 3;  /* duplicate must fail */
  printf("dup: %s\n", strstr(EmberGetLastError(), "already registered") ? "refused" : "?");
  EmberFuncFree(f);
  if (EmberFuncGetGlobal("demo.mul", &g) != 0 || g == NULL) return 4;
  EmberValue args[2], ret;
  int32_t codes[2] = {EMBER_INT, EMBER_INT}, ret_code;
  args[0].v_int64 = 6;
  args[1].v_int64 = 7;
  if (EmberFuncCall(g, args, codes, 2, &ret, &ret_code) != 0) return 5;
  printf("mul: %lld\n", (long long)ret.v_int64);
  if (EmberFuncCall(g, args, codes, 1, &ret, &ret_code) == 0) return 6;
  printf("error: %s\n", EmberGetLastError());
  EmberFuncGetGlobal("demo.missing", &f);
  printf("missing: %s\n", f == NULL ? "null" : "?");
  EmberFuncFree(g);
  EmberFuncRemoveGlobal("demo.mul");
  printf("finalized: %d\n", g_finalized);
  char* ws = (char*)EmberBackendAllocWorkspace(kDLCPU, 0, 100, kDLFloat, 32);
  printf("aligned: %d\n", (int)(((size_t)ws) % 64 == 0));
  EmberBackendFreeWorkspace(kDLCPU, 0, ws);
  Hits h;
  memset(&h, 0, sizeof(h));
  EmberBackendSetNumThreads(2);
  if (EmberBackendParallelLaunch(task, &h, 0) != 0) return 7;
  printf("tasks: %lld %lld\n", (long long)h.hits[0], (long long)h.hits[1]);
  return 0;
}
"""


@pytest.mark.cc
@pytest.mark.parametrize("openmp", [True, False])
def test_runtime_c_in_a_program_without_python(tmp_path, openmp):
    main = tmp_path / "main.c"
    main.write_text(MAIN)
    exe = compile_executable(
        [main, libruntime.source_path()],
        tmp_path / "prog",
        include_dirs=[libruntime.include_dir()],
        flags=["-pthread"],
        openmp=openmp,
    )
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    lines = dict(line.split(": ", 1) for line in out.splitlines())
    assert lines["dup"] == "refused"
    assert lines["mul"] == "420"
    assert lines["error"] == "mul: expected 2 arguments"
    assert lines["missing"] == "null"
    assert lines["finalized"] == "1"
    assert lines["aligned"] == "1"
    assert lines["tasks"] == "2 2"  # ember's own thread pool: OpenMP plays no part
