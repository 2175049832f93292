"""C source of ``ember_f32_conv_tile2``: ember_f32_conv_tile (ember/codegen/c/f32_kernels.py)
for two blocks of 16 output channels at once, appended to that kernel's text (it uses its
macros and helpers).

The accumulators of a tile are ``ncols`` positions x 32 channels (``acc[j * 32 + lane]``,
lanes 16-31 the second block), the first block's weights at ``w + woff`` and the second's
``wb`` floats further (the packed weight's next block: the layout stays the one of blocks of
16); the positions, reduction loops and their strides are ember_f32_conv_tile's. With AVX-512
a register tile keeps two zmm accumulators per position for up to EMBER_F32P_MAX_TILE
positions: per reduction step two weight vectors are loaded and kept in registers, and every
position's input is broadcast into a register once and serves both blocks' FMAs (one load
per two FMAs, instead of ember_f32_conv_tile's embedded broadcast per FMA; the multi-block
flat 1x1 tiles' idea, ember.ops.nn_conv_flat). Wider tiles (whole images, bands of rows)
are split into register tiles and run over chunks of the reduction as in
ember_f32_conv_tile, each register tile prefetching a share of the next chunk's weights of
both blocks. Every accumulator receives the fused multiply-adds of the loop IR in its order
(bitwise equal to it and to two calls of ember_f32_conv_tile). Without AVX-512: plain C with
``fmaf``.

``ember_f32_conv_tile2_pad`` is the same kernel on an unpadded input: up to EMBER_F32P_CONDS
conjuncts ``base + pr * row + pc * col + k0 * i0 + k1 * i1 >= 0`` say where a position's
tap (i0, i1) lies inside it. The rectangle of positions whose every tap is inside runs the
register tiles above; the others (the edge) run register tiles of their own, which read per
tap either the position's input or a static row of zeros, so that the padding's +0 products
are added as with a padded copy (the same bits).
"""

from __future__ import annotations

#: the call_extern names this file defines: the kernel, and the kernel reading an unpadded
#: input (positions' taps in the padding read +0, conjuncts of ``EMBER_F32P_CONDS``).
PAIR_KERNEL_NAME = "ember_f32_conv_tile2"
PAIR_PAD_KERNEL_NAME = "ember_f32_conv_tile2_pad"

#: the most conjuncts of a padding (EMBER_F32P_CONDS): two per spatial axis of a 2-D
#: convolution (ember.ops.nn_conv_pair.PAD_CONDS is the same number).
PAD_CONDS = 4

#: the most positions of one register tile (two zmm accumulators each: 14 of 32 at 7, with
#: two weights and a broadcast 17). Tiles of at most 6 / 8 positions against 7 (ResNet-50's
#: 3x3 layers at 56x56 to 7x7, one thread, thread CPU time, A/B in one process, load 23):
#: 1.00-1.03 / 0.99-1.03, level; ember.ops.nn_conv_pair.PAIR_MAX_COLS is the same number.
PAIR_MAX_TILE = 7

#: the reduction steps of a chunk (EMBER_F32P_CHUNK), as ember_f32_conv_tile's AVX512_CHUNK.
#: Chunks of 256 / 384 / 512 / 2048 steps measured level with 1024 (ResNet-50's 3x3 layers,
#: one thread, thread CPU time, A/B in one process, load 13-20: within the noise of 5%), and
#: so did spreading a register tile's prefetches of the next chunk over its whole flat loop
#: instead of one per step from its start (7x7 to 28x28 layers 0.95-0.98, then 0.94-1.07).
PAIR_CHUNK = 1024

