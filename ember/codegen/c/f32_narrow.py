"""C source of the float32 convolution micro-kernels for blocks of 8 and 24 output channels.

``ember_f32_conv_tile8`` and ``ember_f32_conv_tile24`` are ``ember_f32_conv_tile``
(ember/codegen/c/f32_kernels.py) for a packed weight in blocks of 8 or 24 output channels:
they add to ``ncols`` positions x 8 (24) channels of accumulators (``acc[j * 8 + lane]``,
``acc[j * 24 + lane]``) the products of the input and the weight over up to three
reduction loops, with the same arguments and addressing. nn.conv_packed takes blocks of 8
when 16 would pad the weight by more than 1/8 (ember.ir.ops.nn_conv_weights.pack_block: 8, 24, 40
channels) and regroups three of them into one of 24 for the kernel
(ember.ops.nn_conv_narrow_layout). Without these kernels such layers ran loop-IR tiles, where
gcc folds the weight load into each FMA (3x3 96->24 at 80x80 in dbnet: 45 GFLOP/s of 93).

With AVX2 and FMA a register tile keeps NV ymm accumulators per position (NV = 1 or 3) for
up to 8 (4) positions: per reduction step NV weight vectors are loaded once and each
position's input is broadcast once. 24 channels x 4 positions: 12 accumulators, 3 weights,
one broadcast (7 loads per 12 FMAs, like the 16 x 6 tile); 8 channels x 8 positions: one
weight and 8 broadcasts per 8 FMAs (wider tiles spill the input pointers). Wider tiles are
split into register tiles as even as possible and run over chunks of the innermost
reduction loop, as in the 16-channel kernel. Every accumulator receives the fused
multiply-adds in the loop IR's order, so results are bitwise equal to it. Without AVX2:
plain C with ``fmaf``.

With AVX-512 (``__AVX512F__``: c on an AVX-512 CPU, ember.ops.nn_conv_narrow.narrow_avx512)
the kernel of 24 channels keeps up to 12 positions in zmm accumulators instead, three
vectors per pair of positions (see EMBER_F32N_ZTILE), in the same order of fused
multiply-adds (bitwise the AVX2 kernel's sums). dbnet's 3x3 96->24 at 80x80 (one thread,
thread CPU time, load ~9): 82-86% of the FMA limit, 47% on the loop-IR tiles of 8 lanes.
The kernel of 8 channels keeps its AVX2 code (a zmm would hold two positions' 8 channels,
a shuffle per FMA).
"""

from __future__ import annotations

#: the call_extern names this file defines.
NARROW_KERNEL_NAMES: frozenset[str] = frozenset({"ember_f32_conv_tile8", "ember_f32_conv_tile24"})

#: key of the helper block in a FileContext (after f32_kernels.HELPER_KEY).
NARROW_HELPER_KEY = "0e_ember_f32n"

