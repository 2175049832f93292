/*
 * ember's thread pool: EmberBackendParallelLaunch, EmberBackendParallelFor and the thread
 * count. A private part of runtime.c, which includes it once (after set_error and the
 * last-error functions); not a public header. Plain C11 atomics + pthreads.
 */
#ifndef EMBER_THREAD_POOL_H_
#define EMBER_THREAD_POOL_H_

/* ---- thread pool ----------------------------------------------------------
 * ember's own pool behind EmberBackendParallelLaunch and EmberBackendParallelFor.
 * One launch runs at a time; the calling thread takes part. A job is published by bumping
 * an epoch in `state` (epoch << 33 | OPEN | participants); a worker joins only with a CAS
 * on the epoch it saw while the job is still OPEN, so a late worker (asleep, descheduled)
 * never delays a range job: the caller closes the job once the chunks are gone and waits
 * only for workers that did join. Idle workers spin briefly, then sleep on a condvar; a
 * thread waiting for one on its own CPU yields instead of spinning. Whether a launch goes to
 * the pool at all is learnt from earlier ones (pool_learn.h: per loop, and process-wide). */
#define POOL_OPEN ((uint64_t)1 << 32)
#define POOL_COUNT_MASK (POOL_OPEN - 1)
#ifndef POOL_SPIN
#define POOL_SPIN 4000 /* pause iterations before an idle worker sleeps (~10-40 us) */
#endif
/* Yields (instead of pauses) before a thread that shares its CPU with the thread it waits
 * for sleeps: a pause loop holds the CPU the other needs until the scheduler's tick; no spin
 * at all makes every launch a futex wake that preempts the caller (ds_cnn_kws at 2 threads,
 * co-located next to a busy process: 3.75x its 1-thread time with no spin, 1.06 spinning). */
#define POOL_YIELDS 64
#define POOL_MAX_THREADS 1024
#ifndef CHUNKS_PER_THREAD
#define CHUNKS_PER_THREAD 4 /* dynamic chunks per thread of a range job */
#endif

typedef struct {
  _Atomic int32_t count;
  _Atomic int32_t sense;
} PoolBarrier;

/* A participant's segment of a range job: its chunks from `next` up to `end`, on a cache line
 * of its own. Participant k (the caller 0, worker i is i + 1) runs its segment's chunks first, then
 * takes what is left of the others', so the same thread runs the same part of every loop
 * (one layer's output rows are in the cache of the core that reads them in the next) and the
 * chunk counters are not one line that both cores write. Against one counter for all chunks
 * (resnet8 and ds_cnn_kws, 2 threads, wall, AOT native call, A/B interleaved in one process,
 * policy "always", rounds in which the worker joined every launch, load 2.2-2.9): 0.93-0.94x
 * and 0.96-0.97x the time. */
#define POOL_SEGS 16
typedef struct {
  _Atomic int64_t next;
  int64_t end;
  char pad[64 - 2 * sizeof(int64_t)];
} PoolSeg;

typedef struct {
  FEmberParallelLambda flambda; /* group job: tasks 0..num_task-1, one per thread */
  FEmberParallelRange frange;   /* range job: chunks of [0, extent), in segments */
  void* cdata;
  int32_t num_task;
  int64_t extent;
  int64_t chunk;
  _Atomic int64_t next; /* group job: the next task id */
  _Atomic int32_t failed;
  _Atomic int32_t caller_cpu; /* the caller's CPU when it published the job (-1: unknown) */
  _Atomic int32_t join_cpu;   /* the CPU a worker joined on (the last to join; -1: none) */
  _Atomic int32_t left_cpu;   /* the CPU a worker left the job on (the last to leave) */
  char* error; /* the first failure's message, owned by the job */
  PoolBarrier barrier;
  int32_t nseg; /* range job: its segments (group job: 0) */
  PoolSeg seg[POOL_SEGS] __attribute__((aligned(64)));
} PoolJob;

