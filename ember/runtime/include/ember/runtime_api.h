/*
 * ember runtime C ABI: the one header shared by generated code, the C runtime
 * (src/runtime.c) and the Python ctypes declarations (ember/runtime/c_api.py).
 *
 * Contract:
 *   - Every generated kernel exports an EmberPackedCFunc under its symbol name.
 *   - Every function returning int32_t returns 0 on success and -1 on failure;
 *     on failure the message is available through EmberGetLastError() on the
 *     same thread.
 *   - Tensors are DLPack DLTensor structs (same field layout and names as
 *     dlpack.h v0.8), so any DLPack producer can feed a kernel directly.
 *   - Values passed with type code EMBER_NDARRAY_HANDLE carry a DLTensor* in
 *     v_handle too, so a callee can treat EMBER_DLTENSOR_HANDLE and
 *     EMBER_NDARRAY_HANDLE alike.
 *
 * The header is plain C99 with no dependency beyond <stdint.h> and <stddef.h>.
 */
#ifndef EMBER_RUNTIME_API_H_
#define EMBER_RUNTIME_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define EMBER_DLL __declspec(dllexport)
#else
#define EMBER_DLL __attribute__((visibility("default")))
#endif

#define EMBER_ABI_VERSION 1

/* ---- DLPack (field layout and names of dlpack.h) ---------------------- */
#ifndef DLPACK_DLPACK_H_ /* dlpack.h included first: use its definitions */
#define DLPACK_DLPACK_H_   /* dlpack.h included later: its guard skips a redefinition */
#ifndef DLPACK_EXTERN_C
#define DLPACK_EXTERN_C
#endif
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLExtDev = 12
} DLDeviceType;

typedef struct {
  int32_t device_type; /* a DLDeviceType value */
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6
} DLDataTypeCode;

typedef struct {
  uint8_t code; /* a DLDataTypeCode value */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* NULL means compact row-major */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
#endif /* DLPACK_DLPACK_H_ */

/* ---- packed values ------------------------------------------------------ */
typedef enum {
  EMBER_INT = 0,
  EMBER_UINT = 1,
  EMBER_FLOAT = 2,
  EMBER_OPAQUE_HANDLE = 3,
  EMBER_NULL = 4,
  EMBER_DATA_TYPE = 5,
  EMBER_DEVICE = 6,
  EMBER_DLTENSOR_HANDLE = 7,
  EMBER_OBJECT_HANDLE = 8,
  EMBER_MODULE_HANDLE = 9,
  EMBER_PACKED_FUNC_HANDLE = 10,
  EMBER_STR = 11,
  EMBER_BYTES = 12,
  EMBER_NDARRAY_HANDLE = 13
} EmberTypeCode;

typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} EmberValue;

/* EMBER_BYTES values carry a pointer to this struct in v_handle. */
typedef struct {
  const char* data;
  size_t size;
} EmberByteArray;

/* An opaque reference-counted function handle owned by the C runtime. */
typedef void* EmberFunctionHandle;

/* The packed calling convention every generated kernel exports. */
typedef int32_t (*EmberPackedCFunc)(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                    EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                    void* resource_handle);

/* Called by EmberFuncGetGlobal on a miss of the C table (Python installs one). */
typedef int32_t (*EmberGlobalFallback)(const char* name, EmberFunctionHandle* out);

typedef struct {
  void* sync_handle; /* opaque, owned by the runtime */
  int32_t num_task;
} EmberParallelGroupEnv;

typedef int32_t (*FEmberParallelLambda)(int32_t task_id, EmberParallelGroupEnv* penv, void* cdata);
/* One chunk [begin, end) of a parallel loop; returns 0, or -1 with the last error set. */
typedef int32_t (*FEmberParallelRange)(int64_t begin, int64_t end, void* cdata);

/* One Python-friendly call: everything a packed call needs in one struct, so an FFI
 * passes a single pointer. func == NULL means "call through handle". */
typedef struct {
  EmberPackedCFunc func;
  void* resource_handle;
  EmberFunctionHandle handle;
  EmberValue* args;
  int32_t* type_codes;
  int32_t num_args;
  int32_t ret_type_code;
  EmberValue ret_value;
} EmberCallFrame;

/* ---- errors ------------------------------------------------------------- */
EMBER_DLL void EmberAPISetLastError(const char* msg);
EMBER_DLL const char* EmberGetLastError(void);

/* ---- functions and the global registry --------------------------------- */
EMBER_DLL int32_t EmberFuncCreateFromCFunc(EmberPackedCFunc func, void* resource_handle,
                                           void (*fin)(void* resource_handle),
                                           EmberFunctionHandle* out);
