"""C source of ``ember_f32_dw3x3``: the 3x3 float32 depthwise kernel that
ember.ops.nn_depthwise_kernel calls for a tile of a channels-last depthwise convolution.

A tile is ``ncols`` output positions of one row x 16 channels (``acc[j * 16 + lane]``),
accumulated onto, or from +0 when ``zero`` is set (the rewrite folds the loop IR's zeroing
of the tile into the call; the fused epilogue stays loop IR after it). Tap ``(r, k)`` of
position ``j`` reads 16 input channels at ``x + xoff + r * xr + k * xk + j * xj`` and 16
weights at ``w + woff + r * wr + k * wk``; it is inside the input when
``0 <= r0 + r < rn`` (the tile's row) and ``0 <= c0 + j * cs + k < cn`` (its column), else
it is skipped (the padding: the loop IR adds ``0 * w``, which leaves an accumulator that
starts at +0 unchanged for finite weights).

The kernel is inlined into every call site, where its strides and tile width are
constants that gcc folds into the addressing (one out-of-line copy called from
mobilenet_v2's 17 sites ran its 14x14 and 7x7 layers at 1.1-1.4x the loop IR's time).
The 9 weight vectors are loaded once per call into registers; the rows of taps inside the
input are found once per call and the columns per group of positions, so that interior
groups of 8, 4 or 1 positions run the taps without a test (8 zmm accumulators, each tap's
input a memory operand of its FMA); border positions test each tap. A tile of at most
EMBER_DW_SMALL (8) positions (a narrow row, whose ncols, c0, cs and cn are constants at the
call site) is held whole in registers instead, the taps of all its positions in one
unrolled nest whose column tests gcc folds away: ds_cnn_kws's rows of 5 ran as 2 border
positions and 3 groups of 1, each loading its accumulator and the input anew (whole model,
one thread, thread CPU time, old/new builds interleaved in one process, load 3.5-4:
0.0242 -> 0.0235 ms, 0.966-0.967 in three trials; mobilenet_v2, whose 7x7 layers take it,
0.993-1.001; pp_lcnet 0.987-1.017: level). Every accumulator
receives its taps' fused multiply-adds in the loop IR's order (kernel rows, then columns),
so results are bitwise equal to the loop IR's. Without AVX-512: plain C with ``fmaf``, the
same arithmetic.
"""

from __future__ import annotations

#: the call_extern name this file defines.
DEPTHWISE_KERNEL_NAME = "ember_f32_dw3x3"

#: the call_extern name of the kernel with its epilogue (tiles of at most DW_SMALL positions).
DEPTHWISE_EPILOGUE_KERNEL_NAME = "ember_f32_dw3x3_ep"

#: the widest tile held whole in registers (EMBER_DW_SMALL in the C).
DW_SMALL = 8

#: the call_extern names this file defines.
DEPTHWISE_KERNEL_NAMES: frozenset[str] = frozenset(
    {DEPTHWISE_KERNEL_NAME, DEPTHWISE_EPILOGUE_KERNEL_NAME}
)

#: key of the helper block in a FileContext.
DEPTHWISE_HELPER_KEY = "0g_ember_f32_depthwise"

_GROUP = r"""/* NB interior positions from p (their taps all inside the row's columns) */
static inline __attribute__((always_inline)) void ember_dw_g@NB@(
    float* acc, const float* p, const __m512* wv, int64_t xr, int64_t xk, int64_t xj,
    int32_t rlo, int32_t rhi, int32_t zero) {
  __m512 a[@NB@];
  _Pragma("GCC unroll 8") for (int j = 0; j < @NB@; ++j) {
    a[j] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 16 * j);
  }
  _Pragma("GCC unroll 3") for (int32_t r = 0; r < 3; ++r) {
    if (r < rlo || r >= rhi) continue; /* constant indices: the weights stay in registers */
    _Pragma("GCC unroll 3") for (int k = 0; k < 3; ++k) {
      const __m512 wt = wv[r * 3 + k];
      const float* q = p + r * xr + k * xk;
      _Pragma("GCC unroll 8") for (int j = 0; j < @NB@; ++j) {
        a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(q + j * xj), wt, a[j]);
      }
    }
  }
  _Pragma("GCC unroll 8") for (int j = 0; j < @NB@; ++j) _mm512_storeu_ps(acc + 16 * j, a[j]);
}
"""

