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
"""

from __future__ import annotations

#: the call_extern name this file defines.
PAIR_KERNEL_NAME = "ember_f32_conv_tile2"

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

_PAIR_TEMPLATE = r"""#if defined(__AVX512F__)
#define EMBER_F32P_MAX_TILE @MAX@
#define EMBER_F32P_CHUNK @CHUNK@
/* a register tile of NC positions x 2 blocks of 16 channels */
#define EMBER_F32P_TILE(NC)                                                                  \
  static __attribute__((noinline, unused)) void ember_f32p_tile_##NC(                      \
      float* acc, const float* x, const float* w, const int64_t* off, int64_t e0,          \
      int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,          \
      int64_t xs2, int64_t ws2, int64_t wb) {                                              \
    const float* pf = ember_f32_pf;                                                        \
    int64_t npf = pf != NULL ? ember_f32_npf : 0;                                          \
    const int64_t pfs = ember_f32_pfs;                                                     \
    ember_f32_pf = NULL;                                                                   \
    __m512 a0[NC], a1[NC];                                                                 \
    const float* xp[NC];                                                                   \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                \
      xp[j] = x + off[j];                                                                  \
      a0[j] = _mm512_loadu_ps(acc + 32 * j);                                               \
      a1[j] = _mm512_loadu_ps(acc + 32 * j + 16);                                          \
    }                                                                                      \
    if (e0 * e1 == 1) { /* one loop (chunks of a long innermost loop): a flat nest */     \
      const float* wk = w;                                                                 \
      for (int64_t xk = 0; xk < e2 * xs2; xk += xs2) {                                     \
        if (npf > 0) {                                                                     \
          _mm_prefetch((const char*)pf, _MM_HINT_T0);                                      \
          _mm_prefetch((const char*)(pf + wb), _MM_HINT_T0);                               \
          pf += pfs;                                                                       \
          --npf;                                                                           \
        }                                                                                  \
        __m512 w0 = _mm512_loadu_ps(wk), w1 = _mm512_loadu_ps(wk + wb);                    \
        EMBER_F32_KEEP(w0);                                                                \
        EMBER_F32_KEEP(w1);                                                                \
        _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                            \
          const __m512 b = _mm512_set1_ps(xp[j][xk]);                                      \
          a0[j] = _mm512_fmadd_ps(b, w0, a0[j]);                                           \
          a1[j] = _mm512_fmadd_ps(b, w1, a1[j]);                                           \
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
          __m512 w0 = _mm512_loadu_ps(wk), w1 = _mm512_loadu_ps(wk + wb);                  \
          EMBER_F32_KEEP(w0);                                                              \
          EMBER_F32_KEEP(w1);                                                              \
          _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                          \
            const __m512 b = _mm512_set1_ps(xp[j][xk]);                                    \
            a0[j] = _mm512_fmadd_ps(b, w0, a0[j]);                                         \
            a1[j] = _mm512_fmadd_ps(b, w1, a1[j]);                                         \
          }                                                                                \
          xk += xs2;                                                                       \
          wk += ws2;                                                                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    _Pragma("GCC unroll 16") for (int j = 0; j < NC; ++j) {                                \
      _mm512_storeu_ps(acc + 32 * j, a0[j]);                                               \
      _mm512_storeu_ps(acc + 32 * j + 16, a1[j]);                                          \
    }                                                                                      \
  }
