/*
 * ember C runtime: the implementation of include/ember/runtime_api.h.
 *
 * Contract: plain C11 + pthreads + C11 atomics, no OpenMP, no Python.
 * The same file is compiled into the Python process (loaded RTLD_GLOBAL so generated
 * libraries resolve the backend API at dlopen time) and into standalone programs.
 * Python plugs in only through EmberFuncSetGlobalFallback.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "ember/runtime_api.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- last error (thread local) ------------------------------------------ */
static _Thread_local char* g_err_buf = NULL;
static _Thread_local size_t g_err_cap = 0;

void EmberAPISetLastError(const char* msg) {
  if (msg == NULL) msg = "";
  size_t n = strlen(msg) + 1;
  if (n > g_err_cap) {
    size_t cap = n < 256 ? 256 : n;
    char* buf = (char*)realloc(g_err_buf, cap);
    if (buf == NULL) return; /* keep the old message rather than crash */
    g_err_buf = buf;
    g_err_cap = cap;
  }
  memcpy(g_err_buf, msg, n);
}

const char* EmberGetLastError(void) { return g_err_buf != NULL ? g_err_buf : ""; }

static int32_t set_error(const char* fmt, const char* arg) {
  char buf[512];
  snprintf(buf, sizeof(buf), fmt, arg);
  EmberAPISetLastError(buf);
  return -1;
}

/* ---- function handles ---------------------------------------------------- */
typedef struct {
  EmberPackedCFunc func;
  void* resource_handle;
  void (*fin)(void*);
  int32_t refcount;
} EmberFuncObj;

int32_t EmberFuncCreateFromCFunc(EmberPackedCFunc func, void* resource_handle,
                                 void (*fin)(void*), EmberFunctionHandle* out) {
  if (func == NULL || out == NULL) {
    return set_error("EmberFuncCreateFromCFunc: %s must not be NULL", func ? "out" : "func");
  }
  EmberFuncObj* obj = (EmberFuncObj*)malloc(sizeof(EmberFuncObj));
  if (obj == NULL) return set_error("EmberFuncCreateFromCFunc: %s", "out of memory");
  obj->func = func;
  obj->resource_handle = resource_handle;
  obj->fin = fin;
  obj->refcount = 1;
  *out = obj;
  return 0;
}

int32_t EmberFuncRetain(EmberFunctionHandle func) {
  if (func == NULL) return set_error("EmberFuncRetain: %s is NULL", "func");
  __atomic_add_fetch(&((EmberFuncObj*)func)->refcount, 1, __ATOMIC_RELAXED);
  return 0;
}

int32_t EmberFuncFree(EmberFunctionHandle func) {
  if (func == NULL) return 0;
  EmberFuncObj* obj = (EmberFuncObj*)func;
  if (__atomic_sub_fetch(&obj->refcount, 1, __ATOMIC_ACQ_REL) == 0) {
    if (obj->fin != NULL) obj->fin(obj->resource_handle);
    free(obj);
  }
  return 0;
}

int32_t EmberFuncCall(EmberFunctionHandle func, EmberValue* args, int32_t* type_codes,
                      int32_t num_args, EmberValue* ret_value, int32_t* ret_type_code) {
  if (func == NULL) return set_error("EmberFuncCall: %s is NULL", "the function handle");
  EmberFuncObj* obj = (EmberFuncObj*)func;
  *ret_type_code = EMBER_NULL;
  ret_value->v_handle = NULL;
  return obj->func(args, type_codes, num_args, ret_value, ret_type_code, obj->resource_handle);
}

int32_t EmberFuncGetCFunc(EmberFunctionHandle func, EmberPackedCFunc* out_func,
                          void** out_resource_handle) {
  if (func == NULL || out_func == NULL || out_resource_handle == NULL) {
    return set_error("EmberFuncGetCFunc: %s is NULL", "an argument");
  }
  *out_func = ((EmberFuncObj*)func)->func;
  *out_resource_handle = ((EmberFuncObj*)func)->resource_handle;
  return 0;
}

int32_t EmberFuncCallFrame(EmberCallFrame* frame) {
  EmberPackedCFunc func = frame->func;
  void* resource = frame->resource_handle;
  if (func == NULL) {
    EmberFuncObj* obj = (EmberFuncObj*)frame->handle;
    if (obj == NULL) return set_error("EmberFuncCallFrame: %s", "the frame has no function");
    func = obj->func;
    resource = obj->resource_handle;
  }
  frame->ret_type_code = EMBER_NULL;
  frame->ret_value.v_handle = NULL;
  if (func(frame->args, frame->type_codes, frame->num_args, &frame->ret_value,
           &frame->ret_type_code, resource) != 0) {
    return -1;
  }
  return frame->ret_type_code;
}

/* ---- global registry ----------------------------------------------------- */
typedef struct {
  char* name;
  EmberFunctionHandle func;
} GlobalEntry;