static struct {
  pthread_mutex_t launch; /* one launch at a time */
  pthread_mutex_t lock;   /* guards sleeping and waking */
  pthread_cond_t wake;    /* workers sleep here */
  pthread_cond_t done;    /* the caller waits here for joined workers */
  _Atomic uint64_t state;
  _Atomic int32_t want; /* workers with index < want may join the current job */
  _Atomic int32_t sleepers;
  int32_t num_workers;
  PoolJob job;
} g_pool = {.launch = PTHREAD_MUTEX_INITIALIZER,
            .lock = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER,
            .done = PTHREAD_COND_INITIALIZER,
            .job = {.caller_cpu = -1}};

static void learn_forget(void); /* pool_learn.h */

static _Thread_local int32_t g_in_pool = 0; /* set in workers and in a launching caller */
static int32_t g_num_threads = 0;           /* 0: not decided yet */

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

static void job_fail(PoolJob* job) {
  int32_t expected = 0;
  if (atomic_compare_exchange_strong(&job->failed, &expected, 1)) {
    job->error = strdup(EmberGetLastError());
  }
  /* a range job hands out no more chunks; a group job's tasks all run (barriers) */
  for (int32_t k = 0; k < job->nseg; ++k) atomic_store(&job->seg[k].next, INT64_MAX / 2);
}

/* Run the chunks left in one segment of a range job; returns the iterations run, and sets
 * *failed when a chunk failed. */
static int64_t seg_work(PoolJob* job, PoolSeg* seg, int32_t* failed) {
  int64_t done = 0;
  for (;;) {
    int64_t begin = atomic_fetch_add_explicit(&seg->next, job->chunk, memory_order_relaxed);
    if (begin >= seg->end) return done;
    int64_t end = begin + job->chunk < seg->end ? begin + job->chunk : seg->end;
    if (job->frange(begin, end, job->cdata) != 0) {
      job_fail(job);
      *failed = 1;
      return done;
    }
    done += end - begin;
  }
}

/* Run one participant's share of the job: one task, or the chunks of its own segment and
 * then those left in the others'; returns the iterations (range job) or tasks (group job)
 * it ran. */
