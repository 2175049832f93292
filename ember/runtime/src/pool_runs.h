/*
 * Governed runs: EmberBackendRunBegin and EmberBackendRunEnd around one run of a model, and
 * EmberBackendGovernedCall, a packed function that wraps a run function in the two. Between
 * them the governor (pool_govern.h) decides whether the run's parallel loops go to the pool
 * or stay on the calling thread, from the times of that model's earlier runs. A private part
 * of thread_pool.h, which includes it once (at its end); not a public header.
 */
#ifndef EMBER_POOL_RUNS_H_
#define EMBER_POOL_RUNS_H_

#include "pool_govern.h"

/* Models tracked at once (a direct-mapped table keyed by run site and thread count: a model
 * whose slot another took starts over with a trial; a new executor at a freed one's address
 * starts from its choice, which its first probe, 64 runs on, re-checks). */
#define GOV_SITES 64

typedef struct {
  const void* site;
  int32_t threads;
  PoolGov gov;
} GovSite;

static GovSite g_gov_sites[GOV_SITES];
static pthread_mutex_t g_gov_lock = PTHREAD_MUTEX_INITIALIZER;

/* The calling thread's run: its nesting depth, and for the outermost governed one its
 * thread count (0: not governed), choice and start. */
static _Thread_local int32_t g_run_depth = 0;
static _Thread_local int32_t g_run_threads = 0;
static _Thread_local int32_t g_run_parallel = 1;
static _Thread_local uint64_t g_run_start = 0;

/* Forget every model's runs (EmberBackendPoolPolicy's reset). */
static void gov_forget(void) {
  pthread_mutex_lock(&g_gov_lock);
  memset(g_gov_sites, 0, sizeof(g_gov_sites));
  pthread_mutex_unlock(&g_gov_lock);
}

/* The slot of (site, threads), taken over (a fresh state) when `take`; under g_gov_lock. */
static GovSite* gov_site(const void* site, int32_t threads, int take) {
  uintptr_t h = (uintptr_t)site ^ ((uintptr_t)threads << 3);
  h ^= h >> 17;
  h *= (uintptr_t)0x9E3779B97F4A7C15u;
  GovSite* s = &g_gov_sites[(h >> 24) % GOV_SITES];
  if (s->site != site || s->threads != threads) {
    if (!take) return NULL;
    s->site = site;
    s->threads = threads;
    gov_init(&s->gov);
  }
  return s;
}

int32_t EmberBackendRunBegin(const void* site) {
  if (g_run_depth++ > 0) return 0; /* a run inside a run: the outer one decides */
  g_run_threads = 0;
  int32_t threads = EmberBackendGetNumThreads();
  /* nothing to choose: one thread, more than the cores (kept as asked), inside a parallel
   * task, or a policy without the governor */
  if (site == NULL || threads <= 1 || threads > pool_cores() || g_in_pool || !policy_governs()) {
    return 0;
  }
  pthread_mutex_lock(&g_gov_lock);
  int32_t parallel = gov_choose(&gov_site(site, threads, 1)->gov);
  pthread_mutex_unlock(&g_gov_lock);
  g_run_threads = threads;
  g_run_parallel = parallel;
  g_run_alone = !parallel;
  stat_add(POOL_STAT_RUNS, 1);
  stat_add(POOL_STAT_RUNS_ALONE, !parallel);
  g_run_start = pool_ticks();
  return 0;
}

int32_t EmberBackendRunEnd(const void* site) {
  if (g_run_depth <= 0) return 0; /* no run began: nothing to end */
  if (--g_run_depth > 0) return 0;
  g_run_alone = 0;
  if (g_run_threads == 0) return 0;
  int64_t ns = (int64_t)(pool_ticks() - g_run_start);
  pthread_mutex_lock(&g_gov_lock);
  GovSite* s = gov_site(site, g_run_threads, 0);
  if (s != NULL) gov_record(&s->gov, g_run_parallel, ns);
  pthread_mutex_unlock(&g_gov_lock);
  g_run_threads = 0;
  return 0;
}

int32_t EmberBackendRunBeginPacked(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                   EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                   void* resource_handle) {
  (void)args, (void)type_codes, (void)num_args, (void)out_ret_value, (void)out_ret_tcode;
  return EmberBackendRunBegin(resource_handle);
}

int32_t EmberBackendRunEndPacked(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                 EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                 void* resource_handle) {
  (void)args, (void)type_codes, (void)num_args, (void)out_ret_value, (void)out_ret_tcode;
  return EmberBackendRunEnd(resource_handle);
}

int32_t EmberBackendGovernedCall(EmberValue* args, int32_t* type_codes, int32_t num_args,
                                 EmberValue* out_ret_value, int32_t* out_ret_tcode,
                                 void* resource_handle) {
  const EmberGovernedCall* call = (const EmberGovernedCall*)resource_handle;
  if (call == NULL || call->fn == NULL) {
    return set_error("EmberBackendGovernedCall: %s", "no EmberGovernedCall with a function");
  }
  EmberBackendRunBegin(call);
  int32_t rc = call->fn(args, type_codes, num_args, out_ret_value, out_ret_tcode, call->resource);
  EmberBackendRunEnd(call);
  return rc;
}

int32_t EmberBackendRunChoice(const void* site, int32_t threads, int64_t* out, int32_t n) {
  int64_t f[4] = {0, 0, 0, 0};
  pthread_mutex_lock(&g_gov_lock);
  GovSite* s = gov_site(site, threads, 0);
  if (s != NULL) {
    f[0] = s->gov.parallel, f[1] = s->gov.runs, f[2] = s->gov.changes;
    f[3] = s->gov.blocks_left != 0 || s->gov.runs < GOV_WARM;
  }
  pthread_mutex_unlock(&g_gov_lock);
  for (int32_t k = 0; out != NULL && k < n && k < 4; ++k) out[k] = f[k];
  return s != NULL;
}

#endif /* EMBER_POOL_RUNS_H_ */