_PAIR_TEMPLATE = r"""/* the padding of ember_f32_conv_tile2_pad: position j (row r, column c
   of its tile) reads its input at tap (i0, i1) when every conjunct q has
   base[q] + pr[q] * r + pc[q] * c + k0[q] * i0 + k1[q] * i1 >= 0, and +0 elsewhere */
#define EMBER_F32P_CONDS @CONDS@
typedef struct {
  int32_t n;
  int32_t base[EMBER_F32P_CONDS], pr[EMBER_F32P_CONDS], pc[EMBER_F32P_CONDS];
  int32_t k0[EMBER_F32P_CONDS], k1[EMBER_F32P_CONDS];
} ember_f32p_bounds;
#if defined(__AVX512F__)
#define EMBER_F32P_MAX_TILE @MAX@
#define EMBER_F32P_CHUNK @CHUNK@
/* one reduction step of a register tile: both blocks' weights at wk times position j's
   input XJ (an expression of j), into a0[j] and a1[j] */
#define EMBER_F32P_STEP(NC, XJ)                                                            \
  {                                                                                        \
    __m512 w0 = _mm512_loadu_ps(wk), w1 = _mm512_loadu_ps(wk + wb);                        \
    EMBER_F32_KEEP(w0);                                                                    \
    EMBER_F32_KEEP(w1);                                                                    \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                \
      const __m512 b = _mm512_set1_ps(XJ);                                                 \
      a0[j] = _mm512_fmadd_ps(b, w0, a0[j]);                                               \
      a1[j] = _mm512_fmadd_ps(b, w1, a1[j]);                                               \
    }                                                                                      \
  }
/* a register tile's accumulators a0, a1 from acc + ao[j], and back */
#define EMBER_F32P_LOAD(NC)                                                                \
  __m512 a0[NC], a1[NC];                                                                   \
  _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                  \
    a0[j] = _mm512_loadu_ps(acc + ao[j]);                                                  \
    a1[j] = _mm512_loadu_ps(acc + ao[j] + 16);                                             \
  }
#define EMBER_F32P_STORE(NC)                                                               \
  _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                  \
    _mm512_storeu_ps(acc + ao[j], a0[j]);                                                  \
    _mm512_storeu_ps(acc + ao[j] + 16, a1[j]);                                             \
  }
/* a register tile of NC positions x 2 blocks of 16 channels */
#define EMBER_F32P_TILE(NC)                                                                  \
  static __attribute__((noinline, unused)) void ember_f32p_tile_##NC(                      \
      float* acc, const float* x, const float* w, const int64_t* off, const int64_t* ao,   \
      int64_t e0,                                                                          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2, int64_t wb) {                                              \
    const float* pf = ember_f32_pf;                                                        \
    int64_t npf = pf != NULL ? ember_f32_npf : 0;                                          \
    const int64_t pfs = ember_f32_pfs;                                                     \
    ember_f32_pf = NULL;                                                                   \
    EMBER_F32P_LOAD(NC);                                                                   \
    const float* xp[NC];                                                                   \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) xp[j] = x + off[j];              \
    if (e0 * e1 == 1) { /* one loop (chunks of a long innermost loop): a flat nest */     \
      const float* wk = w;                                                                 \
      for (int64_t xk = 0; xk < e2 * xs2; xk += xs2) {                                     \
        if (npf > 0) {                                                                     \
          _mm_prefetch((const char*)pf, _MM_HINT_T0);                                      \
          _mm_prefetch((const char*)(pf + wb), _MM_HINT_T0);                               \
          pf += pfs;                                                                       \
          --npf;                                                                           \
        }                                                                                  \
        EMBER_F32P_STEP(NC, xp[j][xk]);                                                    \
        wk += ws2;                                                                         \
      }                                                                                    \
      e0 = 0;                                                                              \
    }                                                                                      \
    for (int64_t i0 = 0; i0 < e0; ++i0) {                                                  \
      for (int64_t i1 = 0; i1 < e1; ++i1) {                                                \
        int64_t xk = i0 * xs0 + i1 * xs1;                                                  \
        const float* wk = w + i0 * ws0 + i1 * ws1;                                         \
        for (int64_t i2 = 0; i2 < e2; ++i2) {                                              \
          EMBER_F32P_STEP(NC, xp[j][xk]);                                                  \
          xk += xs2;                                                                       \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    EMBER_F32P_STORE(NC);                                                                  \
  }
@TILES@
#define EMBER_F32P_LOOPS e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2, wb
/* what a position reads at a tap in the padding: an innermost loop of at most
   EMBER_F32P_CHUNK floats' stride (checked where the call is made) */
static const float ember_f32p_zeros[EMBER_F32P_CHUNK] __attribute__((aligned(64)));
/* the taps i1 < 64 where v + k1 * i1 >= 0, as bits */
static inline uint64_t ember_f32p_span(int32_t v, int32_t k1) {
  if (k1 == 0) return v >= 0 ? ~(uint64_t)0 : 0;
  if (k1 > 0) { /* i1 >= ceil(-v / k1) */
    if (v >= 0) return ~(uint64_t)0;
    const int32_t lo = (-v + k1 - 1) / k1;
    return lo >= 64 ? 0 : ~(uint64_t)0 << lo;
  }
  if (v < 0) return 0; /* i1 <= floor(v / -k1) */
  const int32_t hi = v / -k1;
  return hi >= 63 ? ~(uint64_t)0 : ((uint64_t)2 << hi) - 1;
}
/* in[j] bit i1 (of at most 64): every conjunct of position j holds at tap (i0, i1) */
static inline void ember_f32p_inside(uint64_t* in, int32_t nc, const int32_t* v,
                                     const ember_f32p_bounds* bd, int64_t i0) {
  for (int32_t j = 0; j < nc; ++j) {
    uint64_t bits = ~(uint64_t)0;
    for (int32_t q = 0; q < bd->n; ++q)
      bits &= ember_f32p_span(v[j * EMBER_F32P_CONDS + q] + bd->k0[q] * (int32_t)i0,
                              bd->k1[q]);
    in[j] = bits;
  }
}
/* a register tile of edge positions (ember_f32p_order): per tap, each
   position's input row or the zeros, then the tile's fused multiply-adds as in
   EMBER_F32P_TILE (the padding's +0 products too: bitwise equal to a padded copy) */
#define EMBER_F32P_EDGE(NC)                                                                  \
  static __attribute__((noinline, unused)) void ember_f32p_edge_##NC(                      \
      float* acc, const float* x, const float* w, const int64_t* off, const int64_t* ao,   \
      int64_t e0,                                                                          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2, int64_t wb, const int32_t* v,                              \
      const ember_f32p_bounds* bd) {                                                       \
    const float* pf = ember_f32_pf;                                                        \
    const int64_t pfs = ember_f32_pfs;                                                     \
    for (int64_t k = pf != NULL ? ember_f32_npf : 0; k > 0; --k, pf += pfs) {              \
      _mm_prefetch((const char*)pf, _MM_HINT_T0);                                          \
      _mm_prefetch((const char*)(pf + wb), _MM_HINT_T0);                                   \
    }                                                                                      \
    ember_f32_pf = NULL;                                                                   \
    EMBER_F32P_LOAD(NC);                                                                   \
    for (int64_t i0 = 0; i0 < e0; ++i0) {                                                  \
      uint64_t in[NC]; /* bit i1: the position reads its input at tap (i0, i1) */          \
      ember_f32p_inside(in, NC, v, bd, i0);                                                \
      for (int64_t i1 = 0; i1 < e1; ++i1) {                                                \
        const float* xq[NC];                                                               \
        _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                            \
          xq[j] = in[j] >> i1 & 1 ? x + (off[j] + i0 * xs0 + i1 * xs1) : ember_f32p_zeros;  \
        }                                                                                  \
        const float* wk = w + i0 * ws0 + i1 * ws1;                                         \
        int64_t xk = 0;                                                                    \
        for (int64_t i2 = 0; i2 < e2; ++i2) {                                              \
          EMBER_F32P_STEP(NC, xq[j][xk]);                                                  \
          xk += xs2;                                                                       \
          __asm__("" : "+r"(xk)); /* indexed reads, not NC pointers stepped */          \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    EMBER_F32P_STORE(NC);                                                                  \
  }
@EDGES@
#define EMBER_F32P_EDGE_ARGS EMBER_F32P_LOOPS, v, bd
static inline void ember_f32p_edge_n(int32_t nc, float* acc, const float* x, const float* w,
                                     const int64_t* off, const int64_t* ao, int64_t e0,
                                     int64_t xs0, int64_t ws0,
                                     int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,
                                     int64_t xs2, int64_t ws2, int64_t wb, const int32_t* v,
                                     const ember_f32p_bounds* bd) {
  switch (nc) {
@EDGE_CASES@
  }
}
static inline void ember_f32p_tile_n(int32_t nc, float* acc, const float* x, const float* w,
                                     const int64_t* off, const int64_t* ao, int64_t e0,
                                     int64_t xs0, int64_t ws0,
                                     int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,
                                     int64_t xs2, int64_t ws2, int64_t wb) {
  /* loops that step on where the inner one ends (a row's taps over contiguous channels)
     run as one: fewer loop starts, the same steps in the same order */
  if (e1 > 1 && xs1 == e2 * xs2 && ws1 == e2 * ws2) {
    e2 *= e1;
    e1 = 1;
  }
  switch (nc) {
@CASES@
  }
}
/* accumulator offsets of a tile's positions when they follow each other */
static const int64_t ember_f32p_seq[EMBER_F32P_MAX_TILE] = {@SEQ@};
/* the positions of a ember_f32_conv_tile2_pad call whose every tap is inside the input:
   rows r0..r1 x columns c0..c1 of the call's rows of tcols (each conjunct bounds the row or
   the column alone; one bounding both leaves the rectangle empty). The others are the
   edge: each set in register tiles of its own, the second's through ember_f32p_edge_##NC */
typedef struct {
  const ember_f32p_bounds* bd;
  int32_t ncols, tcols, r0, r1, c0, c1;
} ember_f32p_order;
/* floor(a / b) for b > 0 */
static inline int64_t ember_f32p_floordiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
/* narrow [*lo, *hi] to the x where a + p * x >= 0 */
static inline void ember_f32p_clip(int64_t a, int64_t p, int64_t* lo, int64_t* hi) {
  if (p > 0) {
    const int64_t m = -ember_f32p_floordiv(a, p); /* ceil(-a / p) */
    if (m > *lo) *lo = m;
  } else if (p < 0) {
    const int64_t m = ember_f32p_floordiv(a, -p);
    if (m < *hi) *hi = m;
  } else if (a < 0) {
    *lo = 1;
    *hi = 0;
  }
}
static void ember_f32p_order_of(ember_f32p_order* o, const ember_f32p_bounds* bd,
                                int32_t ncols, int32_t tcols, int64_t e0, int64_t e1) {
  int64_t r0 = 0, r1 = (ncols - 1) / tcols, c0 = 0, c1 = tcols - 1;
  for (int32_t q = 0; q < bd->n; ++q) {
    const int64_t d0 = (int64_t)bd->k0[q] * (e0 - 1), d1 = (int64_t)bd->k1[q] * (e1 - 1);
    const int64_t a = bd->base[q] + (d0 < 0 ? d0 : 0) + (d1 < 0 ? d1 : 0); /* least tap */
    if (bd->pr[q] != 0 && bd->pc[q] != 0) {
      r0 = 1;
      r1 = 0;
    } else if (bd->pc[q] != 0) {
      ember_f32p_clip(a, bd->pc[q], &c0, &c1);
    } else {
      ember_f32p_clip(a, bd->pr[q], &r0, &r1);
    }
  }
  const int64_t full = ncols / tcols - 1; /* the last whole row */
  if (r1 > full) r1 = full;
  if (r0 > r1 || c0 > c1) { /* no interior */
    r0 = 1;
    r1 = 0;
    c0 = 0;
    c1 = -1;
  }
  o->bd = bd;
  o->ncols = ncols;
  o->tcols = tcols;
  o->r0 = (int32_t)r0;
  o->r1 = (int32_t)r1;
  o->c0 = (int32_t)c0;
  o->c1 = (int32_t)c1;
}
/* how many positions the order's rectangle holds */
static inline int32_t ember_f32p_inner(const ember_f32p_order* o) {
  return o->r0 > o->r1 ? 0 : (o->r1 - o->r0 + 1) * (o->c1 - o->c0 + 1);
}
/* the next nc positions outside the rectangle (row-major, from (*r, *c)) */
static inline void ember_f32p_take_edge(const ember_f32p_order* o, int32_t* r, int32_t* c,
                                        int32_t nc, int32_t* rs, int32_t* cs) {
  for (int32_t j = 0; j < nc; ++j) {
    for (;;) {
      if (*c >= o->tcols) {
        *c = 0;
        ++*r;
      } else if (*r >= o->r0 && *r <= o->r1 && *c >= o->c0 && *c <= o->c1) {
        *c = o->c1 + 1;
      } else {
        break;
      }
    }
    rs[j] = *r;
    cs[j] = *c;
    ++*c;
  }
}
/* the weights' prefetches of register tile t of ntiles in a chunk of e0 x e1 x e2 steps
   (pw: the next chunk's weights, NULL for none) */
static inline void ember_f32p_share(const float* pw, int32_t t, int32_t ntiles, int64_t e0,
                                    int64_t ws0, int64_t e1, int64_t ws1, int64_t e2,
                                    int64_t ws2, int64_t wb) {
  const int64_t steps = e0 * e1 * e2;
  if (pw == NULL) return;
  if (e0 * e1 == 1 && steps >= 2 * ntiles) { /* in the tile's flat loop */
    ember_f32_pf = pw + steps * t / ntiles * ws2;
    ember_f32_npf = steps * (t + 1) / ntiles - steps * t / ntiles;
    ember_f32_pfs = ws2;
    return;
  }
  int64_t s = steps * t / ntiles; /* steps s of the tile's share, (s0, s1, s2) counted along */
  int64_t s0 = s / (e1 * e2), s1 = s / e2 % e1, s2 = s % e2;
  for (; s < steps * (t + 1) / ntiles; ++s) {
    const float* p = pw + s0 * ws0 + s1 * ws1 + s2 * ws2;
    _mm_prefetch((const char*)p, _MM_HINT_T0);
    _mm_prefetch((const char*)(p + wb), _MM_HINT_T0);
    if (++s2 == e2) {
      s2 = 0;
      if (++s1 == e1) {
        s1 = 0;
        ++s0;
      }
    }
  }
}
/* every register tile of a chunk in turn (ember_f32_tiles for two blocks): ntiles of
   positions following each other from 0 without an order, else the order's two sets at
   tap (t0, t1) */
static inline void ember_f32p_tiles(float* acc, const float* x, const float* w, int64_t xk,
                                    int32_t ntiles, int32_t small, int32_t big, int32_t tcols,
                                    int32_t cx, int32_t cr, int64_t e0, int64_t xs0,
                                    int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1,
                                    int64_t e2, int64_t xs2, int64_t ws2, int64_t wb,
                                    const float* pw, const ember_f32p_order* o, int64_t t0,
                                    int64_t t1) {
  if (o == NULL) {
    int32_t j0 = 0;
    for (int32_t t = 0; t < ntiles; ++t) {
      const int32_t nc = small + (t < big);
      ember_f32p_share(pw, t, ntiles, e0, ws0, e1, ws1, e2, ws2, wb);
      int64_t off[EMBER_F32P_MAX_TILE];
      ember_f32_offsets(off, xk, j0, nc, tcols, cx, cr);
      ember_f32p_tile_n(nc, acc + 32 * (int64_t)j0, x, w, off, ember_f32p_seq,
                        EMBER_F32P_LOOPS);
      j0 += nc;
    }
    return;
  }
  const ember_f32p_bounds* bd = o->bd;
  const int32_t m = EMBER_F32P_MAX_TILE, n_in = ember_f32p_inner(o), n_edge = o->ncols - n_in;
  const int32_t t_in = (n_in + m - 1) / m, t_edge = (n_edge + m - 1) / m;
  const int32_t all = t_in + t_edge;
  int64_t off[EMBER_F32P_MAX_TILE], ao[EMBER_F32P_MAX_TILE];
  if (t_in > 0) { /* the rectangle's positions: offsets stepped as in ember_f32_offsets */
    const int32_t small_in = n_in / t_in, big_in = n_in % t_in, c0 = o->c0, c1 = o->c1;
    const int64_t row_x = cr - (int64_t)(c1 - c0) * cx, row_a = 32 * (tcols - (c1 - c0));
    int32_t c = c0;
    int64_t xo = xk + (int64_t)o->r0 * cr + (int64_t)c0 * cx;
    int64_t a = 32 * ((int64_t)o->r0 * tcols + c0);
    for (int32_t t = 0; t < t_in; ++t) {
      const int32_t nc = small_in + (t < big_in);
      ember_f32p_share(pw, t, all, e0, ws0, e1, ws1, e2, ws2, wb);
      for (int32_t k = 0; k < nc; ++k) {
        off[k] = xo;
        ao[k] = a;
        if (c++ == c1) {
          c = c0;
          xo += row_x;
          a += row_a;
        } else {
          xo += cx;
          a += 32;
        }
      }
      ember_f32p_tile_n(nc, acc, x, w, off, ao, EMBER_F32P_LOOPS);
    }
  }
  if (t_edge == 0) return;
  const int32_t small_edge = n_edge / t_edge, big_edge = n_edge % t_edge;
  int32_t r = 0, c = 0;
  for (int32_t t = 0; t < t_edge; ++t) {
    const int32_t nc = small_edge + (t < big_edge);
    ember_f32p_share(pw, t_in + t, all, e0, ws0, e1, ws1, e2, ws2, wb);
    int32_t rs[EMBER_F32P_MAX_TILE], cs[EMBER_F32P_MAX_TILE];
    int32_t v[EMBER_F32P_MAX_TILE * EMBER_F32P_CONDS] = {0};
    ember_f32p_take_edge(o, &r, &c, nc, rs, cs);
    for (int32_t k = 0; k < nc; ++k) {
      off[k] = xk + (int64_t)rs[k] * cr + (int64_t)cs[k] * cx;
      ao[k] = 32 * ((int64_t)rs[k] * tcols + cs[k]);
      for (int32_t q = 0; q < bd->n; ++q)
        v[k * EMBER_F32P_CONDS + q] = bd->base[q] + bd->pr[q] * rs[k] + bd->pc[q] * cs[k] +
                                      (int32_t)(bd->k0[q] * t0 + bd->k1[q] * t1);
    }
    ember_f32p_edge_n(nc, acc, x, w, off, ao, EMBER_F32P_EDGE_ARGS);
  }
}
/* the reduction of a call in chunks of about EMBER_F32P_CHUNK steps, each over all its
   register tiles (ember_f32p_tiles; next: the weights to prefetch last) */
static inline void ember_f32p_chunks(float* acc, const float* x, const float* w, int64_t xoff,
                                     int32_t ntiles, int32_t small, int32_t big,
                                     int32_t tcols, int32_t cx, int32_t cr, int64_t e0,
                                     int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1,
                                     int64_t ws1, int64_t e2, int64_t xs2, int64_t ws2,
                                     int64_t wb, const float* next,
                                     const ember_f32p_order* o) {
  if (e1 * e2 < EMBER_F32P_CHUNK && e0 > 1) {
    const int64_t inner = e1 * e2;
    const int64_t n0 = inner > 0 && EMBER_F32P_CHUNK / inner > 0 ? EMBER_F32P_CHUNK / inner : 1;
    for (int64_t c0 = 0; c0 < e0; c0 += n0) {
      const int64_t m0 = e0 - c0 < n0 ? e0 - c0 : n0;
      const float* pw = c0 + n0 < e0 ? w + (c0 + n0) * ws0 : next;
      ember_f32p_tiles(acc, x, w + c0 * ws0, xoff + c0 * xs0, ntiles, small, big, tcols, cx,
                       cr, m0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2, wb, pw, o, c0, 0);
    }
    return;
  }
  for (int64_t i0 = 0; i0 < e0; ++i0) {
    for (int64_t i1 = 0; i1 < e1; ++i1) {
      for (int64_t c0 = 0; c0 < e2; c0 += EMBER_F32P_CHUNK) {
        const int64_t n2 = e2 - c0 < EMBER_F32P_CHUNK ? e2 - c0 : EMBER_F32P_CHUNK;
        const float* wk = w + i0 * ws0 + i1 * ws1 + c0 * ws2;
        const int64_t xk = xoff + i0 * xs0 + i1 * xs1 + c0 * xs2;
        const float* pw = c0 + EMBER_F32P_CHUNK < e2 ? wk + EMBER_F32P_CHUNK * ws2
                          : i1 + 1 < e1              ? w + i0 * ws0 + (i1 + 1) * ws1
                          : i0 + 1 < e0              ? w + (i0 + 1) * ws0
                                                     : next;
        ember_f32p_tiles(acc, x, wk, xk, ntiles, small, big, tcols, cx, cr, 1, 0, 0, 1, 0, 0,
                         n2, xs2, ws2, wb, pw, o, i0, i1);
      }
    }
  }
}
#endif

/* ember_f32_conv_tile2 and ember_f32_conv_tile2_pad (bd: NULL for the first) */
static inline int32_t ember_f32p_run(float* acc, const float* x, const float* w, int64_t xoff,
                                     int64_t woff, int32_t ncols, int32_t tcols, int32_t cx,
                                     int32_t cr, int32_t e0, int32_t xs0, int32_t ws0,
                                     int32_t e1, int32_t xs1, int32_t ws1, int32_t e2,
                                     int32_t xs2, int32_t ws2, int32_t wb,
                                     const ember_f32p_bounds* bd) {
  if (ncols < 1) return 0;
  w += woff;
#if defined(__AVX512F__)
  /* the last chunk prefetches the next pair of blocks (2 * wb further) unless the previous
     call on this thread took this pair (bands of rows) */
  const float* next = w == ember_f32_last_block ? NULL : w + 2 * (int64_t)wb;
  ember_f32_last_block = w;
  if (bd != NULL) {
    ember_f32p_order o;
    ember_f32p_order_of(&o, bd, ncols, tcols, e0, e1);
    ember_f32p_chunks(acc, x, w, xoff, 0, 0, 0, tcols, cx, cr, EMBER_F32P_LOOPS, next, &o);
    return 0;
  }
  const int32_t ntiles = (ncols + EMBER_F32P_MAX_TILE - 1) / EMBER_F32P_MAX_TILE;
  const int32_t small = ncols / ntiles, big = ncols % ntiles;
  if (ntiles == 1) {
    int64_t off[EMBER_F32P_MAX_TILE];
    ember_f32_offsets(off, xoff, 0, ncols, tcols, cx, cr);
    ember_f32p_tile_n(ncols, acc, x, w, off, ember_f32p_seq, EMBER_F32P_LOOPS);
    return 0;
  }
  ember_f32p_chunks(acc, x, w, xoff, ntiles, small, big, tcols, cx, cr, EMBER_F32P_LOOPS, next,
                    NULL);
  return 0;
#else
  for (int64_t i0 = 0; i0 < e0; ++i0)
    for (int64_t i1 = 0; i1 < e1; ++i1)
      for (int64_t i2 = 0; i2 < e2; ++i2) {
        const float* wk = w + i0 * ws0 + i1 * ws1 + i2 * ws2;
        const int64_t xk = xoff + i0 * xs0 + i1 * xs1 + i2 * xs2;
        for (int32_t j = 0; j < ncols; ++j) {
          int in = 1;
          for (int32_t q = 0; bd != 0 && q < bd->n; ++q)
            in &= bd->base[q] + bd->pr[q] * (j / tcols) + bd->pc[q] * (j % tcols) +
                      bd->k0[q] * (int32_t)i0 + bd->k1[q] * (int32_t)i1 >= 0;
          const float b =
              in ? x[xk + (int64_t)(j / tcols) * cr + (int64_t)(j % tcols) * cx] : 0.0f;
          for (int l = 0; l < 32; ++l) {
            const float wl = l < 16 ? wk[l] : wk[wb + l - 16];
            acc[32 * j + l] = fmaf(b, wl, acc[32 * j + l]);
          }
        }
      }
  return 0;
#endif
}

/* ember_f32_conv_tile for two blocks of 16 output channels, the second's weights wb floats
   after the first's: acc[j][0:32] (see ember/codegen/c/f32_pair.py); returns 0 */
EMBER_F32_API int32_t ember_f32_conv_tile2(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0, int32_t ws0, int32_t e1,
    int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2, int32_t wb) {
  return ember_f32p_run(acc, x, w, xoff, woff, ncols, tcols, cx, cr, e0, xs0, ws0, e1, xs1,
                        ws1, e2, xs2, ws2, wb, 0);
}

/* ember_f32_conv_tile2 reading the unpadded input: conjunct q of the nb (at most
   EMBER_F32P_CONDS) is (bq, prq, pcq, k0q, k1q) of ember_f32p_bounds; positions read +0
   at taps where one fails (see ember/codegen/c/f32_pair.py); returns 0 */
EMBER_F32_API int32_t ember_f32_conv_tile2_pad(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0, int32_t ws0, int32_t e1,
    int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2, int32_t wb, int32_t nb,
    int32_t b0, int32_t pr0, int32_t pc0, int32_t k00, int32_t k10, int32_t b1, int32_t pr1,
    int32_t pc1, int32_t k01, int32_t k11, int32_t b2, int32_t pr2, int32_t pc2, int32_t k02,
    int32_t k12, int32_t b3, int32_t pr3, int32_t pc3, int32_t k03, int32_t k13) {
  if (nb < 0 || nb > EMBER_F32P_CONDS) return -1;
  const ember_f32p_bounds bd = {nb,
                                {b0, b1, b2, b3},
                                {pr0, pr1, pr2, pr3},
                                {pc0, pc1, pc2, pc3},
                                {k00, k01, k02, k03},
                                {k10, k11, k12, k13}};
  return ember_f32p_run(acc, x, w, xoff, woff, ncols, tcols, cx, cr, e0, xs0, ws0, e1, xs1,
                        ws1, e2, xs2, ws2, wb, &bd);
}
"""


