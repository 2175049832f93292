/*
 * ember's adaptive parallelism: whether the pool's workers are worth waiting for right now.
 * Pure (no clock, no threads, no globals): thread_pool.h feeds it every launch's times, and
 * tests/runtime/test_pool_adapt.py drives it with made-up ones. A private part of the
 * runtime (thread_pool.h includes it); not a public header.
 *
 * Why: on a machine where another process keeps a core busy, a worker that shares that core
 * is descheduled for a scheduler slice (about 1-3 ms) now and then. When that happens while
 * it holds a chunk, the caller finishes every other chunk and then waits at the join for the
 * rest of the slice: one such stall costs more than a small model's whole run gains from the
 * second thread. The per-loop backoff (thread_pool.h, POOL_BACKOFF_*) learns it loop by loop
 * (each loop loses once before it backs off; a model has dozens); this learns it once for
 * the process: a balance of the time parallel launches saved (their caller's own rate times
 * the extent, minus what the launch took) that falls under -ADAPT_FLOOR_NS sends every
 * launch to the caller alone for a stretch of inline work (ADAPT_WINDOW_*), then the pool is
 * tried again; a retry that soon loses doubles the next stretch, one that does not halves it.
 * Stretches are counted in inline work, not wall time, so that time spent outside ember
 * (other engines, pauses between runs) does not end them.
 */
#ifndef EMBER_POOL_ADAPT_H_
#define EMBER_POOL_ADAPT_H_

#include <stdint.h>

/* A stall: the balance (time saved by parallel launches lately) under minus this sends the
 * pool serial. One descheduled worker holding a chunk costs 1-3 ms (2 cores, one busy
 * process pinned to the other core, mobilenet_v2 / pp_lcnet, noisy-runs.md numbers in
 * docs/performance.md); a worker at half speed loses a few us per loop at most. */
#define ADAPT_FLOOR_NS 400000
/* Gains saved up count at most this much against a later loss: a long stretch of good
 * launches must not hide repeated stalls (the machine changed), but one stall in a model
 * that gains several ms per run from the second thread (yolo) is worth forgiving. */
#define ADAPT_CAP_NS 1000000
/* The serial stretches (ns of inline work): the first after a healthy period, and the most
 * after repeated failed retries. A retry costs at most one stall (~2 ms): at the largest
 * stretch it costs under 1% of the inline time; the first stretch is a few runs of a small
 * model (pp_lcnet ~2 ms, mobilenet_v2 ~15 ms at one thread). */
#define ADAPT_WINDOW_MIN_NS 20000000
#define ADAPT_WINDOW_MAX_NS 640000000
/* After a stretch, a retry is judged over this much parallel launch time (or the window's
 * quarter, if larger): no stall in it halves the next stretch; a stall doubles it. */
#define ADAPT_PROBE_NS 20000000

typedef struct {
  int64_t balance_ns;     /* time parallel launches saved lately; negative: lost */
  int64_t serial_left_ns; /* inline work left before the pool is tried again; 0: parallel */
  int64_t window_ns;      /* the next serial stretch (0: ADAPT_WINDOW_MIN_NS) */
  int64_t probe_left_ns;  /* parallel time left in a retry's trial; 0: not a retry */
  int64_t stalls;         /* times the balance fell under the floor */
} PoolAdapt;

/* Whether the next launch goes to the pool (else: inline on the caller). */
static inline int adapt_parallel(const PoolAdapt* a) { return a->serial_left_ns <= 0; }

static inline int64_t adapt_window(const PoolAdapt* a) {
  return a->window_ns > 0 ? a->window_ns : ADAPT_WINDOW_MIN_NS;
}

/* After a launch that ran inline because of adapt_parallel() == 0; `ns` it took. */
static inline void adapt_serial_ran(PoolAdapt* a, int64_t ns) {
  if (a->serial_left_ns <= 0) return;
  a->serial_left_ns -= ns > 0 ? ns : 1;
  if (a->serial_left_ns <= 0) { /* retry: the pool gets a trial */
    int64_t quarter = adapt_window(a) / 4;
    a->serial_left_ns = 0;
    a->balance_ns = 0;
    a->probe_left_ns = quarter > ADAPT_PROBE_NS ? quarter : ADAPT_PROBE_NS;
  }
}

/* After a parallel launch that took `all_ns` and saved `saved_ns` against the caller's
 * estimate of running it alone (negative: it lost). */
static inline void adapt_parallel_ran(PoolAdapt* a, int64_t all_ns, int64_t saved_ns) {
  a->balance_ns += saved_ns;
  if (a->balance_ns > ADAPT_CAP_NS) a->balance_ns = ADAPT_CAP_NS;
  if (a->balance_ns < -ADAPT_FLOOR_NS) { /* a stall: serial for a stretch */
    int64_t window = adapt_window(a);
    if (a->probe_left_ns > 0) { /* the retry failed: the next stretch doubles */
      window = window * 2 < ADAPT_WINDOW_MAX_NS ? window * 2 : ADAPT_WINDOW_MAX_NS;
      a->window_ns = window;
    }
    a->serial_left_ns = a->probe_left_ns > 0 ? window : adapt_window(a);
    a->balance_ns = 0;
    a->probe_left_ns = 0;
    a->stalls++;
    return;
  }
  if (a->probe_left_ns > 0) {
    a->probe_left_ns -= all_ns > 0 ? all_ns : 1;
    if (a->probe_left_ns <= 0) { /* the retry held: the next stretch halves */
      int64_t half = adapt_window(a) / 2;
      a->window_ns = half > ADAPT_WINDOW_MIN_NS ? half : ADAPT_WINDOW_MIN_NS;
      a->probe_left_ns = 0;
    }
  }
}

/* The time a launch saved: the caller's own rate (own_ns for `own` of `total` iterations or
 * tasks) times the total, minus the launch's time; 0 when the caller ran none (it waited
 * on a barrier: no rate) or ran all of it right after waking a sleeping worker (the wake
 * is the cost of a pause, not of a busy machine). */
static inline int64_t adapt_saved(int64_t own, int64_t total, int64_t own_ns, int64_t all_ns,
                                  int woke) {
  if (own <= 0 || total <= 0) return 0;
  if (own >= total && woke) return 0;
  double serial = (double)own_ns * (double)total / (double)own;
  return (int64_t)(serial - (double)all_ns);
}

/* The saving of a launch whose threads shared one core (a worker joined on the caller's CPU,
 * or an awake worker never got to run during it): at most minus half its time. The caller's
 * own rate, measured in wall time while the worker held the core, overstates the serial
 * time, so such a launch looked like a gain; and between launches the spinning worker takes
 * the caller's core. (2 cores, one busy process pinned to one: the scheduler keeps caller and
 * worker together on the other, moving one would not even the load; pp_lcnet then ran
 * 1.6-2.0x its 1-thread time, the caller running 7% of the iterations.) */
static inline int64_t adapt_shared(int64_t saved, int64_t all_ns) {
  return saved < -all_ns / 2 ? saved : -all_ns / 2;
}

#endif /* EMBER_POOL_ADAPT_H_ */
