/*
 * What ember's thread pool learns from its launches: the per-loop backoff, the process-wide
 * adaptive state (pool_adapt.h) and the statistics of EmberBackendPoolStats. A private part
 * of thread_pool.h, which includes it once (after pool_run); not a public header.
 */
#ifndef EMBER_POOL_LEARN_H_
#define EMBER_POOL_LEARN_H_

/* A range loop whose parallel run did not beat its estimated serial time (the caller's own
 * rate times the extent) runs inline for its next launches: POOL_BACKOFF_MIN of them, twice
 * as many after each further loss up to POOL_BACKOFF_MAX, halved again after each gain. On
 * a busy machine a worker shares a core with another process: it runs its chunk at half
 * speed or is descheduled holding it, and the caller waits; its spinning also takes the
 * caller's core. Kept per loop (the lambda's address) in a small direct-mapped table; a
 * group launch (EmberBackendParallelLaunch) that backs off runs as one task. */
#define POOL_BACKOFF_MIN 4
#define POOL_BACKOFF_MAX 1024
#define POOL_SITES 256
/* A join that waited longer than this for a worker counts as a late worker in the
 * statistics (EmberBackendPoolStats): a chunk of a well-sized loop takes 2-50 us. */
#define POOL_LATE_NS 200000
/* An awake (spinning) worker joins a launch within a microsecond when it has a core; one
 * that missed a whole launch this long was not running: it shares a core. */
#define POOL_MISSED_NS 50000

#include "pool_adapt.h"

typedef struct {
  _Atomic uintptr_t key; /* the loop's lambda */
  _Atomic int32_t serial_left; /* launches still to run inline */
  int32_t backoff;             /* the next loss's serial_left; written under launch */
} PoolSite;

static PoolSite g_sites[POOL_SITES];

/* The process-wide adaptive state (pool_adapt.h): updated under g_pool.launch (a launch that
 * ran inline skips its update when another thread holds it); g_serial mirrors
 * !adapt_parallel() for the lock-free check at a launch's start. */
static PoolAdapt g_adapt;
static _Atomic int32_t g_serial = 0;
/* EmberBackendPoolPolicy: 0 the run governor (pool_runs.h), the adaptive state and the
 * per-loop backoff; 1 the per-loop backoff only; 2 none; 3 the adaptive state and the
 * per-loop backoff (no governor). */
static _Atomic int32_t g_policy = 0;

/* Whether the policy has the per-loop backoff; the adaptive state; the run governor. */
static inline int32_t policy_backoff(void) {
  return atomic_load_explicit(&g_policy, memory_order_relaxed) != 2;
}
static inline int32_t policy_adapt(void) {
  int32_t policy = atomic_load_explicit(&g_policy, memory_order_relaxed);
  return policy == 0 || policy == 3;
}
static inline int32_t policy_governs(void) {
  return atomic_load_explicit(&g_policy, memory_order_relaxed) == 0;
}

/* Counters of EmberBackendPoolStats, in this order (relaxed atomics; read while idle). */
enum {
  POOL_STAT_RANGE,       /* range launches split across the pool */
  POOL_STAT_GROUP,       /* group launches run by the pool */
  POOL_STAT_SITE_INLINE, /* launches run inline by the per-loop backoff */
  POOL_STAT_ADAPT_INLINE, /* launches run inline by the adaptive state (serial stretch) */
  POOL_STAT_JOINED,      /* pool launches a worker took part in */
  POOL_STAT_CHUNKS,      /* chunks of the split range launches */
  POOL_STAT_ITERS,       /* iterations (tasks) of the pool launches */
  POOL_STAT_OWN_ITERS,   /* of which the caller ran */
  POOL_STAT_WAIT_NS,     /* caller's time from the end of its share to the join */
  POOL_STAT_POOL_NS,     /* time of the pool launches */
  POOL_STAT_LATE,        /* pool launches whose join waited over POOL_LATE_NS */
  POOL_STAT_MAX_WAIT_NS, /* the longest such wait */
  POOL_STAT_STALLS,      /* times the adaptive state went serial */
  POOL_STAT_WOKE,        /* pool launches that had to wake a sleeping worker */
  POOL_STAT_LOST_NS,     /* time lost by pool launches that lost (against the caller alone) */
  POOL_STAT_INLINE_NS,   /* time of the launches run inline by the adaptive state */
  POOL_STAT_SHARED,      /* pool launches on one core: a worker joined on the caller's CPU,
                          * or an awake worker missed a launch of over POOL_MISSED_NS */
  POOL_STAT_RUNS,        /* runs the run governor chose for (pool_runs.h) */
  POOL_STAT_RUNS_ALONE,  /* of which it kept on the calling thread */
  POOL_STAT_COUNT
};
static _Atomic int64_t g_stats[POOL_STAT_COUNT];

static inline void stat_add(int32_t k, int64_t v) {
  atomic_fetch_add_explicit(&g_stats[k], v, memory_order_relaxed);
}

/* Forget what the adaptive state and the per-loop backoff learnt. */
static void learn_forget(void) {
  memset(&g_adapt, 0, sizeof(g_adapt));
  atomic_store(&g_serial, 0);
  for (int32_t k = 0; k < POOL_SITES; ++k) {
    atomic_store(&g_sites[k].key, 0);
    atomic_store(&g_sites[k].serial_left, 0);
    g_sites[k].backoff = 0;
  }
}

static PoolSite* site_of(uintptr_t key) {
  uintptr_t h = key;
  h ^= h >> 17;
  h *= (uintptr_t)0x9E3779B97F4A7C15u;
  return &g_sites[(h >> 24) % POOL_SITES];
}

