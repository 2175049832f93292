"""C source of the float32 convolution micro-kernel that ``ember.ops.nn_conv_f32`` calls.

``ember_f32_conv_tile`` adds to a tile of a packed convolution's accumulators (``ncols``
output positions x 16 output channels, ``acc[j * 16 + lane]``) the products of the input and
the packed weight over up to three reduction loops (for 3x3 convs: kernel rows, kernel
columns, input channels). Position ``j`` reads the input at
``x + xoff + (j / tcols) * cr + (j % tcols) * cx``; the reduction step ``(i0, i1, i2)`` adds
``i0 * xs0 + i1 * xs1 + i2 * xs2`` to that and reads 16 weights at
``w + woff + i0 * ws0 + i1 * ws1 + i2 * ws2``. The loop IR around the call zeroes the
accumulators before and applies the fused epilogue after.

With AVX2 and FMA (``__AVX2__`` and ``__FMA__``) a register tile of up to 6 positions lives
in 12 ymm registers: per step two weight vectors are loaded once and every position's input
is broadcast once (MLAS's 6 x 16 layout: 12 accumulators, two weights, one broadcast, 15 of
16 registers; 91 GFLOP/s of a 94 GFLOP/s limit on L1-resident data, Zen 3, one thread). gcc
compiling the equivalent loop nest folds the weight loads into each FMA as memory operands,
one load per FMA, which left the loads the bottleneck. Wider tiles (small images: the whole
image is one tile) are split into register tiles as even as possible, and the reduction
runs in chunks of about 256 steps with all register tiles per chunk, so that a chunk's
weights are read from L1 by every register tile instead of from L2 by each: chunks of the
innermost loop when it is that long (taps outer, channels inner; 1x1: with the weight
packed taps first, ember.ops.nn_conv_taps, a chunk's weights are contiguous), else chunks of
the outermost loop with the inner ones whole (channels outer, 3x3 taps inner: the packed
weight then read contiguously, 16 KiB per chunk; nn_conv_layouts.CHANNELS_OUTER).
While a chunk runs, its register tiles prefetch the next chunk's weights, a share each:
the first tile of a chunk otherwise waited on L2 or L3 at every step (a layer's weights
pass L2 from 256 channels at 3x3; kernel alone, one thread, CPU time, load 6: 3x3 256->256
at 14x14 75 -> 84 GFLOP/s, 512->512 at 7x7 taps outer 46 -> 69); the last chunk prefetches
the next block's first chunk (the weights of a network come from DRAM at every inference:
3x3 256->256 at 14x14 with L3 flushed before each run 66 -> 72-77), unless the previous
call took the same block (bands of rows: 3x3 64->64 at 56x56 lost 5% to it).
With AVX-512 (``__AVX512F__``; the c kind on x86-avx512 CPUs, ember.ops.nn_conv_f32
.use_block_kernel) a register tile of up to AVX512_MAX_TILE positions keeps one zmm
accumulator per position: per step one weight vector is loaded and kept in a register, and
every position's input is an embedded broadcast (``{1to16}``) memory operand of its FMA.
There the reduction runs in chunks of AVX512_CHUNK steps: a tile call's fixed cost (its
accumulators' loads and stores, the offsets) weighed more than the weights' L1 residency
(kernel alone, Zen 5, one thread, CPU time, GFLOP/s of a 277 limit, chunks of 256 -> 1024
steps: 3x3 256->256 at 14x14 190 -> 241, 128->128 at 28x28 184 -> 238, 64->64 at 56x56
225 -> 243, 1x1 2048->512 at 7x7 211 -> 227; the AVX2 kernel compiled for the same CPU:
113-134).
Every accumulator receives the same fused multiply-adds in the same order as in the loop
IR, so results are bitwise equal to it. Without AVX2 the function runs plain C loops with
``fmaf`` (same arithmetic).
"""

from __future__ import annotations

from ember.codegen.c.f32_pair import F32_PAIR_C, PAIR_KERNEL_NAME, PAIR_PAD_KERNEL_NAME

#: the call_extern names this file defines.
F32_KERNEL_NAMES: frozenset[str] = frozenset(
    {"ember_f32_conv_tile", PAIR_KERNEL_NAME, PAIR_PAD_KERNEL_NAME}
)

