/*
 * The work of one launch of ember's thread pool: the job (a group job's tasks, a range job's
 * chunks in one segment per thread), how a participant runs its share, how a range is cut into
 * chunks and segments. A private part of thread_pool.h, which includes it once (before the
 * pool itself); not a public header.
 */
#ifndef EMBER_POOL_JOB_H_
#define EMBER_POOL_JOB_H_

#ifndef CHUNKS_PER_THREAD
#define CHUNKS_PER_THREAD 4 /* dynamic chunks per thread of a range job */
#endif

typedef struct {
  _Atomic int32_t count;
  _Atomic int32_t sense;
} PoolBarrier;

/* A participant's segment of a range job: its chunks from `next` up to `end`, on a cache
 * line of its own. Participant k (the caller 0, worker i is i + 1) runs its segment's chunks
 * first, then takes what is left of the others', so the same thread runs the same part of
 * every loop (one layer's output rows are in the cache of the core that reads them in the
 * next) and the chunk counters are not one line that both cores write. Against one counter
 * for all chunks (resnet8 and ds_cnn_kws, 2 threads, wall, AOT native call, A/B interleaved in
 * one process, policy "always", rounds in which the worker joined every launch, load
 * 2.2-2.9): 0.93-0.94x and 0.96-0.97x the time. */
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

#endif /* EMBER_POOL_JOB_H_ */