/* Whether the loop `key` runs inline this time (it lost in parallel lately). */
static int32_t site_backs_off(uintptr_t key) {
  if (!policy_backoff()) return 0;
  PoolSite* site = site_of(key);
  if (atomic_load_explicit(&site->key, memory_order_relaxed) != key) return 0;
  if (atomic_load_explicit(&site->serial_left, memory_order_relaxed) <= 0) return 0;
  atomic_fetch_sub_explicit(&site->serial_left, 1, memory_order_relaxed);
  return 1;
}

/* After a parallel launch of the loop `key` (under g_pool.launch): a loss when the caller ran
 * everything itself or the launch took longer than the caller alone would have (its own
 * rate times the extent, or the tasks); a loss backs the loop off, a gain halves its backoff.
 * A launch that had to wake a sleeping worker and was over before it joined is neither: the
 * caller lost no time (one wake), the worker now spins for the next loop, and counting it a
 * loss serialised, after every pause of the caller (between two runs, or after a stretch of
 * small loops), the first loop too short to cover a worker's wake-up, for 4-1024 launches. */
static void site_record(uintptr_t key, int64_t extent, const PoolRunStats* st) {
  if (!policy_backoff()) return;
  PoolSite* site = site_of(key);
  if (atomic_load_explicit(&site->key, memory_order_relaxed) != key) {
    atomic_store_explicit(&site->key, key, memory_order_relaxed);
    atomic_store_explicit(&site->serial_left, 0, memory_order_relaxed);
    site->backoff = 0;
  }
  if (st->own >= extent && st->woke) return;
  int lost = st->own >= extent;
  if (!lost && st->own > 0) {
    double serial = (double)st->own_ticks * (double)extent / (double)st->own;
    lost = (double)st->all_ticks > serial;
  }
  if (lost) {
    int32_t next = site->backoff < POOL_BACKOFF_MIN ? POOL_BACKOFF_MIN : site->backoff;
    atomic_store_explicit(&site->serial_left, next, memory_order_relaxed);
    site->backoff = next * 2 < POOL_BACKOFF_MAX ? next * 2 : POOL_BACKOFF_MAX;
  } else {
    site->backoff /= 2;
  }
}

/* After a pool launch (under g_pool.launch): the statistics, the adaptive state, the loop's
 * backoff. */
static void pool_record(uintptr_t key, int64_t total, int32_t stat, const PoolRunStats* st) {
  int64_t all = (int64_t)st->all_ticks, wait = all - (int64_t)st->own_ticks;
  int64_t saved = adapt_saved(st->own, total, (int64_t)st->own_ticks, all, st->woke);
  int32_t shared = st->shared || (st->own >= total && !st->woke && all > POOL_MISSED_NS &&
                                   g_pool.num_workers < g_pool_cores);
  if (shared) saved = adapt_shared(saved, all);
  stat_add(POOL_STAT_SHARED, shared);
  stat_add(stat, 1);
  stat_add(POOL_STAT_JOINED, st->own < total);
  stat_add(POOL_STAT_ITERS, total);
  stat_add(POOL_STAT_OWN_ITERS, st->own);
  stat_add(POOL_STAT_WAIT_NS, wait);
  stat_add(POOL_STAT_POOL_NS, all);
  stat_add(POOL_STAT_WOKE, st->woke);
  stat_add(POOL_STAT_LOST_NS, saved < 0 ? -saved : 0);
  if (wait > POOL_LATE_NS) {
    stat_add(POOL_STAT_LATE, 1);
    if (wait > atomic_load_explicit(&g_stats[POOL_STAT_MAX_WAIT_NS], memory_order_relaxed)) {
      atomic_store_explicit(&g_stats[POOL_STAT_MAX_WAIT_NS], wait, memory_order_relaxed);
    }
  }
  if (policy_adapt()) {
    int64_t stalls = g_adapt.stalls;
    adapt_parallel_ran(&g_adapt, all, saved);
    stat_add(POOL_STAT_STALLS, g_adapt.stalls - stalls);
    atomic_store_explicit(&g_serial, !adapt_parallel(&g_adapt), memory_order_relaxed);
  }
  site_record(key, total, st);
}

/* Whether the adaptive state sends launches to the caller alone right now. */
static inline int32_t pool_serial(void) {
  return policy_adapt() &&
         atomic_load_explicit(&g_serial, memory_order_relaxed);
}

/* After a launch that ran inline for the adaptive state, `ns` long. */
static void pool_serial_ran(int64_t ns) {
  stat_add(POOL_STAT_ADAPT_INLINE, 1);
  stat_add(POOL_STAT_INLINE_NS, ns);
  if (pthread_mutex_trylock(&g_pool.launch) != 0) return; /* another thread's launch */
  adapt_serial_ran(&g_adapt, ns);
  atomic_store_explicit(&g_serial, !adapt_parallel(&g_adapt), memory_order_relaxed);
  pthread_mutex_unlock(&g_pool.launch);
}

int32_t EmberBackendPoolStats(int64_t* out, int32_t n) {
  int32_t k = 0;
  for (; out != NULL && k < n && k < POOL_STAT_COUNT; ++k) {
    out[k] = atomic_load_explicit(&g_stats[k], memory_order_relaxed);
  }
  return POOL_STAT_COUNT;
}

int32_t EmberBackendPoolPolicy(int32_t policy, int32_t reset) {
  if (policy > 3) return set_error("EmberBackendPoolPolicy: %s", "policy is 0, 1, 2 or 3");
  pthread_mutex_lock(&g_pool.launch);
  int32_t before = policy < 0 ? atomic_load(&g_policy) : atomic_exchange(&g_policy, policy);
  if (reset) learn_forget();
  pthread_mutex_unlock(&g_pool.launch);
  if (reset) gov_forget();
  return before;
}

#endif /* EMBER_POOL_LEARN_H_ */