#: key of the helper block in a FileContext.
HELPER_KEY = "0e_ember_f32"

_F32_KERNELS_TEMPLATE = r"""#ifndef EMBER_F32_API /* exported by the runtime: src/f32_tiles.h */
#define EMBER_F32_API static __attribute__((unused))
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
/* `EMBER_F32_KEEP(v)`: v stays in a register (so that the broadcasts, not the weights,
   are the FMAs' memory operands) */
#define EMBER_F32_KEEP(v) __asm__("" : "+v"(v))
/* the most positions of one register tile: one zmm accumulator per position */
#define EMBER_F32_MAX_TILE @MAX512@
/* one chunk of the innermost reduction loop: 1-iteration outer loops */
#define EMBER_F32_CHUNK @CHUNK512@
#define EMBER_F32_LOOP 1, 0, 0, 1, 0, 0, n2, xs2, ws2
#define EMBER_F32_LOOPS e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2
/* the next chunk's weight lines that the next register tile fetches ahead (ember_f32_npf
   lines ember_f32_pfs floats apart from ember_f32_pf; NULL: none), one per step of its flat
   loop instead of all before it: a burst of a hundred prefetches waited on DRAM (ResNet-50,
   one thread, CPU time, interleaved, load 9, ms: 3x3 512->512 at 7x7 1.63 -> 1.18, 1.39 ->
   1.16, 1.30 -> 1.10, 1x1 1024->2048 stride 2 1.26 -> 1.05; the whole model 0.972x) */
static __thread const float* ember_f32_pf;
static __thread int64_t ember_f32_npf, ember_f32_pfs;
#define EMBER_F32_PF_IN_TILE 1
#define EMBER_F32_TILE(NC)                                                                   \
  static __attribute__((noinline, unused)) void ember_f32_tile_##NC(                       \
      float* acc, const float* x, const float* w, const int64_t* off, int64_t e0,          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2) {                                                          \
    const float* pf = ember_f32_pf;                                                        \
    int64_t npf = pf != NULL ? ember_f32_npf : 0;                                          \
    const int64_t pfs = ember_f32_pfs;                                                     \
    ember_f32_pf = NULL;                                                                   \
    __m512 a[NC];                                                                          \
    const float* xp[NC];                                                                   \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                \
      xp[j] = x + off[j];                                                                  \
      a[j] = _mm512_loadu_ps(acc + 16 * j);                                                \
    }                                                                                      \
    if (e0 * e1 == 1) { /* one loop (chunks of a long innermost loop): a flat nest */     \
      const float* wk = w;                                                                 \
      for (int64_t xk = 0; xk < e2 * xs2; xk += xs2) {                                     \
        if (npf > 0) {                                                                     \
          _mm_prefetch((const char*)pf, _MM_HINT_T0);                                      \
          pf += pfs;                                                                       \
          --npf;                                                                           \
        }                                                                                  \
        __m512 w0 = _mm512_loadu_ps(wk);                                                   \
        EMBER_F32_KEEP(w0);                                                                \
        _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                            \
          a[j] = _mm512_fmadd_ps(_mm512_set1_ps(xp[j][xk]), w0, a[j]);                     \
        }                                                                                  \
        wk += ws2;                                                                         \
      }                                                                                    \
      e0 = 0;                                                                              \
    }                                                                                      \
    for (int64_t i0 = 0; i0 < e0; ++i0) {                                                  \
      for (int64_t i1 = 0; i1 < e1; ++i1) {                                                \
        int64_t xk = i0 * xs0 + i1 * xs1;                                                  \
        const float* wk = w + i0 * ws0 + i1 * ws1;                                         \
        for (int64_t i2 = 0; i2 < e2; ++i2) {                                              \
          __m512 w0 = _mm512_loadu_ps(wk);                                                 \
          EMBER_F32_KEEP(w0);                                                              \
          _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                          \
            a[j] = _mm512_fmadd_ps(_mm512_set1_ps(xp[j][xk]), w0, a[j]);                   \
          }                                                                                \
          xk += xs2;                                                                       \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                \
      _mm512_storeu_ps(acc + 16 * j, a[j]);                                                \
    }                                                                                      \
  }
@TILES512@
/* the register tile of nc (1-EMBER_F32_MAX_TILE) positions */
static inline void ember_f32_tile_n(int32_t nc, float* acc, const float* x, const float* w,
                                    const int64_t* off, int64_t e0, int64_t xs0, int64_t ws0,
                                    int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,
                                    int64_t xs2, int64_t ws2) {
  switch (nc) {
@CASES512@
  }
}
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
/* `EMBER_F32_KEEP(v)`: v stays in a register (gcc would otherwise fold the weight loads
   into every FMA as memory operands, one load per FMA) */
#define EMBER_F32_KEEP(v) __asm__("" : "+x"(v))
/* the most positions of one register tile: 6 x 16 accumulators in 12 ymm */
#define EMBER_F32_MAX_TILE 6
/* one chunk of the innermost reduction loop: 1-iteration outer loops */
#define EMBER_F32_CHUNK 256
#define EMBER_F32_LOOP 1, 0, 0, 1, 0, 0, n2, xs2, ws2
#define EMBER_F32_LOOPS e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2
#define EMBER_F32_TILE(NC)                                                                   \
  static __attribute__((noinline, unused)) void ember_f32_tile_##NC(                       \
      float* acc, const float* x, const float* w, const int64_t* off, int64_t e0,          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2) {                                                          \
    __m256 a0[NC], a1[NC];                                                                 \
    const float* xp[NC];                                                                   \
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; ++j) {                                 \
      xp[j] = x + off[j];                                                                  \
      a0[j] = _mm256_loadu_ps(acc + 16 * j);                                               \
      a1[j] = _mm256_loadu_ps(acc + 16 * j + 8);                                           \
    }                                                                                      \
    for (int64_t i0 = 0; i0 < e0; ++i0) {                                                  \
      for (int64_t i1 = 0; i1 < e1; ++i1) {                                                \
        int64_t xk = i0 * xs0 + i1 * xs1;                                                  \
        const float* wk = w + i0 * ws0 + i1 * ws1;                                         \
        for (int64_t i2 = 0; i2 < e2; ++i2) {                                              \
          __m256 w0 = _mm256_loadu_ps(wk), w1 = _mm256_loadu_ps(wk + 8);                   \
          EMBER_F32_KEEP(w0);                                                              \
          EMBER_F32_KEEP(w1);                                                              \
          _Pragma("GCC unroll 8") for (int j = 0; j < NC; ++j) {                           \
            const __m256 b = _mm256_broadcast_ss(xp[j] + xk);                              \
            a0[j] = _mm256_fmadd_ps(b, w0, a0[j]);                                         \
            a1[j] = _mm256_fmadd_ps(b, w1, a1[j]);                                         \
          }                                                                                \
          xk += xs2;                                                                       \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    _Pragma("GCC unroll 8") for (int j = 0; j < NC; ++j) {                                 \
      _mm256_storeu_ps(acc + 16 * j, a0[j]);                                               \
      _mm256_storeu_ps(acc + 16 * j + 8, a1[j]);                                           \
    }                                                                                      \
  }
EMBER_F32_TILE(1)
EMBER_F32_TILE(2)
EMBER_F32_TILE(3)
EMBER_F32_TILE(4)
EMBER_F32_TILE(5)
EMBER_F32_TILE(6)

/* the register tile of nc (1-6) positions */
static inline void ember_f32_tile_n(int32_t nc, float* acc, const float* x, const float* w,
                                    const int64_t* off, int64_t e0, int64_t xs0, int64_t ws0,
                                    int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,
                                    int64_t xs2, int64_t ws2) {
  switch (nc) {
    case 1: ember_f32_tile_1(acc, x, w, off, EMBER_F32_LOOPS); break;
    case 2: ember_f32_tile_2(acc, x, w, off, EMBER_F32_LOOPS); break;
    case 3: ember_f32_tile_3(acc, x, w, off, EMBER_F32_LOOPS); break;
    case 4: ember_f32_tile_4(acc, x, w, off, EMBER_F32_LOOPS); break;
    case 5: ember_f32_tile_5(acc, x, w, off, EMBER_F32_LOOPS); break;
    default: ember_f32_tile_6(acc, x, w, off, EMBER_F32_LOOPS); break;
  }
}
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* the weights of the last call of ember_f32_conv_tile on this thread */
static __thread const float* ember_f32_last_block;
/* every register tile of a chunk in turn (ntiles tiles: `big` of small + 1 positions,
   then small), each over the chunk's loops; the tiles fetch the weights of the next chunk
   (at `pw`, same loops; NULL: none) ahead, a share each, so that its first tile does not
   wait on a line of L2 or L3 per step (taps outer: one line per step, 576 bytes apart) */
/* off[0..nc) = base plus the offsets of positions j0 .. j0 + nc - 1 (rows of tcols
   positions cx apart, rows cr apart), counted along (no division per position) */
static inline void ember_f32_offsets(int64_t* off, int64_t base, int32_t j0, int32_t nc,
                                     int32_t tcols, int32_t cx, int32_t cr) {
  int32_t c = j0 % tcols;
  int64_t o = base + (int64_t)(j0 / tcols) * cr + (int64_t)c * cx;
  for (int32_t j = 0; j < nc; ++j) {
    off[j] = o;
    if (++c == tcols) {
      c = 0;
      o += cr - (int64_t)(tcols - 1) * cx;
    } else {
      o += cx;
    }
  }
}
static inline void ember_f32_tiles(float* acc, const float* x, const float* w, int64_t xk,
                                   int32_t ntiles, int32_t small, int32_t big, int32_t tcols,
                                   int32_t cx, int32_t cr, int64_t e0, int64_t xs0,
                                   int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1,
                                   int64_t e2, int64_t xs2, int64_t ws2, const float* pw) {
  int32_t j0 = 0;
  const int64_t steps = e0 * e1 * e2;
  for (int32_t t = 0; t < ntiles; ++t) {
    const int32_t nc = small + (t < big);
#ifdef EMBER_F32_PF_IN_TILE
    if (pw != NULL && e0 * e1 == 1 && steps >= 2 * ntiles) { /* in the tile's flat loop */
      ember_f32_pf = pw + steps * t / ntiles * ws2;
      ember_f32_npf = steps * (t + 1) / ntiles - steps * t / ntiles;
      ember_f32_pfs = ws2;
    } else
#endif
    if (pw != NULL) { /* steps s of the tile's share, (s0, s1, s2) counted along */
      int64_t s = steps * t / ntiles;
      int64_t s0 = s / (e1 * e2), s1 = s / e2 % e1, s2 = s % e2;
      for (; s < steps * (t + 1) / ntiles; ++s) {
        _mm_prefetch((const char*)(pw + s0 * ws0 + s1 * ws1 + s2 * ws2), _MM_HINT_T0);
        if (++s2 == e2) {
          s2 = 0;
          if (++s1 == e1) {
            s1 = 0;
            ++s0;
          }
        }
      }
    }
    int64_t off[EMBER_F32_MAX_TILE];
    ember_f32_offsets(off, xk, j0, nc, tcols, cx, cr);
    ember_f32_tile_n(nc, acc + 16 * (int64_t)j0, x, w, off, EMBER_F32_LOOPS);
    j0 += nc;
  }
}
#endif

/* acc[j][0:16] += sum over (i0, i1, i2) of x at position j times 16 weights (see
   ember/codegen/c/f32_kernels.py); returns 0 */
EMBER_F32_API int32_t ember_f32_conv_tile(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0, int32_t ws0, int32_t e1,
    int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2) {
  if (ncols < 1) return 0;
  w += woff;
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  /* register tiles of up to EMBER_F32_MAX_TILE positions, as even as possible; the
     reduction in chunks of about EMBER_F32_CHUNK steps, all tiles per chunk (its weights
     stay in L1) */
  const int32_t ntiles = (ncols + EMBER_F32_MAX_TILE - 1) / EMBER_F32_MAX_TILE;
  const int32_t small = ncols / ntiles, big = ncols % ntiles;
  /* the last chunk prefetches the first of the next block of 16 output channels, the packed
     weight's next (a block's weights: the longest loop's extent times its stride), unless
     the previous call on this thread took the same block (tiles of bands of rows: the next
     call most likely takes it again) */
  int64_t block = (int64_t)e0 * ws0;
  if ((int64_t)e1 * ws1 > block) block = (int64_t)e1 * ws1;
  if ((int64_t)e2 * ws2 > block) block = (int64_t)e2 * ws2;
  const float* next = w == ember_f32_last_block ? NULL : w + block;
  ember_f32_last_block = w;
#define EMBER_F32_NEXT_BLOCK next
  if (ntiles == 1) { /* one register tile: the whole reduction in one call */
    int64_t off[EMBER_F32_MAX_TILE];
    ember_f32_offsets(off, xoff, 0, ncols, tcols, cx, cr);
    ember_f32_tile_n(ncols, acc, x, w, off, EMBER_F32_LOOPS);
    return 0;
  }
  if ((int64_t)e1 * e2 < EMBER_F32_CHUNK && e0 > 1) {
    /* short inner loops (reduction order input channels, kernel rows, columns: the packed
       weight read contiguously): chunks of the outermost loop, whole inner loops */
    const int64_t inner = (int64_t)e1 * e2;
    const int64_t n0 = inner > 0 && EMBER_F32_CHUNK / inner > 0 ? EMBER_F32_CHUNK / inner : 1;
    for (int64_t c0 = 0; c0 < e0; c0 += n0) {
      const int64_t m0 = e0 - c0 < n0 ? e0 - c0 : n0;
      const float* pw = c0 + n0 < e0 ? w + (c0 + n0) * ws0 : EMBER_F32_NEXT_BLOCK;
      ember_f32_tiles(acc, x, w + c0 * ws0, xoff + c0 * xs0, ntiles, small, big, tcols, cx,
                      cr, m0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2, pw);
    }
    return 0;
  }
  for (int64_t i0 = 0; i0 < e0; ++i0) {
    for (int64_t i1 = 0; i1 < e1; ++i1) {
      for (int64_t c0 = 0; c0 < e2; c0 += EMBER_F32_CHUNK) {
        const int64_t n2 = e2 - c0 < EMBER_F32_CHUNK ? e2 - c0 : EMBER_F32_CHUNK;
        const float* wk = w + i0 * ws0 + i1 * ws1 + c0 * ws2;
        const int64_t xk = xoff + i0 * xs0 + i1 * xs1 + c0 * xs2;
        /* the next chunk: further along the channels, else the next tap's first */
        const float* pw = c0 + EMBER_F32_CHUNK < e2   ? wk + EMBER_F32_CHUNK * ws2
                          : i1 + 1 < e1               ? w + i0 * ws0 + (i1 + 1) * ws1
                          : i0 + 1 < e0               ? w + (i0 + 1) * ws0
                                                      : EMBER_F32_NEXT_BLOCK;
        ember_f32_tiles(acc, x, wk, xk, ntiles, small, big, tcols, cx, cr, EMBER_F32_LOOP, pw);
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
          for (int l = 0; l < 16; ++l) acc[16 * j + l] = fmaf(b, wk[l], acc[16 * j + l]);
        }
      }
  return 0;
#endif
}
"""


