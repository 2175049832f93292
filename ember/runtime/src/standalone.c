/*
 * ember standalone runtime: the part of include/ember/runtime_api.h that generated kernels
 * call, for a program with no threads and no heap (a microcontroller, or any program that
 * links an AOT model with the c interface). Parallel loops run on the calling thread;
 * AllocWorkspace draws from one static arena of EMBER_STANDALONE_SCRATCH bytes (default 0:
 * AOT builds plan every kernel's scratch in the model's workspace, so nothing asks) and
 * fails with a message when it is exhausted. No malloc, no stdio buffers, no pthreads.
 *
 * Use it instead of runtime.c: `make` in a Model Library Format tar does by default.
 */
#include <stddef.h>
#include <stdint.h>

#include "ember/runtime_api.h"

#ifndef EMBER_STANDALONE_SCRATCH
#define EMBER_STANDALONE_SCRATCH 0
#endif
#define EMBER_ERROR_BYTES 512

static char last_error[EMBER_ERROR_BYTES];
static uint8_t scratch[EMBER_STANDALONE_SCRATCH + 64] __attribute__((aligned(64)));
static size_t scratch_used;

void EmberAPISetLastError(const char* msg) {
  size_t i = 0;
  for (; msg != NULL && msg[i] != '\0' && i + 1 < EMBER_ERROR_BYTES; ++i) last_error[i] = msg[i];
  last_error[i] = '\0';
}

const char* EmberGetLastError(void) { return last_error; }

void* EmberBackendAllocWorkspace(int32_t device_type, int32_t device_id, uint64_t nbytes,
                                 int32_t dtype_code_hint, int32_t dtype_bits_hint) {
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  size_t start = (scratch_used + 63u) & ~(size_t)63u;
  if (nbytes > EMBER_STANDALONE_SCRATCH || start + nbytes > EMBER_STANDALONE_SCRATCH) {
    EmberAPISetLastError(
        "ember standalone runtime: scratch arena exhausted; build with a larger "
        "-DEMBER_STANDALONE_SCRATCH=<bytes>");
    return NULL;
  }
  scratch_used = start + (size_t)nbytes;
  return scratch + start;
}

int32_t EmberBackendFreeWorkspace(int32_t device_type, int32_t device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  /* stack order: freeing the last allocation returns its bytes */
  if (ptr != NULL && (uint8_t*)ptr >= scratch && (uint8_t*)ptr < scratch + sizeof(scratch)) {
    scratch_used = (size_t)((uint8_t*)ptr - scratch);
  }
  return 0;
}

int32_t EmberBackendParallelLaunch(FEmberParallelLambda flambda, void* cdata, int32_t num_task) {
  (void)num_task;
  EmberParallelGroupEnv env = {NULL, 1};
  return flambda(0, &env, cdata);
}

int32_t EmberBackendParallelBarrier(int32_t task_id, EmberParallelGroupEnv* penv) {
  (void)task_id;
  (void)penv;
  return 0;
}

int32_t EmberBackendParallelFor(FEmberParallelRange frange, void* cdata, int64_t extent,
                                int64_t grain, int32_t num_threads) {
  (void)grain;
  (void)num_threads;
  return extent > 0 ? frange(0, extent, cdata) : 0;
}

int32_t EmberBackendSetNumThreads(int32_t num_threads) { return num_threads == 1 ? 0 : -1; }

int32_t EmberBackendGetNumThreads(void) { return 1; }

int32_t EmberBackendNumCores(void) { return 1; }

int32_t EmberBackendPoolStats(int64_t* out, int32_t n) {
  (void)out;
  (void)n;
  return 0;
}

int32_t EmberBackendPoolPolicy(int32_t policy, int32_t reset) {
  (void)policy;
  (void)reset;
  return 0;
}

/* One thread: nothing to govern; a governed call is the plain call. */
int32_t EmberBackendRunBegin(const void* site) {
  (void)site;
  return 0;
}

int32_t EmberBackendRunEnd(const void* site) {
  (void)site;
  return 0;
}

int32_t EmberBackendRunBeginPacked(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                   EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                   void* resource_handle) {
  (void)args, (void)type_codes, (void)num_args, (void)out_ret_value, (void)out_ret_tcode;
  (void)resource_handle;
  return 0;
}

int32_t EmberBackendRunEndPacked(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                 EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                 void* resource_handle) {
  (void)args, (void)type_codes, (void)num_args, (void)out_ret_value, (void)out_ret_tcode;
  (void)resource_handle;
  return 0;
}

int32_t EmberBackendGovernedCall(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                 EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                 void* resource_handle) {
  const EmberGovernedCall* call = (const EmberGovernedCall*)resource_handle;
  if (call == NULL || call->fn == NULL) return -1;
  return call->fn(args, type_codes, num_args, out_ret_value, out_ret_tcode, call->resource);
}

int32_t EmberBackendRunChoice(const void* site, int32_t threads, int64_t* out, int32_t n) {
  (void)site;
  (void)threads;
  for (int32_t k = 0; out != NULL && k < n && k < 4; ++k) out[k] = 0;
  return 0;
}