F32_NARROW_C = r"""#ifndef EMBER_F32_API /* exported by the runtime: src/f32_tiles.h */
#define EMBER_F32_API static __attribute__((unused))
#endif
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define EMBER_F32N_KEEP(v) __asm__("" : "+x"(v))
#define EMBER_F32N_CHUNK 256
#define EMBER_F32N_LOOP 1, 0, 0, 1, 0, 0, n2, xs2, ws2
#define EMBER_F32N_LOOPS e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2
/* a register tile of NC positions x NV vectors of 8 channels (NV = 1 or 3) */
#define EMBER_F32N_TILE(NV, NC)                                                              \
  static __attribute__((noinline, unused)) void ember_f32n_tile_##NV##_##NC(               \
      float* acc, const float* x, const float* w, const int64_t* off, int64_t e0,          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2) {                                                          \
    __m256 a0[NC], a1[NC], a2[NC];                                                         \
    const float* xp[NC];                                                                   \
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; ++j) {                                 \
      xp[j] = x + off[j];                                                                  \
      a0[j] = _mm256_loadu_ps(acc + 8 * NV * j);                                           \
      if (NV > 1) a1[j] = _mm256_loadu_ps(acc + 8 * NV * j + 8);                           \
      if (NV > 1) a2[j] = _mm256_loadu_ps(acc + 8 * NV * j + 16);                          \
    }                                                                                      \
    for (int64_t i0 = 0; i0 < e0; ++i0) {                                                  \
      for (int64_t i1 = 0; i1 < e1; ++i1) {                                                \
        int64_t xk = i0 * xs0 + i1 * xs1;                                                  \
        const float* wk = w + i0 * ws0 + i1 * ws1;                                         \
        for (int64_t i2 = 0; i2 < e2; ++i2) {                                              \
          __m256 w0 = _mm256_loadu_ps(wk), w1 = w0, w2 = w0;                               \
          if (NV > 1) {                                                                    \
            w1 = _mm256_loadu_ps(wk + 8);                                                  \
            w2 = _mm256_loadu_ps(wk + 16);                                                 \
            EMBER_F32N_KEEP(w1);                                                           \
            EMBER_F32N_KEEP(w2);                                                           \
          }                                                                                \
          EMBER_F32N_KEEP(w0);                                                             \
          _Pragma("GCC unroll 8") for (int j = 0; j < NC; ++j) {                           \
            const __m256 b = _mm256_broadcast_ss(xp[j] + xk);                              \
            a0[j] = _mm256_fmadd_ps(b, w0, a0[j]);                                         \
            if (NV > 1) a1[j] = _mm256_fmadd_ps(b, w1, a1[j]);                             \
            if (NV > 1) a2[j] = _mm256_fmadd_ps(b, w2, a2[j]);                             \
          }                                                                                \
          xk += xs2;                                                                       \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; ++j) {                                 \
      _mm256_storeu_ps(acc + 8 * NV * j, a0[j]);                                           \
      if (NV > 1) _mm256_storeu_ps(acc + 8 * NV * j + 8, a1[j]);                           \
      if (NV > 1) _mm256_storeu_ps(acc + 8 * NV * j + 16, a2[j]);                          \
    }                                                                                      \
  }
EMBER_F32N_TILE(1, 1)
EMBER_F32N_TILE(1, 2)
EMBER_F32N_TILE(1, 3)
EMBER_F32N_TILE(1, 4)
EMBER_F32N_TILE(1, 5)
EMBER_F32N_TILE(1, 6)
EMBER_F32N_TILE(1, 7)
EMBER_F32N_TILE(1, 8)
EMBER_F32N_TILE(3, 1)
EMBER_F32N_TILE(3, 2)
EMBER_F32N_TILE(3, 3)
EMBER_F32N_TILE(3, 4)

#if defined(__AVX512F__)
/* AVX-512, 24 channels: a register tile of NC positions as ceil(24 NC / 16) zmm vectors
   of the accumulators in memory order. Of each pair of positions (p, q) vector 0 holds
   p's channels 0-15, vector 1 p's 16-23 and q's 0-7, vector 2 q's 8-23: per reduction
   step the weights w0 = w[0:16], w2 = w[8:24] and w1 = (w[16:24], w[0:8]) (one shuffle),
   per pair two broadcasts and one shuffle (a masked blend measured 15% slower). An odd
   last position keeps its channels 16-23 in the low half of a masked vector. */
#define EMBER_F32N_ZV(NC) ((24 * (NC) + 15) / 16)
#define EMBER_F32N_ZTILE(NC)                                                                 \
  static __attribute__((noinline, unused)) void ember_f32n_ztile_##NC(                     \
      float* acc, const float* x, const float* w, const int64_t* off, int64_t e0,          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2) {                                                          \
    __m512 a[EMBER_F32N_ZV(NC)];                                                           \
    const float* xp[NC];                                                                   \
    const __mmask16 last = (NC) % 2 ? 0x00FF : 0xFFFF;                                     \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) xp[j] = x + off[j];              \
    _Pragma("GCC unroll 24") for (int v = 0; v < EMBER_F32N_ZV(NC); ++v) {                 \
      a[v] = v == EMBER_F32N_ZV(NC) - 1 ? _mm512_maskz_loadu_ps(last, acc + 16 * v)         \
                                        : _mm512_loadu_ps(acc + 16 * v);                   \
    }                                                                                      \
    for (int64_t i0 = 0; i0 < e0; ++i0) {                                                  \
      for (int64_t i1 = 0; i1 < e1; ++i1) {                                                \
        int64_t xk = i0 * xs0 + i1 * xs1;                                                  \
        const float* wk = w + i0 * ws0 + i1 * ws1;                                         \
        for (int64_t i2 = 0; i2 < e2; ++i2) {                                              \
          const __m512 w0 = _mm512_loadu_ps(wk), w2 = _mm512_loadu_ps(wk + 8);             \
          const __m512 w1 = _mm512_shuffle_f32x4(w2, w0, 0x4E);                            \
          _Pragma("GCC unroll 16") for (int j = 0; j + 1 < NC; j += 2) {                   \
            const __m512 bp = _mm512_set1_ps(xp[j][xk]);                                   \
            const __m512 bq = _mm512_set1_ps(xp[j + 1][xk]);                               \
            const __m512 bm = _mm512_shuffle_f32x4(bp, bq, 0);                            \
            a[3 * j / 2] = _mm512_fmadd_ps(bp, w0, a[3 * j / 2]);                          \
            a[3 * j / 2 + 1] = _mm512_fmadd_ps(bm, w1, a[3 * j / 2 + 1]);                  \
            a[3 * j / 2 + 2] = _mm512_fmadd_ps(bq, w2, a[3 * j / 2 + 2]);                  \
          }                                                                                \
          if ((NC) % 2) {                                                                  \
            const __m512 bp = _mm512_set1_ps(xp[(NC) - 1][xk]);                            \
            a[3 * ((NC) / 2)] = _mm512_fmadd_ps(bp, w0, a[3 * ((NC) / 2)]);                \
            a[3 * ((NC) / 2) + 1] = _mm512_fmadd_ps(bp, w1, a[3 * ((NC) / 2) + 1]);        \
          }                                                                                \
          xk += xs2;                                                                       \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    _Pragma("GCC unroll 24") for (int v = 0; v < EMBER_F32N_ZV(NC); ++v) {                 \
      if (v == EMBER_F32N_ZV(NC) - 1)                                                      \
        _mm512_mask_storeu_ps(acc + 16 * v, last, a[v]);                                   \
      else                                                                                 \
        _mm512_storeu_ps(acc + 16 * v, a[v]);                                              \
    }                                                                                      \
  }
EMBER_F32N_ZTILE(1)
EMBER_F32N_ZTILE(2)
EMBER_F32N_ZTILE(3)
EMBER_F32N_ZTILE(4)
EMBER_F32N_ZTILE(5)
EMBER_F32N_ZTILE(6)
EMBER_F32N_ZTILE(7)
EMBER_F32N_ZTILE(8)
EMBER_F32N_ZTILE(9)
EMBER_F32N_ZTILE(10)
EMBER_F32N_ZTILE(11)
EMBER_F32N_ZTILE(12)
#define EMBER_F32N_ZMOST 12
#endif

/* the register tile of nc positions x nv vectors (nv 1: nc 1-8; nv 3: nc 1-4, with
   AVX-512 1-EMBER_F32N_ZMOST) */
static inline void ember_f32n_tile_n(int32_t nv, int32_t nc, float* acc, const float* x,
                                     const float* w, const int64_t* off, int64_t e0,
                                     int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1,
                                     int64_t ws1, int64_t e2, int64_t xs2, int64_t ws2) {
  if (nv == 3) {
#if defined(__AVX512F__)
    switch (nc) {
      case 1: ember_f32n_ztile_1(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 2: ember_f32n_ztile_2(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 3: ember_f32n_ztile_3(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 4: ember_f32n_ztile_4(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 5: ember_f32n_ztile_5(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 6: ember_f32n_ztile_6(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 7: ember_f32n_ztile_7(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 8: ember_f32n_ztile_8(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 9: ember_f32n_ztile_9(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 10: ember_f32n_ztile_10(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 11: ember_f32n_ztile_11(acc, x, w, off, EMBER_F32N_LOOPS); break;
      default: ember_f32n_ztile_12(acc, x, w, off, EMBER_F32N_LOOPS); break;
    }
    return;
#endif
    switch (nc) {
      case 1: ember_f32n_tile_3_1(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 2: ember_f32n_tile_3_2(acc, x, w, off, EMBER_F32N_LOOPS); break;
      case 3: ember_f32n_tile_3_3(acc, x, w, off, EMBER_F32N_LOOPS); break;
      default: ember_f32n_tile_3_4(acc, x, w, off, EMBER_F32N_LOOPS); break;
    }
    return;
  }
  switch (nc) {
    case 1: ember_f32n_tile_1_1(acc, x, w, off, EMBER_F32N_LOOPS); break;
    case 2: ember_f32n_tile_1_2(acc, x, w, off, EMBER_F32N_LOOPS); break;
    case 3: ember_f32n_tile_1_3(acc, x, w, off, EMBER_F32N_LOOPS); break;
    case 4: ember_f32n_tile_1_4(acc, x, w, off, EMBER_F32N_LOOPS); break;
    case 5: ember_f32n_tile_1_5(acc, x, w, off, EMBER_F32N_LOOPS); break;
    case 6: ember_f32n_tile_1_6(acc, x, w, off, EMBER_F32N_LOOPS); break;
    case 7: ember_f32n_tile_1_7(acc, x, w, off, EMBER_F32N_LOOPS); break;
    default: ember_f32n_tile_1_8(acc, x, w, off, EMBER_F32N_LOOPS); break;
  }
}
#endif

/* acc[j][0:8*nv] += sum over (i0, i1, i2) of x at position j times 8*nv weights */
static inline int32_t ember_f32n_conv_tile(
    int32_t nv, float* acc, const float* x, const float* w, int64_t xoff, int64_t woff,
    int32_t ncols, int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0,
    int32_t ws0, int32_t e1, int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2) {
  if (ncols < 1) return 0;
  w += woff;
  const int32_t lanes = 8 * nv;
#if defined(__AVX2__) && defined(__FMA__)
#if defined(__AVX512F__)
  const int32_t most = nv == 3 ? EMBER_F32N_ZMOST : 8;
#else
  const int32_t most = nv == 3 ? 4 : 8;
#endif
  const int32_t ntiles = (ncols + most - 1) / most;
  const int32_t small = ncols / ntiles, big = ncols % ntiles;
  if (ntiles == 1) {
    int64_t off[16];
    for (int32_t j = 0; j < ncols; ++j)
      off[j] = xoff + (int64_t)(j / tcols) * cr + (int64_t)(j % tcols) * cx;
    ember_f32n_tile_n(nv, ncols, acc, x, w, off, EMBER_F32N_LOOPS);
    return 0;
  }
  for (int64_t i0 = 0; i0 < e0; ++i0) {
    for (int64_t i1 = 0; i1 < e1; ++i1) {
      for (int64_t c0 = 0; c0 < e2; c0 += EMBER_F32N_CHUNK) {
        const int64_t n2 = e2 - c0 < EMBER_F32N_CHUNK ? e2 - c0 : EMBER_F32N_CHUNK;
        const float* wk = w + i0 * ws0 + i1 * ws1 + c0 * ws2;
        const int64_t xk = xoff + i0 * xs0 + i1 * xs1 + c0 * xs2;
        int32_t j0 = 0;
        for (int32_t t = 0; t < ntiles; ++t) {
          const int32_t nc = small + (t < big);
          int64_t off[16];
          for (int32_t j = 0; j < nc; ++j)
            off[j] = xk + (int64_t)((j0 + j) / tcols) * cr + (int64_t)((j0 + j) % tcols) * cx;
          ember_f32n_tile_n(nv, nc, acc + lanes * (int64_t)j0, x, wk, off, EMBER_F32N_LOOP);
          j0 += nc;
        }
      }
    }
  }
  return 0;
#else
  for (int64_t i0 = 0; i0 < e0; ++i0)
    for (int64_t i1 = 0; i1 < e1; ++i1)
      for (int64_t i2 = 0; i2 < e2; ++i2) {
        const float* wk = w + i0 * ws0 + i1 * ws1 + i2 * ws2;
        const int64_t xk = xoff + i0 * xs0 + i1 * xs1 + i2 * xs2;
        for (int32_t j = 0; j < ncols; ++j) {
          const float b = x[xk + (int64_t)(j / tcols) * cr + (int64_t)(j % tcols) * cx];
          for (int32_t l = 0; l < lanes; ++l)
            acc[lanes * j + l] = fmaf(b, wk[l], acc[lanes * j + l]);
        }
      }
  return 0;
#endif
}

#define EMBER_F32N_ARGS                                                                       \
  float *acc, const float *x, const float *w, int64_t xoff, int64_t woff, int32_t ncols,   \
      int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0, int32_t ws0,         \
      int32_t e1, int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2
#define EMBER_F32N_PASS \
  acc, x, w, xoff, woff, ncols, tcols, cx, cr, e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2
/* 8 and 24 output channels per position (see ember/codegen/c/f32_narrow.py); return 0 */
EMBER_F32_API int32_t ember_f32_conv_tile8(EMBER_F32N_ARGS) {
  return ember_f32n_conv_tile(1, EMBER_F32N_PASS);
}
EMBER_F32_API int32_t ember_f32_conv_tile24(EMBER_F32N_ARGS) {
  return ember_f32n_conv_tile(3, EMBER_F32N_PASS);
}
"""