static pthread_mutex_t g_reg_lock = PTHREAD_MUTEX_INITIALIZER;
static GlobalEntry* g_entries = NULL;
static size_t g_num_entries = 0;
static size_t g_cap_entries = 0;
static EmberGlobalFallback g_fallback = NULL;

static long find_entry(const char* name) {
  for (size_t i = 0; i < g_num_entries; ++i) {
    if (strcmp(g_entries[i].name, name) == 0) return (long)i;
  }
  return -1;
}

int32_t EmberFuncRegisterGlobal(const char* name, EmberFunctionHandle func, int32_t override) {
  if (name == NULL || name[0] == '\0' || func == NULL) {
    return set_error("EmberFuncRegisterGlobal: %s", "name and func must be non-empty");
  }
  pthread_mutex_lock(&g_reg_lock);
  long idx = find_entry(name);
  if (idx >= 0 && !override) {
    pthread_mutex_unlock(&g_reg_lock);
    return set_error(
        "global function '%s' is already registered; pass override=1 to replace it", name);
  }
  EmberFuncRetain(func);
  if (idx >= 0) {
    EmberFunctionHandle old = g_entries[idx].func;
    g_entries[idx].func = func;
    pthread_mutex_unlock(&g_reg_lock);
    EmberFuncFree(old);
    return 0;
  }
  if (g_num_entries == g_cap_entries) {
    size_t cap = g_cap_entries ? 2 * g_cap_entries : 16;
    GlobalEntry* grown = (GlobalEntry*)realloc(g_entries, cap * sizeof(GlobalEntry));
    if (grown == NULL) {
      pthread_mutex_unlock(&g_reg_lock);
      EmberFuncFree(func);
      return set_error("EmberFuncRegisterGlobal: %s", "out of memory");
    }
    g_entries = grown;
    g_cap_entries = cap;
  }
  char* copy = strdup(name);
  if (copy == NULL) {
    pthread_mutex_unlock(&g_reg_lock);
    EmberFuncFree(func);
    return set_error("EmberFuncRegisterGlobal: %s", "out of memory");
  }
  g_entries[g_num_entries].name = copy;
  g_entries[g_num_entries].func = func;
  g_num_entries++;
  pthread_mutex_unlock(&g_reg_lock);
  return 0;
}

int32_t EmberFuncGetGlobal(const char* name, EmberFunctionHandle* out) {
  if (name == NULL || out == NULL) return set_error("EmberFuncGetGlobal: %s is NULL", "an argument");
  *out = NULL;
  pthread_mutex_lock(&g_reg_lock);
  long idx = find_entry(name);
  if (idx >= 0) {
    *out = g_entries[idx].func;
    EmberFuncRetain(*out);
  }
  EmberGlobalFallback fallback = g_fallback;
  pthread_mutex_unlock(&g_reg_lock);
  if (*out == NULL && fallback != NULL) return fallback(name, out);
  return 0;
}

int32_t EmberFuncRemoveGlobal(const char* name) {
  if (name == NULL) return set_error("EmberFuncRemoveGlobal: %s is NULL", "name");
  pthread_mutex_lock(&g_reg_lock);
  long idx = find_entry(name);
  if (idx < 0) {
    pthread_mutex_unlock(&g_reg_lock);
    return set_error("EmberFuncRemoveGlobal: unknown global function '%s'", name);
  }
  GlobalEntry entry = g_entries[idx];
  g_entries[idx] = g_entries[g_num_entries - 1];
  g_num_entries--;
  pthread_mutex_unlock(&g_reg_lock);
  free(entry.name);
  EmberFuncFree(entry.func);
  return 0;
}

int32_t EmberFuncListGlobalNames(char* buf, size_t buf_size, size_t* out_size) {
  if (out_size == NULL) return set_error("EmberFuncListGlobalNames: %s is NULL", "out_size");
  pthread_mutex_lock(&g_reg_lock);
  size_t need = 0;
  for (size_t i = 0; i < g_num_entries; ++i) {
    size_t n = strlen(g_entries[i].name) + 1;
    if (buf != NULL && need + n <= buf_size) memcpy(buf + need, g_entries[i].name, n);
    need += n;
  }
  pthread_mutex_unlock(&g_reg_lock);
  *out_size = need;
  return 0;
}

int32_t EmberFuncSetGlobalFallback(EmberGlobalFallback fallback) {
  pthread_mutex_lock(&g_reg_lock);
  g_fallback = fallback;
  pthread_mutex_unlock(&g_reg_lock);
  return 0;
}