/* Adds a reference; every reference is released with EmberFuncFree. */
EMBER_DLL int32_t EmberFuncRetain(EmberFunctionHandle func);
EMBER_DLL int32_t EmberFuncFree(EmberFunctionHandle func);
EMBER_DLL int32_t EmberFuncCall(EmberFunctionHandle func, EmberValue* args, int32_t* type_codes,
                                int32_t num_args, EmberValue* ret_value, int32_t* ret_type_code);
/* The C function and resource behind a handle (borrowed; valid while the handle lives). */
EMBER_DLL int32_t EmberFuncGetCFunc(EmberFunctionHandle func, EmberPackedCFunc* out_func,
                                    void** out_resource_handle);
/* Calls the frame's function; returns -1 on failure, else the return type code
 * (EMBER_NULL when the callee returned nothing); the value is in frame->ret_value. */
EMBER_DLL int32_t EmberFuncCallFrame(EmberCallFrame* frame);
/* The registry takes its own reference to func. */
EMBER_DLL int32_t EmberFuncRegisterGlobal(const char* name, EmberFunctionHandle func,
                                          int32_t override);
/* *out is a new reference (release with EmberFuncFree), or NULL when name is unknown. */
EMBER_DLL int32_t EmberFuncGetGlobal(const char* name, EmberFunctionHandle* out);
EMBER_DLL int32_t EmberFuncRemoveGlobal(const char* name);
/* Writes the C table's names, each followed by '\0', into buf; *out_size is the size needed. */
EMBER_DLL int32_t EmberFuncListGlobalNames(char* buf, size_t buf_size, size_t* out_size);
EMBER_DLL int32_t EmberFuncSetGlobalFallback(EmberGlobalFallback fallback);

/* ---- backend API called by generated code ------------------------------ */
/* The function `name` as seen from a library: through mod_ctx (the library's
 * __ember_module_ctx: a lookup function its loader installed, or NULL), then the global
 * registry. On success *out is a new reference. Used by call_packed in generated code. */
EMBER_DLL int32_t EmberBackendGetFuncFromEnv(void* mod_ctx, const char* name,
                                             EmberFunctionHandle* out);
/* 64-byte aligned; NULL (with last error set) on failure. */
EMBER_DLL void* EmberBackendAllocWorkspace(int32_t device_type, int32_t device_id, uint64_t nbytes,
                                           int32_t dtype_code_hint, int32_t dtype_bits_hint);
EMBER_DLL int32_t EmberBackendFreeWorkspace(int32_t device_type, int32_t device_id, void* ptr);

/* ---- strings (docs/strings.md) ------------------------------------------ */
/* one element of a `string` tensor: `size` bytes of UTF-8 at `data`, NUL-terminated */
typedef struct {
  const char* data;
  int64_t size;
} EmberString;
typedef struct EmberStringArena EmberStringArena;
EMBER_DLL EmberStringArena* EmberStringArenaCreate(void);
EMBER_DLL void EmberStringArenaReset(EmberStringArena* arena);
EMBER_DLL void EmberStringArenaFree(EmberStringArena* arena);
/* make `arena` the current one of this thread; returns the previous one */
EMBER_DLL EmberStringArena* EmberStringArenaSwap(EmberStringArena* arena);
EMBER_DLL int64_t EmberStringArenaBytes(EmberStringArena* arena);
/* `nbytes` of the current arena (NULL and an error when none is current) */
EMBER_DLL char* EmberBackendStringAlloc(int64_t nbytes);
/* the element functions of the string ops (ember_str_*, src/string_kernels.h) are declared by
   the generated code that calls them, each with the pointer types of its call */
/* Runs tasks 0..num_task-1 at once, each on its own thread of ember's pool (the caller
 * runs one), so tasks may meet at EmberBackendParallelBarrier. num_task == 0 means the
 * thread count (EmberBackendGetNumThreads). Inside a running launch it runs task 0 alone
 * with num_task 1. The first failing task's error becomes the caller's last error. */
EMBER_DLL int32_t EmberBackendParallelLaunch(FEmberParallelLambda flambda, void* cdata,
                                             int32_t num_task);
EMBER_DLL int32_t EmberBackendParallelBarrier(int32_t task_id, EmberParallelGroupEnv* penv);
/* A parallel loop over [0, extent): chunks of at least `grain` iterations are handed out
 * by an atomic counter to the caller and the pool's workers (at most num_threads threads,
 * 0: the thread count); a worker that is late or descheduled finds no work left instead
 * of holding the others up. Runs frange(0, extent) inline when nested in a launch, when
 * one thread is asked for, when extent < 2 * grain or while another thread's launch runs.
 * After a failed chunk no new chunk starts; the first error is the caller's last error. */