@TILES@
#define EMBER_F32P_LOOPS e0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2, wb
static inline void ember_f32p_tile_n(int32_t nc, float* acc, const float* x, const float* w,
                                     const int64_t* off, int64_t e0, int64_t xs0, int64_t ws0,
                                     int64_t e1, int64_t xs1, int64_t ws1, int64_t e2,
                                     int64_t xs2, int64_t ws2, int64_t wb) {
  switch (nc) {
@CASES@
  }
}
/* every register tile of a chunk in turn (ember_f32_tiles for two blocks) */
static inline void ember_f32p_tiles(float* acc, const float* x, const float* w, int64_t xk,
                                    int32_t ntiles, int32_t small, int32_t big, int32_t tcols,
                                    int32_t cx, int32_t cr, int64_t e0, int64_t xs0,
                                    int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1,
                                    int64_t e2, int64_t xs2, int64_t ws2, int64_t wb,
                                    const float* pw) {
  int32_t j0 = 0;
  const int64_t steps = e0 * e1 * e2;
  for (int32_t t = 0; t < ntiles; ++t) {
    const int32_t nc = small + (t < big);
    if (pw != NULL && e0 * e1 == 1 && steps >= 2 * ntiles) { /* in the tile's flat loop */
      ember_f32_pf = pw + steps * t / ntiles * ws2;
      ember_f32_npf = steps * (t + 1) / ntiles - steps * t / ntiles;
      ember_f32_pfs = ws2;
    } else if (pw != NULL) { /* steps s of the tile's share, (s0, s1, s2) counted along */
      int64_t s = steps * t / ntiles;
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
    int64_t off[EMBER_F32P_MAX_TILE];
    ember_f32_offsets(off, xk, j0, nc, tcols, cx, cr);
    ember_f32p_tile_n(nc, acc + 32 * (int64_t)j0, x, w, off, EMBER_F32P_LOOPS);
    j0 += nc;
  }
}
#endif

/* ember_f32_conv_tile for two blocks of 16 output channels, the second's weights wb floats
   after the first's: acc[j][0:32] (see ember/codegen/c/f32_pair.py); returns 0 */
EMBER_F32_API int32_t ember_f32_conv_tile2(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0, int32_t ws0, int32_t e1,
    int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2, int32_t wb) {
  if (ncols < 1) return 0;
  w += woff;
#if defined(__AVX512F__)
  const int32_t ntiles = (ncols + EMBER_F32P_MAX_TILE - 1) / EMBER_F32P_MAX_TILE;
  const int32_t small = ncols / ntiles, big = ncols % ntiles;
  /* the last chunk prefetches the next pair of blocks (2 * wb further) unless the previous
     call on this thread took this pair (bands of rows) */
  const float* next = w == ember_f32_last_block ? NULL : w + 2 * (int64_t)wb;
  ember_f32_last_block = w;
  if (ntiles == 1) {
    int64_t off[EMBER_F32P_MAX_TILE];
    ember_f32_offsets(off, xoff, 0, ncols, tcols, cx, cr);
    ember_f32p_tile_n(ncols, acc, x, w, off, EMBER_F32P_LOOPS);
    return 0;
  }
  if ((int64_t)e1 * e2 < EMBER_F32P_CHUNK && e0 > 1) {
    const int64_t inner = (int64_t)e1 * e2;
    const int64_t n0 = inner > 0 && EMBER_F32P_CHUNK / inner > 0 ? EMBER_F32P_CHUNK / inner : 1;
    for (int64_t c0 = 0; c0 < e0; c0 += n0) {
      const int64_t m0 = e0 - c0 < n0 ? e0 - c0 : n0;
      const float* pw = c0 + n0 < e0 ? w + (c0 + n0) * ws0 : next;
      ember_f32p_tiles(acc, x, w + c0 * ws0, xoff + c0 * xs0, ntiles, small, big, tcols, cx,
                       cr, m0, xs0, ws0, e1, xs1, ws1, e2, xs2, ws2, wb, pw);
    }
    return 0;
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
                         n2, xs2, ws2, wb, pw);
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
          for (int l = 0; l < 32; ++l) {
            const float wl = l < 16 ? wk[l] : wk[wb + l - 16];
            acc[32 * j + l] = fmaf(b, wl, acc[32 * j + l]);
          }
        }
      }
  return 0;
#endif
}
"""


def _pair_text() -> str:
    """The template with the register tiles of 1 to PAIR_MAX_TILE positions."""
    tiles = "".join(f"EMBER_F32P_TILE({n})\n" for n in range(1, PAIR_MAX_TILE + 1))
    cases = [
        f"    case {n}: ember_f32p_tile_{n}(acc, x, w, off, EMBER_F32P_LOOPS); break;\n"
        for n in range(1, PAIR_MAX_TILE)
    ]
    last = f"    default: ember_f32p_tile_{PAIR_MAX_TILE}(acc, x, w, off, EMBER_F32P_LOOPS); break;"
    text = _PAIR_TEMPLATE.replace("@TILES@\n", tiles).replace("@CASES@", "".join(cases) + last)
    return text.replace("@CHUNK@", str(PAIR_CHUNK)).replace("@MAX@", str(PAIR_MAX_TILE))


#: the C text of ember_f32_conv_tile2 (after ember_f32_conv_tile's, whose helpers it uses).
F32_PAIR_C = _pair_text()