/* ---- functions of the calling module (call_packed) ------------------------ */
int32_t EmberBackendGetFuncFromEnv(void* mod_ctx, const char* name, EmberFunctionHandle* out) {
  if (name == NULL || out == NULL) {
    return set_error("EmberBackendGetFuncFromEnv: %s is NULL", "an argument");
  }
  *out = NULL;
  if (mod_ctx != NULL) { /* the loader's lookup: the module, then its imports */
    EmberValue arg;
    int32_t code = EMBER_STR;
    EmberValue ret;
    int32_t ret_code = EMBER_NULL;
    arg.v_str = name;
    if (EmberFuncCall((EmberFunctionHandle)mod_ctx, &arg, &code, 1, &ret, &ret_code) != 0) {
      return -1;
    }
    if (ret_code == EMBER_PACKED_FUNC_HANDLE && ret.v_handle != NULL) {
      *out = ret.v_handle; /* a new reference, owned by the caller */
      return 0;
    }
  }
  if (EmberFuncGetGlobal(name, out) != 0) return -1;
  if (*out == NULL) {
    return set_error(
        "function '%s' called through call_packed is defined neither by the calling module, "
        "its imports nor the global registry; load the library through ember (which links "
        "the modules it needs) or register the function",
        name);
  }
  return 0;
}

/* ---- workspace ----------------------------------------------------------- */
void* EmberBackendAllocWorkspace(int32_t device_type, int32_t device_id, uint64_t nbytes,
                                 int32_t dtype_code_hint, int32_t dtype_bits_hint) {
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (device_type != kDLCPU) {
    set_error("EmberBackendAllocWorkspace: device type %s is not supported (only cpu=1)",
              device_type == kDLCUDA ? "2 (cuda)" : "other than cpu");
    return NULL;
  }
  void* ptr = NULL;
  size_t size = nbytes == 0 ? 64 : (size_t)((nbytes + 63) & ~(uint64_t)63);
  if (posix_memalign(&ptr, 64, size) != 0) {
    set_error("EmberBackendAllocWorkspace: out of memory (%s)", "posix_memalign failed");
    return NULL;
  }
  return ptr;
}

int32_t EmberBackendFreeWorkspace(int32_t device_type, int32_t device_id, void* ptr) {
  (void)device_id;
  if (device_type != kDLCPU) {
    return set_error("EmberBackendFreeWorkspace: device type %s is not supported", "non-cpu");
  }
  free(ptr);
  return 0;
}

#include "thread_pool.h" /* the thread pool and parallel launches */
#include "string_arena.h"   /* the per-executor arena of kernel-made strings */
#include "string_kernels.h" /* the element functions of the string ops */

/* numpy's seeded generators, exported for code of the llvm and llvmjit targets */
#define EMBER_RNG_API EMBER_DLL
#include "random_kernels.h"

/* the c back end's float32 tile kernels (AVX2 + FMA on x86-64), exported for code of the
   llvm and llvmjit targets; generated from ember/codegen/c/f32_*.py (ember.codegen.llvm.tiles) */
#define EMBER_F32_API EMBER_DLL
#include "f32_tiles.h"

/* ---- timing -------------------------------------------------------------- */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int32_t EmberTimeEvaluate(EmberFunctionHandle func, EmberValue* args, int32_t* type_codes,
                          int32_t num_args, int32_t number, int32_t repeat, int32_t min_repeat_ms,
                          int32_t cooldown_interval_ms, double* out_results) {
  if (func == NULL || out_results == NULL) {
    return set_error("EmberTimeEvaluate: %s is NULL", func ? "out_results" : "func");
  }
  if (number <= 0 || repeat <= 0 || min_repeat_ms < 0) {
    return set_error("EmberTimeEvaluate: %s", "number and repeat must be > 0, min_repeat_ms >= 0");
  }
  EmberFuncObj* obj = (EmberFuncObj*)func;
  EmberValue ret;
  int32_t ret_code;
  /* the warm-up call, not timed */
  ret.v_handle = NULL;
  ret_code = EMBER_NULL;
  if (obj->func(args, type_codes, num_args, &ret, &ret_code, obj->resource_handle) != 0) return -1;
  for (int32_t r = 0; r < repeat; ++r) {
    double duration_ms = 0.0;
    int measured = 0;
    do {
      if (measured) {
        /* grow toward min_repeat_ms (doubling when the clock saw nothing); the count is
         * clamped so that it never overflows int32 */
        double grown = duration_ms > 0.0 ? (double)min_repeat_ms / (duration_ms / number) + 1
                                         : 2.0 * number;
        double golden = number * 1.618;
        double next = grown > golden ? grown : golden;
        number = next >= (double)INT32_MAX ? INT32_MAX : (int32_t)next;
      }
      measured = 1;
      double begin = now_ms();
      for (int32_t i = 0; i < number; ++i) {
        if (obj->func(args, type_codes, num_args, &ret, &ret_code, obj->resource_handle) != 0) {
          return -1;
        }
      }
      duration_ms = now_ms() - begin;
    } while (duration_ms < (double)min_repeat_ms);
    out_results[r] = duration_ms * 1e-3 / number;
    if (cooldown_interval_ms > 0 && r + 1 < repeat) {
      struct timespec ts;
      ts.tv_sec = cooldown_interval_ms / 1000;
      ts.tv_nsec = (long)(cooldown_interval_ms % 1000) * 1000000L;
      nanosleep(&ts, NULL);
    }
  }
  return 0;
}

int32_t EmberRuntimeABIVersion(void) { return EMBER_ABI_VERSION; }
