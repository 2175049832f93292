/*
 * ember: numpy's legacy RandomState (MT19937) as C kernels, bit for bit; see
 * ember/codegen/c/random.py for the algorithms. Generated C includes this text with its
 * kernels static; the runtime library (runtime.c) defines EMBER_RNG_API as exported, so
 * that code from the llvm and llvmjit targets calls the same kernels.
 */
#include <math.h>
#include <stdint.h>

#ifndef EMBER_RNG_API
#define EMBER_RNG_API static __attribute__((unused))
#endif

typedef struct {
  uint32_t key[624];
  int32_t pos;
  int32_t has_gauss;
  double gauss;
} ember_mt;

static void __attribute__((unused)) ember_mt_seed(ember_mt* s, uint32_t seed) {
  s->key[0] = seed;
  for (int32_t i = 1; i < 624; ++i) {
    uint32_t prev = s->key[i - 1];
    s->key[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
  }
  s->pos = 624;
  s->has_gauss = 0;
  s->gauss = 0.0;
}

static void ember_mt_refill(ember_mt* s) {
  uint32_t* k = s->key;
  for (int32_t i = 0; i < 624; ++i) {
    uint32_t y = (k[i] & 0x80000000u) | (k[(i + 1) % 624] & 0x7fffffffu);
    k[i] = k[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }
  s->pos = 0;
}

static uint32_t ember_mt_next32(ember_mt* s) {
  if (s->pos >= 624) ember_mt_refill(s);
  uint32_t y = s->key[s->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

static double ember_mt_double(ember_mt* s) {
  uint32_t a = ember_mt_next32(s) >> 5;
  uint32_t b = ember_mt_next32(s) >> 6;
  return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

static double __attribute__((unused)) ember_mt_gauss(ember_mt* s) {
  if (s->has_gauss) {
    s->has_gauss = 0;
    return s->gauss;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * ember_mt_double(s) - 1.0;
    x2 = 2.0 * ember_mt_double(s) - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  double f = sqrt(-2.0 * log(r2) / r2);
  s->gauss = f * x1;
  s->has_gauss = 1;
  return f * x2;
}

EMBER_RNG_API int32_t
ember_rng_uniform(double* out, int64_t n, double low, double high, int64_t seed, void* state) {
  ember_mt* s = (ember_mt*)state;
  ember_mt_seed(s, (uint32_t)seed);
  double range = high - low;
  for (int64_t i = 0; i < n; ++i) out[i] = low + range * ember_mt_double(s);
  return 0;
}

EMBER_RNG_API int32_t
ember_rng_normal(double* out, int64_t n, double mean, double scale, int64_t seed, void* state) {
  ember_mt* s = (ember_mt*)state;
  ember_mt_seed(s, (uint32_t)seed);
  for (int64_t i = 0; i < n; ++i) out[i] = mean + scale * ember_mt_gauss(s);
  return 0;
}

/* numpy's binomial inversion for n = 1: bound = min(1, p + 10 sqrt(p q + 1)) = 1 */
static int64_t __attribute__((unused)) ember_rng_inversion1(ember_mt* s, double p) {
  double q = 1.0 - p;
  double qn = exp(1.0 * log(q));
  double px = qn;
  double u = ember_mt_double(s);
  int64_t x = 0;
  while (u > px) {
    x++;
    if (x > 1) {
      x = 0;
      px = qn;
      u = ember_mt_double(s);
    } else {
      u -= px;
      px = ((double)(1 - x + 1) * p * px) / ((double)x * q);
    }
  }
  return x;
}

EMBER_RNG_API int32_t
ember_rng_bernoulli(const double* p, double* out, int64_t n, int64_t seed, void* state) {
  ember_mt* s = (ember_mt*)state;
  for (int64_t i = 0; i < n; ++i) {
    if (!(p[i] >= 0.0 && p[i] <= 1.0)) return 1;
  }
  ember_mt_seed(s, (uint32_t)seed);
  for (int64_t i = 0; i < n; ++i) {
    double v = p[i];
    out[i] = v <= 0.5 ? (double)ember_rng_inversion1(s, v)
                      : (double)(1 - ember_rng_inversion1(s, 1.0 - v));
  }
  return 0;
}

/* state is followed by `classes` doubles of cdf */
EMBER_RNG_API int32_t
ember_rng_multinomial(const double* x, int64_t* out, int64_t rows, int64_t classes,
                      int64_t samples, int64_t seed, void* state) {
  ember_mt* s = (ember_mt*)state;
  double* cdf = (double*)((char*)state + sizeof(ember_mt));
  ember_mt_seed(s, (uint32_t)seed);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = x + r * classes;
    double top = row[0];
    for (int64_t c = 1; c < classes; ++c) top = row[c] > top ? row[c] : top;
    double acc = 0.0;
    for (int64_t c = 0; c < classes; ++c) {
      acc += exp(row[c] - top);
      cdf[c] = acc;
    }
    for (int64_t c = 0; c < classes; ++c) cdf[c] /= acc;
    for (int64_t k = 0; k < samples; ++k) {
      double u = ember_mt_double(s);
      int64_t lo = 0, hi = classes;
      while (lo < hi) { /* first index whose cdf exceeds u */
        int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] <= u) lo = mid + 1; else hi = mid;
      }
      out[r * samples + k] = lo;
    }
  }
  return 0;
}