#: the most positions of an AVX-512 register tile (EMBER_F32_MAX_TILE under __AVX512F__;
#: the schedules' ember.ops.nn_conv_f32.AVX512_MAX_COLS, where it is measured).
AVX512_MAX_TILE = 10

#: the reduction steps of a chunk on AVX-512 (EMBER_F32_CHUNK; AVX2: 256)
AVX512_CHUNK = 1024


def _avx512_text(template: str) -> str:
    """The template with the AVX-512 register tiles of 1 to AVX512_MAX_TILE positions."""
    tiles = "".join(f"EMBER_F32_TILE({n})\n" for n in range(1, AVX512_MAX_TILE + 1))
    cases = [
        f"    case {n}: ember_f32_tile_{n}(acc, x, w, off, EMBER_F32_LOOPS); break;\n"
        for n in range(1, AVX512_MAX_TILE)
    ]
    last = f"    default: ember_f32_tile_{AVX512_MAX_TILE}(acc, x, w, off, EMBER_F32_LOOPS); break;"
    text = template.replace("@TILES512@\n", tiles).replace("@CASES512@", "".join(cases) + last)
    text = text.replace("@CHUNK512@", str(AVX512_CHUNK))
    return text.replace("@MAX512@", str(AVX512_MAX_TILE))


#: the C text of ember_f32_conv_tile (and its static helpers).
F32_KERNELS_C = _avx512_text(_F32_KERNELS_TEMPLATE) + F32_PAIR_C