EMBER_DLL int32_t EmberBackendParallelFor(FEmberParallelRange frange, void* cdata, int64_t extent,
                                          int64_t grain, int32_t num_threads);
/* 0 restores the default: EMBER_NUM_THREADS, else one thread per core. */
EMBER_DLL int32_t EmberBackendSetNumThreads(int32_t num_threads);
EMBER_DLL int32_t EmberBackendGetNumThreads(void);
/* The cores this process may run on (its CPU affinity). */
EMBER_DLL int32_t EmberBackendNumCores(void);
/* The thread pool's cumulative counters (launches, chunks, join waits in ns, ...: the order
 * of ember.runtime.threads.POOL_STATS) into out[0..n); returns how many there are. */
EMBER_DLL int32_t EmberBackendPoolStats(int64_t* out, int32_t n);
/* For measurements and tests: 0 (the default) the run governor, the adaptive pool and the
 * per-loop backoff, 1 the per-loop backoff only, 2 none (every launch of 2+ grains is
 * split), 3 the adaptive pool and the per-loop backoff without the run governor; a negative
 * policy keeps the current one. What they learnt stays unless `reset`. Returns the policy
 * before. */
EMBER_DLL int32_t EmberBackendPoolPolicy(int32_t policy, int32_t reset);

/* ---- governed runs ------------------------------------------------------ */
/* One run of a model between EmberBackendRunBegin(site) and EmberBackendRunEnd(site), where
 * `site` is any address that stays the same for that model (its executor, say): with 2+
 * threads and the default policy, the run governor times the model's runs with the pool and
 * on the calling thread alone, alternately, keeps the faster for the runs that follow, and
 * probes the other choice again now and then (src/pool_govern.h). Runs may nest (the outer
 * one decides); every Begin needs its End, also when the run failed. */
EMBER_DLL int32_t EmberBackendRunBegin(const void* site);
EMBER_DLL int32_t EmberBackendRunEnd(const void* site);
/* The two as packed functions whose resource_handle is the site (for callers whose packed
 * calls are cheaper than plain ones: the Python graph executor's). */
EMBER_DLL int32_t EmberBackendRunBeginPacked(EmberValue* args, int32_t* type_codes,
                                             int32_t num_args, EmberValue* out_ret_value,
                                             int32_t* out_ret_tcode, void* resource_handle);
EMBER_DLL int32_t EmberBackendRunEndPacked(EmberValue* args, int32_t* type_codes,
                                           int32_t num_args, EmberValue* out_ret_value,
                                           int32_t* out_ret_tcode, void* resource_handle);
/* A run function and its resource, called governed by EmberBackendGovernedCall. */
typedef struct {
  EmberPackedCFunc fn;
  void* resource;
} EmberGovernedCall;
/* A packed function whose resource_handle is an EmberGovernedCall: its function called
 * with the same arguments (and its own resource) between EmberBackendRunBegin and
 * EmberBackendRunEnd, the EmberGovernedCall's address the site. */
EMBER_DLL int32_t EmberBackendGovernedCall(EmberValue* args, int32_t* type_codes,
                                           int32_t num_args, EmberValue* out_ret_value,
                                           int32_t* out_ret_tcode, void* resource_handle);
/* What the governor chose for `site` at `threads` threads into out[0..n): [0] the pool (1)
 * or the caller alone (0), [1] runs seen, [2] times a probe changed the choice, [3] still
 * trying (1: the runs alternate). Returns 1 when it has seen the site, else 0. */
EMBER_DLL int32_t EmberBackendRunChoice(const void* site, int32_t threads, int64_t* out,
                                        int32_t n);

/* ---- timing ------------------------------------------------------------- */
/* TVM's time_evaluator loop: one discarded warm-up call, then `repeat` rounds of `number`
 * calls each, `number` grown until a round lasts at least min_repeat_ms; out_results[i]
 * receives the mean seconds per call of round i (repeat entries). */
EMBER_DLL int32_t EmberTimeEvaluate(EmberFunctionHandle func, EmberValue* args,
                                    int32_t* type_codes, int32_t num_args, int32_t number,
                                    int32_t repeat, int32_t min_repeat_ms,
                                    int32_t cooldown_interval_ms, double* out_results);

EMBER_DLL int32_t EmberRuntimeABIVersion(void);

#ifdef __cplusplus
}
#endif
#endif /* EMBER_RUNTIME_API_H_ */
