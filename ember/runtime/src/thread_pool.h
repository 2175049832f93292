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
 * the pool at all is learnt from earlier ones (pool_learn.h: per loop, and process-wide).
 * The parts: pool_job.h (a job's tasks, chunks and segments), pool_workers.h (how workers
 * wait, join and leave; the pool's growth), this file (publishing a launch and waiting for
 * it, the public calls), pool_learn.h and pool_adapt.h (what the pool learns). */
#define POOL_OPEN ((uint64_t)1 << 32)
#define POOL_COUNT_MASK (POOL_OPEN - 1)
#define POOL_MAX_THREADS 1024

#include "pool_job.h" /* the job: tasks, chunks and segments */

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
static void gov_forget(void);   /* pool_runs.h */

static _Thread_local int32_t g_in_pool = 0; /* set in workers and in a launching caller */
/* set for a run that the run governor (pool_runs.h) keeps on its calling thread */
static _Thread_local int32_t g_run_alone = 0;
static int32_t g_num_threads = 0;           /* 0: not decided yet */

/* What the caller measured of one launch (pool_run fills it). */
typedef struct {
  int64_t own;        /* iterations (or tasks) the caller ran itself */
  uint64_t own_ticks; /* ns from publishing to the end of the caller's share */
  uint64_t all_ticks; /* ns from publishing until the joined workers were done */
  int32_t woke;       /* a worker was asleep when the job was published */
  int32_t shared;     /* a worker joined on the caller's CPU, with no more threads than cores */
} PoolRunStats;

#include "pool_workers.h" /* waiting, joining, growing */

/* Publish the prepared g_pool.job to `workers` workers, take part, wait for those that
 * joined; returns 0, or -1 with the first task's error as this thread's last error. */
static int32_t pool_run(int32_t workers, int32_t wait_all_tasks, PoolRunStats* stats) {
  PoolJob* job = &g_pool.job;
  uint64_t start = pool_ticks();
  /* relaxed: the state's store below publishes them. Each seq_cst store is an xchg on x86
   * that waits for the stores before it, among them lines a worker wrote in the last launch
   * (ds_cnn_kws at 2 threads 0.976x with them relaxed; performance.md, stop 42) */
  atomic_store_explicit(&job->failed, 0, memory_order_relaxed);
  int32_t caller_cpu = pool_cpu();
  atomic_store_explicit(&job->caller_cpu, caller_cpu, memory_order_relaxed);
  atomic_store_explicit(&job->join_cpu, -1, memory_order_relaxed);
  atomic_store_explicit(&job->left_cpu, -1, memory_order_relaxed);
  job->error = NULL;
  atomic_store_explicit(&job->barrier.count, 0, memory_order_relaxed);
  atomic_store_explicit(&job->barrier.sense, 0, memory_order_relaxed);
  atomic_store_explicit(&g_pool.want, workers, memory_order_relaxed);
  /* only this thread, under g_pool.launch, changes the epoch */
  uint64_t epoch = (atomic_load_explicit(&g_pool.state, memory_order_relaxed) >> 33) + 1;
  /* seq_cst: ordered before the load of sleepers (a worker adds itself to them, then reads
   * the state: one of the two sees the other) */
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

/* A launch run on the caller alone, as if launched: loops it starts stay inline too. */
static int32_t group_alone(FEmberParallelLambda flambda, void* cdata) {
  EmberParallelGroupEnv one = {NULL, 1};
  g_in_pool = 1;
  int32_t rc = flambda(0, &one, cdata);
  g_in_pool = 0;
  return rc;
}

static int32_t range_alone(FEmberParallelRange frange, void* cdata, int64_t extent) {
  g_in_pool = 1;
  int32_t rc = frange(0, extent, cdata);
  g_in_pool = 0;
  return rc;
}

int32_t EmberBackendParallelLaunch(FEmberParallelLambda flambda, void* cdata, int32_t num_task) {
  if (flambda == NULL) return set_error("EmberBackendParallelLaunch: %s is NULL", "flambda");
  int32_t want = num_task > 0 ? num_task : EmberBackendGetNumThreads();
  if (want > POOL_MAX_THREADS) want = POOL_MAX_THREADS;
  uintptr_t key = (uintptr_t)flambda;
  /* a run kept on its caller (pool_runs.h) or a serial stretch (pool_learn.h) runs it as
   * one task; more tasks than cores were asked for: kept */
  if (want > 1 && !g_in_pool && g_run_alone && want <= pool_cores()) {
    return group_alone(flambda, cdata);
  }
  if (want > 1 && !g_in_pool && pool_serial() && want <= pool_cores()) {
    uint64_t start = pool_ticks();
    int32_t rc = group_alone(flambda, cdata);
    pool_serial_ran((int64_t)(pool_ticks() - start));
    return rc;
  }
  if (want > 1 && !g_in_pool && site_backs_off(key)) {
    stat_add(POOL_STAT_SITE_INLINE, 1);
    return group_alone(flambda, cdata);
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
      atomic_store_explicit(&job->next, 0, memory_order_relaxed);
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
  if (g_run_alone && threads <= pool_cores()) { /* a run kept on its caller (pool_runs.h) */
    return range_alone(frange, cdata, extent);
  }
  /* a serial stretch, as if launched (loops it starts stay inline too); more threads than
   * cores were asked for: kept */
  if (pool_serial() && threads <= pool_cores()) {
    uint64_t start = pool_ticks();
    int32_t rc = range_alone(frange, cdata, extent);
    pool_serial_ran((int64_t)(pool_ticks() - start));
    return rc;
  }
  if (site_backs_off((uintptr_t)frange)) { /* as if launched: loops it starts stay inline too */
    stat_add(POOL_STAT_SITE_INLINE, 1);
    return range_alone(frange, cdata, extent);
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

#include "pool_runs.h" /* governed runs: the pool or the caller alone, per model */

#endif /* EMBER_THREAD_POOL_H_ */
