/*
 * The workers of ember's thread pool: how they wait (spin, yield, sleep), join a published job
 * and leave it, how the pool grows, and a forked child's empty pool. A private part of
 * thread_pool.h, which includes it once (after g_pool); not a public header.
 */
#ifndef EMBER_POOL_WORKERS_H_
#define EMBER_POOL_WORKERS_H_

#ifndef POOL_SPIN
#define POOL_SPIN 4000 /* pause iterations before an idle worker sleeps (~10-40 us) */
#endif
/* Yields (instead of pauses) before a thread that shares its CPU with the thread it waits
 * for sleeps: a pause loop holds the CPU the other needs until the scheduler's tick; no spin
 * at all makes every launch a futex wake that preempts the caller (ds_cnn_kws at 2 threads,
 * co-located next to a busy process: 3.75x its 1-thread time with no spin, 1.06 spinning). */
#define POOL_YIELDS 64

/* One step of a wait: a pause instruction for the first POOL_SPIN steps, then yield. */
static inline void backoff(int32_t step) {
  if (step >= POOL_SPIN) {
    sched_yield();
    return;
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Monotonic nanoseconds (the adaptive state and the statistics count time in ns). */
static inline uint64_t pool_ticks(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The CPU the calling thread runs on, or -1. */
static inline int32_t pool_cpu(void) {
#ifdef __linux__
  return sched_getcpu();
#else
  return -1;
#endif
}

/* Join the job of `epoch` if it is still open; run a share; leave. */
static void worker_join(uint64_t seen_state, int32_t index) {
  uint64_t s = seen_state;
  while ((s & POOL_OPEN) && index < atomic_load_explicit(&g_pool.want, memory_order_relaxed)) {
    if (atomic_compare_exchange_weak(&g_pool.state, &s, s + 1)) {
      atomic_store_explicit(&g_pool.job.join_cpu, pool_cpu(), memory_order_relaxed);
      job_work(&g_pool.job, index + 1);
      atomic_store_explicit(&g_pool.job.left_cpu, pool_cpu(), memory_order_relaxed);
      uint64_t left = atomic_fetch_sub(&g_pool.state, 1) - 1;
      if ((left & POOL_COUNT_MASK) == 0 && !(left & POOL_OPEN)) {
        pthread_mutex_lock(&g_pool.lock); /* the caller may be waiting for the last one */
        pthread_cond_broadcast(&g_pool.done);
        pthread_mutex_unlock(&g_pool.lock);
      }
      return;
    }
    if ((s >> 33) != (seen_state >> 33)) return; /* a newer job: seen on the next round */
  }
}

typedef struct {
  int32_t index;
  uint64_t epoch; /* the last job before this worker existed: it must not skip the next */
} WorkerStart;

static void* worker_main(void* arg) {
  WorkerStart start = *(WorkerStart*)arg;
  free(arg);
  int32_t index = start.index;
  uint64_t epoch = start.epoch;
  g_in_pool = 1;
  for (;;) {
    uint64_t s = atomic_load(&g_pool.state);
    /* on the CPU of the last job's caller, a pause loop takes the caller's core: yield */
    int32_t caller = atomic_load_explicit(&g_pool.job.caller_cpu, memory_order_relaxed);
    int32_t shared = caller >= 0 && pool_cpu() == caller;
    for (int32_t spin = 0; (s >> 33) == epoch && spin < (shared ? POOL_YIELDS : POOL_SPIN);
         ++spin) {
      backoff(shared ? POOL_SPIN : spin);
      s = atomic_load(&g_pool.state);
    }
    if ((s >> 33) == epoch) {
      pthread_mutex_lock(&g_pool.lock);
      atomic_fetch_add(&g_pool.sleepers, 1);
      while (((s = atomic_load(&g_pool.state)) >> 33) == epoch) {
        pthread_cond_wait(&g_pool.wake, &g_pool.lock);
      }
      atomic_fetch_sub(&g_pool.sleepers, 1);
      pthread_mutex_unlock(&g_pool.lock);
    }
    epoch = s >> 33;
    worker_join(s, index);
  }
  return NULL;
}

/* A forked child has none of the parent's workers: start from an empty pool. */
static void pool_after_fork(void) {
  pthread_mutex_init(&g_pool.launch, NULL);
  pthread_mutex_init(&g_pool.lock, NULL);
  pthread_cond_init(&g_pool.wake, NULL);
  pthread_cond_init(&g_pool.done, NULL);
  atomic_store(&g_pool.state, 0);
  atomic_store(&g_pool.sleepers, 0);
  g_pool.num_workers = 0;
  g_in_pool = 0;
  learn_forget(); /* a fresh pool learns afresh: a loop the parent backed off runs split */
}

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void pool_register_fork(void) { pthread_atfork(NULL, NULL, pool_after_fork); }

static int32_t count_cores(void) {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int32_t)n : 1;
}

static int32_t g_pool_cores = 0; /* count_cores() when the pool last grew */

static _Atomic int32_t g_cores_before = 0; /* count_cores() once, before the pool first grew */

/* The cores, as of the pool's last growth (before it first grew: as first counted, since
 * count_cores is a system call: a model with no loop in the pool paid two per governed run
 * at 2 threads, 0.46 us of a 0.55 us run of one Relu). */
static inline int32_t pool_cores(void) {
  if (g_pool_cores > 0) return g_pool_cores;
  int32_t n = atomic_load_explicit(&g_cores_before, memory_order_relaxed);
  if (n <= 0) {
    n = count_cores();
    atomic_store_explicit(&g_cores_before, n, memory_order_relaxed);
  }
  return n;
}

/* Grow the pool to `n` workers (called under g_pool.launch); returns how many exist. */
static int32_t pool_grow(int32_t n) {
  if (g_pool.num_workers < n) {
    pthread_once(&g_fork_once, pool_register_fork);
    g_pool_cores = count_cores();
  }
  while (g_pool.num_workers < n) {
    WorkerStart* start = (WorkerStart*)malloc(sizeof(WorkerStart));
    if (start == NULL) break;
    start->index = g_pool.num_workers;
    start->epoch = atomic_load(&g_pool.state) >> 33;
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, worker_main, start);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      free(start);
      break;
    }
    g_pool.num_workers++;
  }
  return g_pool.num_workers;
}

#endif /* EMBER_POOL_WORKERS_H_ */