_TEMPLATE = r"""#if defined(__AVX512F__)
#include <immintrin.h>
@GROUPS@
/* a tile of at most EMBER_DW_SMALL positions whole in registers: every tap's column test
   is folded where ncols, c0, cs and cn are constants (a narrow row), and the positions
   sharing an input vector read it once */
#define EMBER_DW_SMALL 8
static inline __attribute__((always_inline)) void ember_dw_small_regs(
    __m512* a, const float* xb, const __m512* wv, int32_t ncols, int64_t xr, int64_t xk,
    int64_t xj, int32_t rlo, int32_t rhi, int32_t c0, int32_t cs, int32_t cn) {
  _Pragma("GCC unroll 3") for (int32_t r = 0; r < 3; ++r) {
    if (r < rlo || r >= rhi) continue;
    _Pragma("GCC unroll 3") for (int k = 0; k < 3; ++k) {
      const __m512 wt = wv[r * 3 + k];
      _Pragma("GCC unroll 8") for (int32_t j = 0; j < ncols; ++j) {
        const int32_t col = c0 + j * cs + k;
        if (col >= 0 && col < cn) {
          a[j] = _mm512_fmadd_ps(_mm512_loadu_ps(xb + r * xr + k * xk + j * xj), wt, a[j]);
        }
      }
    }
  }
}

static inline __attribute__((always_inline)) void ember_dw_small(
    float* acc, const float* xb, const __m512* wv, int32_t ncols, int64_t xr, int64_t xk,
    int64_t xj, int32_t rlo, int32_t rhi, int32_t c0, int32_t cs, int32_t cn, int32_t zero) {
  __m512 a[EMBER_DW_SMALL];
  _Pragma("GCC unroll 8") for (int32_t j = 0; j < ncols; ++j) {
    a[j] = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 16 * (int64_t)j);
  }
  ember_dw_small_regs(a, xb, wv, ncols, xr, xk, xj, rlo, rhi, c0, cs, cn);
  _Pragma("GCC unroll 8") for (int32_t j = 0; j < ncols; ++j) {
    _mm512_storeu_ps(acc + 16 * (int64_t)j, a[j]);
  }
}

/* the positions of a tile in groups: interior ones 8, 4, 1 at a time, border ones tested;
   a tile of at most EMBER_DW_SMALL positions whole (ember_dw_small) */
static inline __attribute__((always_inline)) void ember_dw_row(
    float* acc, const float* xb, const __m512* wv, int32_t ncols, int64_t xr, int64_t xk,
    int64_t xj, int32_t rlo, int32_t rhi, int32_t c0, int32_t cs, int32_t cn, int32_t zero) {
  if (ncols <= EMBER_DW_SMALL) {
    ember_dw_small(acc, xb, wv, ncols, xr, xk, xj, rlo, rhi, c0, cs, cn, zero);
    return;
  }
  int32_t j = 0;
  while (j < ncols) {
    const int32_t col = c0 + j * cs;
    float* aj = acc + 16 * (int64_t)j;
    const float* p = xb + j * xj;
    if (col >= 0 && j + 8 <= ncols && col + 7 * cs + 2 < cn) {
      ember_dw_g8(aj, p, wv, xr, xk, xj, rlo, rhi, zero);
      j += 8;
    } else if (col >= 0 && j + 4 <= ncols && col + 3 * cs + 2 < cn) {
      ember_dw_g4(aj, p, wv, xr, xk, xj, rlo, rhi, zero);
      j += 4;
    } else if (col >= 0 && col + 2 < cn) {
      ember_dw_g1(aj, p, wv, xr, xk, xj, rlo, rhi, zero);
      j += 1;
    } else {
      __m512 a = zero ? _mm512_setzero_ps() : _mm512_loadu_ps(aj);
      _Pragma("GCC unroll 3") for (int32_t r = 0; r < 3; ++r) {
        _Pragma("GCC unroll 3") for (int k = 0; k < 3; ++k) {
          if (r >= rlo && r < rhi && col + k >= 0 && col + k < cn) {
            a = _mm512_fmadd_ps(_mm512_loadu_ps(p + r * xr + k * xk), wv[r * 3 + k], a);
          }
        }
      }
      _mm512_storeu_ps(aj, a);
      j += 1;
    }
  }
}

/* the nine 3x3 filter vectors of 16 channels, rows wr and taps wk apart */
static inline __attribute__((always_inline)) void ember_dw_weights(__m512* wv, const float* wb,
                                                                  int32_t wr, int32_t wk) {
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k) wv[r * 3 + k] = _mm512_loadu_ps(wb + r * wr + k * wk);
}
#endif

/* the filter rows [*rlo, *rhi) inside the input, for input rows from r0 of rn */
static inline __attribute__((always_inline, unused)) void ember_dw_rows(int32_t r0, int32_t rn,
                                                                        int32_t* rlo,
                                                                        int32_t* rhi) {
  int32_t lo = r0 < 0 ? -r0 : 0;
  int32_t hi = rn - r0 < 3 ? rn - r0 : 3;
  lo = lo > 3 ? 3 : lo;
  *rlo = lo;
  *rhi = hi < lo ? lo : hi;
}

/* adds the 3x3 depthwise taps inside the input to ncols positions x 16 channels
   (ember/codegen/c/f32_depthwise.py); returns 0 */
static inline __attribute__((always_inline, unused)) int32_t ember_f32_dw3x3(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t xr, int32_t xk, int32_t xj, int32_t wr, int32_t wk, int32_t r0, int32_t rn,
    int32_t c0, int32_t cs, int32_t cn, int32_t zero) {
  int32_t rlo, rhi;
  ember_dw_rows(r0, rn, &rlo, &rhi);
  const float* xb = x + xoff;
  const float* wb = w + woff;
#if defined(__AVX512F__)
  __m512 wv[9];
  ember_dw_weights(wv, wb, wr, wk);
  if (rlo == 0 && rhi == 3) {
    ember_dw_row(acc, xb, wv, ncols, xr, xk, xj, 0, 3, c0, cs, cn, zero);
  } else {
    ember_dw_row(acc, xb, wv, ncols, xr, xk, xj, rlo, rhi, c0, cs, cn, zero);
  }
#else
  if (zero) {
    for (int32_t i = 0; i < 16 * ncols; ++i) acc[i] = 0.0f;
  }
  for (int32_t j = 0; j < ncols; ++j) {
    const int32_t col = c0 + j * cs;
    for (int32_t r = rlo; r < rhi; ++r)
      for (int k = 0; k < 3; ++k) {
        if (col + k < 0 || col + k >= cn) continue;
        const float* p = xb + r * (int64_t)xr + k * (int64_t)xk + j * (int64_t)xj;
        const float* q = wb + r * (int64_t)wr + k * (int64_t)wk;
        for (int l = 0; l < 16; ++l) acc[16 * j + l] = fmaf(p[l], q[l], acc[16 * j + l]);
      }
  }
#endif
  return 0;
}

/* ember_f32_dw3x3 on a tile of at most EMBER_DW_SMALL positions from +0 with its epilogue:
   out[ooff + j * oj + lane] = f(acc[j * 16 + lane] + bias[boff + lane]), f the identity
   (kind 0), x < 0 ? 0 : x (kind 1) or that and then x > hi ? hi : x (kind 2), the loop IR's
   operations in its order; the accumulators never leave the registers. Returns 0. */
static inline __attribute__((always_inline, unused)) int32_t ember_f32_dw3x3_ep(
    float* out, const float* x, const float* w, const float* bias, int64_t xoff, int64_t woff,
    int64_t ooff, int64_t boff, int32_t ncols, int32_t oj, int32_t xr, int32_t xk, int32_t xj,
    int32_t wr, int32_t wk, int32_t r0, int32_t rn, int32_t c0, int32_t cs, int32_t cn,
    int32_t kind, float hi) {
#if defined(__AVX512F__)
  int32_t rlo, rhi;
  ember_dw_rows(r0, rn, &rlo, &rhi);
  const float* xb = x + xoff;
  const float* wb = w + woff;
  __m512 wv[9];
  ember_dw_weights(wv, wb, wr, wk);
  __m512 a[EMBER_DW_SMALL];
  _Pragma("GCC unroll 8") for (int32_t j = 0; j < ncols; ++j) a[j] = _mm512_setzero_ps();
  if (rlo == 0 && rhi == 3) {
    ember_dw_small_regs(a, xb, wv, ncols, xr, xk, xj, 0, 3, c0, cs, cn);
  } else {
    ember_dw_small_regs(a, xb, wv, ncols, xr, xk, xj, rlo, rhi, c0, cs, cn);
  }
  const __m512 b = _mm512_loadu_ps(bias + boff);
  const __m512 zero = _mm512_setzero_ps();
  const __m512 top = _mm512_set1_ps(hi);
  _Pragma("GCC unroll 8") for (int32_t j = 0; j < ncols; ++j) {
    __m512 v = _mm512_add_ps(a[j], b);
    if (kind >= 1) v = _mm512_maskz_mov_ps(~_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v);
    if (kind == 2) v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, top, _CMP_GT_OQ), top);
    _mm512_storeu_ps(out + ooff + j * (int64_t)oj, v);
  }
#else
  float acc[16 * 8];
  if (ember_f32_dw3x3(acc, x, w, xoff, woff, ncols, xr, xk, xj, wr, wk, r0, rn, c0, cs, cn, 1)) {
    return -1;
  }
  for (int32_t j = 0; j < ncols; ++j) {
    for (int l = 0; l < 16; ++l) {
      float v = acc[16 * j + l] + bias[boff + l];
      if (kind >= 1) v = v < 0.0f ? 0.0f : v;
      if (kind == 2) v = v > hi ? hi : v;
      out[ooff + j * (int64_t)oj + l] = v;
    }
  }
#endif
  return 0;
}
"""


def _text() -> str:
    """The template with its interior groups of 8, 4 and 1 positions."""
    groups = "".join(_GROUP.replace("@NB@", str(nb)) for nb in (8, 4, 1))
    return _TEMPLATE.replace("@GROUPS@\n", groups)


#: the C text of ember_f32_dw3x3 (self-contained: its own intrinsics include).
F32_DEPTHWISE_C = _text()