static int64_t job_work(PoolJob* job, int32_t participant) {
  if (job->flambda != NULL) {
    int64_t id = atomic_fetch_add(&job->next, 1);
    if (id >= job->num_task) return 0;
    EmberParallelGroupEnv env = {&job->barrier, job->num_task};
    if (job->flambda((int32_t)id, &env, job->cdata) != 0) job_fail(job);
    return 1;
  }
  int64_t done = 0;
  int32_t failed = 0;
  for (int32_t k = 0; k < job->nseg && !failed; ++k) {
    done += seg_work(job, &job->seg[(participant + k) % job->nseg], &failed);
  }
  return done;
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

/* What the caller measured of one launch (pool_run fills it). */
typedef struct {
  int64_t own;        /* iterations (or tasks) the caller ran itself */
  uint64_t own_ticks; /* ns from publishing to the end of the caller's share */
  uint64_t all_ticks; /* ns from publishing until the joined workers were done */
  int32_t woke;       /* a worker was asleep when the job was published */
  int32_t shared;     /* a worker joined on the caller's CPU, with no more threads than cores */
} PoolRunStats;

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

/* Grow the pool to `n` workers (called under g_pool.launch); returns how many exist. */
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

/* The cores, as of the pool's last growth (count_cores() before it first grew). */
static inline int32_t pool_cores(void) { return g_pool_cores > 0 ? g_pool_cores : count_cores(); }

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

/* Publish the prepared g_pool.job to `workers` workers, take part, wait for those that
 * joined; returns 0, or -1 with the first task's error as this thread's last error. */
static int32_t pool_run(int32_t workers, int32_t wait_all_tasks, PoolRunStats* stats) {
  PoolJob* job = &g_pool.job;
  uint64_t start = pool_ticks();
  atomic_store(&job->failed, 0);
  int32_t caller_cpu = pool_cpu();
  atomic_store_explicit(&job->caller_cpu, caller_cpu, memory_order_relaxed);
  atomic_store_explicit(&job->join_cpu, -1, memory_order_relaxed);
  atomic_store_explicit(&job->left_cpu, -1, memory_order_relaxed);
  job->error = NULL;
  atomic_store(&job->barrier.count, 0);
  atomic_store(&job->barrier.sense, 0);
  atomic_store_explicit(&g_pool.want, workers, memory_order_relaxed);
  uint64_t epoch = (atomic_load(&g_pool.state) >> 33) + 1;
  atomic_store(&g_pool.state, epoch << 33 | POOL_OPEN); /* publishes the job */
  stats->woke = atomic_load(&g_pool.sleepers) > 0;
  if (stats->woke) {
    pthread_mutex_lock(&g_pool.lock);
    pthread_cond_broadcast(&g_pool.wake);
    pthread_mutex_unlock(&g_pool.lock);
  }
  g_in_pool = 1;
  stats->own = job_work(job, 0);
  stats->own_ticks = pool_ticks() - start;
  int32_t own_cpu = pool_cpu();
  if (wait_all_tasks) { /* a group job: every task id must be taken (barriers need them) */
    for (int32_t spin = 0; atomic_load(&job->next) < job->num_task; ++spin) backoff(spin);
  }
  uint64_t s = atomic_fetch_and(&g_pool.state, ~POOL_OPEN) & ~POOL_OPEN; /* close */
  /* a worker on this CPU runs only when this thread stops: yield to it */
  int32_t join_cpu = atomic_load_explicit(&job->join_cpu, memory_order_relaxed);
  int32_t shared = join_cpu >= 0 && join_cpu == own_cpu;
  for (int32_t spin = 0; (s & POOL_COUNT_MASK) != 0 && spin < (shared ? POOL_YIELDS : POOL_SPIN);
       ++spin) {
    backoff(shared ? POOL_SPIN : spin);
    s = atomic_load(&g_pool.state);
  }
  if ((s & POOL_COUNT_MASK) != 0) {
    pthread_mutex_lock(&g_pool.lock);
    while ((atomic_load(&g_pool.state) & POOL_COUNT_MASK) != 0) {
      pthread_cond_wait(&g_pool.done, &g_pool.lock);
    }
    pthread_mutex_unlock(&g_pool.lock);
  }
  stats->all_ticks = pool_ticks() - start;
  /* a worker that joined on the caller's CPU and left on the one the caller ended its share
   * on: the two shared one core all along (a passing co-location, which the scheduler soon
   * undoes, is not counted). More threads than cores share cores by request. */
  stats->shared = workers < g_pool_cores && caller_cpu >= 0 &&
                  atomic_load_explicit(&job->join_cpu, memory_order_relaxed) == caller_cpu &&
                  atomic_load_explicit(&job->left_cpu, memory_order_relaxed) == own_cpu;
  g_in_pool = 0;
  if (atomic_load(&job->failed)) {
    EmberAPISetLastError(job->error != NULL ? job->error : "a parallel task failed");
    free(job->error);
    job->error = NULL;
    return -1;
  }
  return 0;
}

int32_t EmberBackendSetNumThreads(int32_t num_threads) {
  if (num_threads < 0) return set_error("EmberBackendSetNumThreads: %s", "negative thread count");
  if (num_threads > POOL_MAX_THREADS) {
    return set_error("EmberBackendSetNumThreads: %s", "more than 1024 threads");
  }
  __atomic_store_n(&g_num_threads, num_threads, __ATOMIC_RELAXED);
  return 0;
}

static _Atomic int32_t g_default_threads = 0; /* EMBER_NUM_THREADS or the cores, once */

int32_t EmberBackendGetNumThreads(void) {
  int32_t n = __atomic_load_n(&g_num_threads, __ATOMIC_RELAXED);
  if (n > 0) return n;
  n = atomic_load_explicit(&g_default_threads, memory_order_relaxed);
  if (n > 0) return n;
  const char* env = getenv("EMBER_NUM_THREADS");
  n = env != NULL && atoi(env) > 0 ? atoi(env) : count_cores();
  n = n < POOL_MAX_THREADS ? n : POOL_MAX_THREADS;
  atomic_store_explicit(&g_default_threads, n, memory_order_relaxed);
  return n;
}

int32_t EmberBackendNumCores(void) { return count_cores(); }

#include "pool_learn.h" /* the per-loop backoff, the adaptive state, the statistics */

int32_t EmberBackendParallelLaunch(FEmberParallelLambda flambda, void* cdata, int32_t num_task) {
  if (flambda == NULL) return set_error("EmberBackendParallelLaunch: %s is NULL", "flambda");
  int32_t want = num_task > 0 ? num_task : EmberBackendGetNumThreads();
  if (want > POOL_MAX_THREADS) want = POOL_MAX_THREADS;
  uintptr_t key = (uintptr_t)flambda;
  /* a serial stretch (pool_learn.h) runs it as one task; more tasks than cores were asked
   * for: kept */
  if (want > 1 && !g_in_pool && pool_serial() && want <= pool_cores()) {
    EmberParallelGroupEnv one = {NULL, 1};
    uint64_t start = pool_ticks();
    g_in_pool = 1;
    int32_t rc = flambda(0, &one, cdata);
    g_in_pool = 0;
    pool_serial_ran((int64_t)(pool_ticks() - start));
    return rc;
  }
  if (want > 1 && !g_in_pool && site_backs_off(key)) {
    stat_add(POOL_STAT_SITE_INLINE, 1);
    EmberParallelGroupEnv one = {NULL, 1};
    g_in_pool = 1;
    int32_t rc = flambda(0, &one, cdata);
    g_in_pool = 0;
    return rc;
  }
  if (want > 1 && !g_in_pool) {
    pthread_mutex_lock(&g_pool.launch);
    int32_t had = g_pool.num_workers;
    if (pool_grow(want - 1) >= want - 1) {
      PoolJob* job = &g_pool.job;
      job->flambda = flambda;
      job->frange = NULL;
      job->cdata = cdata;
      job->num_task = want;
      job->nseg = 0;
      atomic_store(&job->next, 0);
      PoolRunStats stats;
      int32_t rc = pool_run(want - 1, 1, &stats);
      stats.woke |= g_pool.num_workers > had;
      pool_record(key, want, POOL_STAT_GROUP, &stats);
      pthread_mutex_unlock(&g_pool.launch);
      return rc;
    }
    pthread_mutex_unlock(&g_pool.launch); /* could not start threads: run as one task */
  }
  EmberParallelGroupEnv env = {NULL, 1};
  return flambda(0, &env, cdata);
}

/* Iterations per chunk of a range job: CHUNKS_PER_THREAD chunks per thread, fewer when a
 * chunk would then be under `grain` iterations; the chunks are as even as possible and,
 * when fewer than that, a multiple of the threads. (A chunk of max(extent / 8, grain)
 * iterations left, e.g., 64 iterations of grain 24 in chunks of 24, 24 and 16: one thread
 * ran two of the three, a speedup of 1.33 at best.) `threads` <= extent / grain. */
static int64_t pool_chunk(int64_t extent, int64_t grain, int32_t threads) {
  int64_t most = extent / grain;
  int64_t chunks = (int64_t)threads * CHUNKS_PER_THREAD;
  if (chunks > most) chunks = most - most % threads;
  if (chunks < 1) chunks = 1;
  return (extent + chunks - 1) / chunks;
}

/* Split the chunks of the prepared range job into one segment per thread (at most POOL_SEGS),
 * contiguous and as even as the chunks allow. */
static void pool_segments(PoolJob* job, int32_t threads) {
  int64_t chunks = (job->extent + job->chunk - 1) / job->chunk;
  job->nseg = threads < POOL_SEGS ? threads : POOL_SEGS;
  for (int32_t k = 0; k < job->nseg; ++k) {
    int64_t begin = chunks * k / job->nseg * job->chunk;
    int64_t end = chunks * (k + 1) / job->nseg * job->chunk;
    atomic_store_explicit(&job->seg[k].next, begin, memory_order_relaxed);
    job->seg[k].end = end < job->extent ? end : job->extent;
  }
}

int32_t EmberBackendParallelFor(FEmberParallelRange frange, void* cdata, int64_t extent,
                                int64_t grain, int32_t num_threads) {
  if (frange == NULL) return set_error("EmberBackendParallelFor: %s is NULL", "frange");
  if (extent <= 0) return 0;
  if (grain < 1) grain = 1;
  int32_t threads = num_threads > 0 ? num_threads : EmberBackendGetNumThreads();
  int64_t most = extent / grain; /* no thread gets less than a grain */
  if (threads > most) threads = (int32_t)most;
  if (threads > POOL_MAX_THREADS) threads = POOL_MAX_THREADS;
  /* under two grains, nested, one thread, a loop that lost lately, or another thread's
   * launch runs: inline */
  if (threads <= 1 || g_in_pool) return frange(0, extent, cdata);
  /* a serial stretch, as if launched (loops it starts stay inline too); more threads than
   * cores were asked for: kept */
  if (pool_serial() && threads <= pool_cores()) {
    uint64_t start = pool_ticks();
    g_in_pool = 1;
    int32_t rc = frange(0, extent, cdata);
    g_in_pool = 0;
    pool_serial_ran((int64_t)(pool_ticks() - start));
    return rc;
  }
  if (site_backs_off((uintptr_t)frange)) { /* as if launched: loops it starts stay inline too */
    stat_add(POOL_STAT_SITE_INLINE, 1);
    g_in_pool = 1;
    int32_t rc = frange(0, extent, cdata);
    g_in_pool = 0;
    return rc;
  }
  if (pthread_mutex_trylock(&g_pool.launch) != 0) return frange(0, extent, cdata);
  int32_t had = g_pool.num_workers;
  int32_t workers = pool_grow(threads - 1);
  if (workers == 0) {
    pthread_mutex_unlock(&g_pool.launch);
    return frange(0, extent, cdata);
  }
  if (workers < threads - 1) threads = workers + 1;
  PoolJob* job = &g_pool.job;
  job->flambda = NULL;
  job->frange = frange;
  job->cdata = cdata;
  job->extent = extent;
  job->chunk = pool_chunk(extent, grain, threads);
  pool_segments(job, threads);
  PoolRunStats stats;
  int32_t rc = pool_run(threads - 1, 0, &stats);
  stats.woke |= workers > had; /* a worker started for this launch: as good as asleep */
  stat_add(POOL_STAT_CHUNKS, (extent + job->chunk - 1) / job->chunk);
  pool_record((uintptr_t)frange, extent, POOL_STAT_RANGE, &stats);
  pthread_mutex_unlock(&g_pool.launch);
  return rc;
}

int32_t EmberBackendParallelBarrier(int32_t task_id, EmberParallelGroupEnv* penv) {
  (void)task_id;
  if (penv == NULL || penv->num_task <= 1 || penv->sync_handle == NULL) return 0;
  PoolBarrier* b = (PoolBarrier*)penv->sync_handle;
  int32_t sense = atomic_load(&b->sense);
  if (atomic_fetch_add(&b->count, 1) + 1 == penv->num_task) {
    atomic_store(&b->count, 0);
    atomic_store(&b->sense, !sense);
    return 0;
  }
  for (int32_t spin = 0; atomic_load(&b->sense) == sense; ++spin) backoff(spin);
  return 0;
}

#endif /* EMBER_THREAD_POOL_H_ */
