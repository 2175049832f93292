/*
 * ember's run governor: whether a model's runs use the thread pool at all, chosen from the
 * runs' own times. Pure (no clock, no threads, no globals), like pool_adapt.h: pool_runs.h
 * feeds it every run's time, and tests/runtime/test_pool_govern.py drives it with made-up
 * ones. A private part of the runtime (pool_runs.h includes it); not a public header.
 *
 * Why: the pool's other defences judge one launch at a time, against the caller's own rate
 * inside that launch. What a second thread costs outside its launches is invisible to them:
 * the layers after a parallel one read the rows the other core wrote, and a tiny model's
 * launches are as short as the cost of handing work over. On a VM whose two vCPUs sit on
 * distant cores (a cache line's round trip 410-460 ns instead of 85-135 ns; this 2-core
 * machine switches between the two placements every few minutes) ds_cnn_kws ran in 1.52x
 * its 1-thread time with 2 threads and resnet8 in 1.09-1.13x, every launch still counting
 * as a gain; dense_autoencoder gains nothing from a second thread on either placement. A
 * run is what the user waits for: the governor times whole runs of each model with the
 * pool and on the calling thread alone, alternately, keeps the faster, and probes again
 * now and then (the machine changes), less often each time the choice holds.
 */
#ifndef EMBER_POOL_GOVERN_H_
#define EMBER_POOL_GOVERN_H_

#include <stdint.h>

#define GOV_WARM 2  /* a model's first runs are not timed (cold caches, workers starting) */
/* A trial runs blocks of consecutive runs of one choice, alternating: the runs right after
 * a switch pay for it (the worker wakes on a core that idled, its caches hold none of its
 * rows and weights; or the caller's hold none of the worker's), so the first runs of a
 * block, at least GOV_SKIP of them and GOV_SKIP_NS long, are not timed, and the next
 * GOV_BLOCK are. (ds_cnn_kws after 300 runs on one thread, then at 2 threads: 35.8, 24.3,
 * 21.3 us, then 18.4-17.6, against 23 alone; timed from the second run, the pool's block
 * read 7% faster than the caller alone instead of 24%, and with noise the governor kept
 * the caller alone. Alternating run by run was worse: every pool run followed a
 * caller-alone one.) */
#define GOV_SKIP 1
#define GOV_SKIP_NS 300000
#define GOV_BLOCK 3
#define GOV_TRIAL_BLOCKS 1  /* blocks of each choice in a trial (the first, and every probe) */
#define GOV_PERIOD_MIN 64   /* runs from a trial that changed the choice to the next probe */
#define GOV_PERIOD_MAX 4096 /* the longest gap between probes (doubles while the choice holds) */
/* ... and at most this much run time: 4096 runs of a 3 ms model are 12 s, while the host
 * moves this VM's vCPUs every few minutes (a probe costs two blocks, about 1 ms of runs
 * for a tiny model, one run of a large one more than the block's own time) */
#define GOV_PERIOD_MAX_NS 1000000000
/* The pool is chosen when its runs' median is at most this percentage of the caller-alone
 * runs': a second core that saves under 5% of a run is within a run's noise here, and
 * keeping it costs the other core's time and a spinning worker. */
#define GOV_KEEP_PCT 95

typedef struct {
  int64_t runs;        /* runs recorded */
  int64_t next_probe;  /* the run count at which the next probe starts */
  int64_t period;      /* runs between probes (0: the first trial is not over) */
  int64_t changes;     /* times a probe changed the choice */
  int64_t since_ns;    /* run time since the last trial ended */
  int32_t parallel;    /* the choice: 1 the pool, 0 the caller alone */
  int32_t blocks_left; /* blocks of the trial in progress still to run (0: no trial) */
  int32_t block_mode;  /* the current block's choice */
  int32_t timing;      /* the current block is past its untimed runs */
  int32_t in_block;    /* runs done in the current block's phase (untimed, then timed) */
  int64_t skipped_ns;  /* time of the current block's untimed runs */
  int32_t n[2];        /* timed runs of the trial: [0] alone, [1] pool */
  int64_t ns[2][GOV_TRIAL_BLOCKS * GOV_BLOCK];
} PoolGov;

/* A fresh state: the pool first, then a trial of pool and caller-alone blocks. */
static inline void gov_init(PoolGov* g) {
  *g = (PoolGov){0};
  g->parallel = 1;
  g->blocks_left = 2 * GOV_TRIAL_BLOCKS;
  g->block_mode = 1;
}

/* Whether the next run uses the pool: the current block's choice during a trial, else the
 * choice. */
static inline int gov_choose(const PoolGov* g) {
  if (g->runs < GOV_WARM || g->blocks_left == 0) return g->parallel;
  return g->block_mode;
}

static inline int64_t gov_median(int64_t* v, int32_t n) {
  for (int32_t i = 1; i < n; ++i) { /* insertion sort: n <= 6 */
    int64_t x = v[i];
    int32_t j = i - 1;
    for (; j >= 0 && v[j] > x; --j) v[j + 1] = v[j];
    v[j + 1] = x;
  }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The trial's verdict: the pool's median against the caller alone's. */
static inline void gov_decide(PoolGov* g) {
  int64_t alone = gov_median(g->ns[0], g->n[0]), pool = gov_median(g->ns[1], g->n[1]);
  int choice = pool * 100 <= alone * GOV_KEEP_PCT;
  if (g->period == 0 || choice != g->parallel) {
    g->changes += g->period != 0;
    g->period = GOV_PERIOD_MIN;
  } else {
    g->period = g->period * 2 < GOV_PERIOD_MAX ? g->period * 2 : GOV_PERIOD_MAX;
  }
  g->parallel = choice;
  g->next_probe = g->runs + g->period;
  g->since_ns = 0;
}

/* After a run that used the pool (`parallel`) or not and took `ns`. */
static inline void gov_record(PoolGov* g, int parallel, int64_t ns) {
  g->runs++;
  if (g->runs <= GOV_WARM) return;
  if (g->blocks_left == 0) {
    g->since_ns += ns;
    if (g->runs >= g->next_probe || g->since_ns >= GOV_PERIOD_MAX_NS) {
      /* a probe: a block of the other choice, one of this */
      g->blocks_left = 2 * GOV_TRIAL_BLOCKS;
      g->block_mode = !g->parallel;
      g->in_block = 0;
      g->timing = 0;
      g->skipped_ns = 0;
      g->n[0] = g->n[1] = 0;
    }
    return;
  }
  if ((parallel != 0) != (g->block_mode != 0)) return; /* chosen before the block began */
  if (!g->timing) { /* the switch's runs */
    g->skipped_ns += ns;
    if (++g->in_block >= GOV_SKIP && g->skipped_ns >= GOV_SKIP_NS) {
      g->timing = 1;
      g->in_block = 0;
    }
    return;
  }
  int k = g->block_mode ? 1 : 0;
  if (g->n[k] < GOV_TRIAL_BLOCKS * GOV_BLOCK) g->ns[k][g->n[k]++] = ns;
  if (++g->in_block < GOV_BLOCK) return;
  g->in_block = 0;
  g->timing = 0;
  g->skipped_ns = 0;
  g->block_mode = !g->block_mode;
  if (--g->blocks_left == 0) gov_decide(g);
}

#endif /* EMBER_POOL_GOVERN_H_ */