def _pair_text() -> str:
    """The template with the register tiles of 1 to PAIR_MAX_TILE positions."""
    tiles = "".join(f"EMBER_F32P_TILE({n})\n" for n in range(1, PAIR_MAX_TILE + 1))
    cases = [
        f"    case {n}: ember_f32p_tile_{n}(acc, x, w, off, ao, EMBER_F32P_LOOPS); break;\n"
        for n in range(1, PAIR_MAX_TILE)
    ]
    last = (
        f"    default: ember_f32p_tile_{PAIR_MAX_TILE}(acc, x, w, off, ao, EMBER_F32P_LOOPS);"
        " break;"
    )
    edges = "".join(f"EMBER_F32P_EDGE({n})\n" for n in range(1, PAIR_MAX_TILE + 1))
    edge_cases = [
        f"    case {n}: ember_f32p_edge_{n}(acc, x, w, off, ao, EMBER_F32P_EDGE_ARGS); break;\n"
        for n in range(1, PAIR_MAX_TILE)
    ]
    edge_last = (
        f"    default: ember_f32p_edge_{PAIR_MAX_TILE}(acc, x, w, off, ao, EMBER_F32P_EDGE_ARGS);"
        " break;"
    )
    text = _PAIR_TEMPLATE.replace("@TILES@\n", tiles).replace("@CASES@", "".join(cases) + last)
    text = text.replace("@EDGES@\n", edges).replace("@EDGE_CASES@", "".join(edge_cases) + edge_last)
    text = text.replace("@CONDS@", str(PAD_CONDS))
    seq = ", ".join(str(32 * j) for j in range(PAIR_MAX_TILE))
    text = text.replace("@SEQ@", seq)
    return text.replace("@CHUNK@", str(PAIR_CHUNK)).replace("@MAX@", str(PAIR_MAX_TILE))


#: the C text of ember_f32_conv_tile2 (after ember_f32_conv_tile's, whose helpers it uses).
F32_PAIR_C = _pair_text()
