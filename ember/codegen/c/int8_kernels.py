"""C source of the int8 kernels that ``ember.ops.quant`` calls through ``call_extern``.

Each function is a whole quantized layer (8-bit in, 8-bit out, requantization fused):

* ``ember_q8_conv``: ungrouped 2-D convolution, NCHW, as a matrix product of the weight
  (rows: output channels, packed at build time, ``[M/4*4][K/4*4]`` int8, K = C*KH*KW) and
  the image's patches, packed at run time per chunk of 16-position panels
  (``[panel][K/4][16][4]``: 4 consecutive K values per 32-bit lane); its driver (and the
  dense one) is in ``int8_conv.py``, split across threads, its packing and image copies in
  ``int8_patches.py``;
* ``ember_q8_dense``: ``[rows, K] x [K, N]`` with the weight packed at build time in the
  same panel layout (``[N/16][K/4][16][4]``), the activation rows broadcast 4 bytes at a time;
* the depthwise convolution and QLinearAdd of ``int8_dwconv_add.py`` (which use this
  block's requantizing stores).

With AVX2 (``__AVX2__``, what ``-march`` of an AVX2 CPU defines) the products are
``vpmaddubsw`` (u8 x s8 -> pairs summed in int16) then ``vpmaddwd`` with ones (-> int32),
register tiles of 4 rows x 16 columns, the requantization (``float(acc) * m``, optional
relu, round half to even, ``+ zero point``, clamp) on 8 lanes at a time. ``vpmaddubsw``
saturates its int16 pair sums, so the compiler only takes this path for weights whose
pairs satisfy ``255 * (|w0| + |w1|) <= 32767`` (7-bit weights, what onnxruntime's quantizer
writes for AVX2 with ``reduce_range``): then the result is exact. Without AVX2 (other x86
levels, Arm, Cortex-M) the same functions run plain C loops with the same arithmetic. With
AVX-512 VNNI (``__AVX512VNNI__`` and ``__AVX512BW__``: Ice Lake server, Zen 4/5) the conv and
dense drivers take the ``vpdpbusd`` zmm tiles of ``int8_avx512.py`` instead (bit-identical
bytes), the patch packing one ``vpermb`` per panel step where ``__AVX512VBMI__``. Signed
activations are made unsigned by flipping their top bit (``x + 128``), the zero point moved
with them; zero-point corrections (weight row sums) are folded into the bias at build time.
"""

from __future__ import annotations

from ember.codegen.c.int8_avx512 import INT8_AVX512_C
from ember.codegen.c.int8_conv import INT8_CONV_C
from ember.codegen.c.int8_dense import INT8_DENSE_C
from ember.codegen.c.int8_dynamic import INT8_DYNAMIC_C
from ember.codegen.c.int8_patches import INT8_PATCHES_C
from ember.codegen.c.int8_real_positions import INT8_REAL_POSITIONS_C
from ember.codegen.c.int8_tails import INT8_TAIL_TILES_C

#: the call_extern names this file defines.
INT8_KERNEL_NAMES: frozenset[str] = frozenset(
    {"ember_q8_conv", "ember_q8_dense", "ember_q8_matmul_integer", "ember_q8_conv_integer"}
)

#: key of the helper block in a FileContext.
HELPER_KEY = "0d_ember_q8"

_TILES_C = r"""#if defined(__AVX2__)
#include <immintrin.h>
#endif
/* lo is the clamp's lower bound with the relu folded in: rint(max(v, 0)) + zy clamped to
   [lo, hi] is rint(v) + zy clamped to [max(lo, zy), hi] */
typedef struct {
  float zy, lo, hi;
  int relu, is_signed;
  int16_t zy16, lo16; /* zy and lo for the vector stores (no float conversion per store) */
  int cap; /* float(acc) * m may reach 2^30 (cvtps would overflow): cap it first */
} ember_q8_epi;

static inline ember_q8_epi ember_q8_epilogue(int32_t zy, int32_t relu, int32_t is_signed) {
  const float lo = is_signed ? -128.0f : 0.0f, z = (float)zy;
  const float l = relu && z > lo ? z : lo;
  ember_q8_epi e = {z, l, is_signed ? 127.0f : 255.0f, relu, is_signed, (int16_t)zy, (int16_t)l, 1};
  return e;
}

static inline void ember_q8_store1(int32_t acc, float m, const ember_q8_epi* e, uint8_t* dst) {
  float v = (float)acc * m;
  if (e->relu) v = v > 0.0f ? v : 0.0f;
  v = rintf(v) + e->zy;
  v = v < e->lo ? e->lo : v;
  v = v > e->hi ? e->hi : v;
  *dst = (uint8_t)(int32_t)v;
}

/* dst[0, n) = src[0, n) without a library call, for the short runs of output rows: 16 bytes
   at a time, the last move overlapping; under 16, two overlapping moves of 8 bytes, under 8
   byte by byte */
static inline void ember_q8_copy(uint8_t* dst, const uint8_t* src, int n) {
#if defined(__AVX2__)
  if (n >= 16) {
    int k = 0;
    for (; k + 16 <= n; k += 16)
      _mm_storeu_si128((__m128i*)(dst + k), _mm_loadu_si128((const __m128i*)(src + k)));
    if (k < n)
      _mm_storeu_si128((__m128i*)(dst + n - 16), _mm_loadu_si128((const __m128i*)(src + n - 16)));
    return;
  }
  if (n >= 8) {
    uint64_t a, b;
    memcpy(&a, src, 8);
    memcpy(&b, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + n - 8, &b, 8);
    return;
  }
  for (int k = 0; k < n; ++k) dst[k] = src[k];
#else
  memcpy(dst, src, (size_t)n);
#endif
}

#if defined(__AVX2__)
/* requantize 16 int32 (a0: columns 0-7, a1: 8-15; or, with interleaved, the order that
   unpacklo/unpackhi_epi16 of two rows give) and store `count` bytes */
static inline void ember_q8_store16(__m256i a0, __m256i a1, __m256 m0, __m256 m1,
                                    const ember_q8_epi* e, int interleaved, uint8_t* dst,
                                    int count) {
  __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(a0), m0);
  __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(a1), m1);
  /* cvtps rounds half to even (the default MXCSR mode, as rintf); above 2^31 it would give
     INT_MIN, so the top is capped first (below, INT_MIN saturates the right way) */
  const __m256 top = _mm256_set1_ps(1073741824.0f);
  v0 = _mm256_min_ps(v0, top);
  v1 = _mm256_min_ps(v1, top);
  /* int16 with saturation, + zero point with saturation, the relu's bound, then bytes with
     the output type's saturation: the clamp of rint(v) + zy to [lo, hi] */
  __m256i s = _mm256_packs_epi32(_mm256_cvtps_epi32(v0), _mm256_cvtps_epi32(v1));
  s = _mm256_adds_epi16(s, _mm256_set1_epi16(e->zy16));
  s = _mm256_max_epi16(s, _mm256_set1_epi16(e->lo16));
  if (!interleaved) s = _mm256_permute4x64_epi64(s, 0xD8);
  __m128i l = _mm256_castsi256_si128(s), h = _mm256_extracti128_si256(s, 1);
  __m128i b = e->is_signed ? _mm_packs_epi16(l, h) : _mm_packus_epi16(l, h);
  if (count >= 16) {
    _mm_storeu_si128((__m128i*)dst, b);
  } else {
    uint8_t tmp[16];
    _mm_storeu_si128((__m128i*)tmp, b);
    memcpy(dst, tmp, (size_t)count);
  }
}

/* rows i (a0: columns 0-7, a1: 8-15) and i + 1 (b0, b1) requantized as ember_q8_store16
   and stored as 16 bytes each at d0 and d1, the two rows sharing one byte pack and one
   permute; zy, lo: the epilogue's int16 zero point and lower bound (broadcast once by
   the caller); cap 0 (a constant once inlined) drops the 2^30 cap where it cannot bind */
static inline void ember_q8_store2x16(__m256i a0, __m256i a1, __m256i b0, __m256i b1, __m256 ma,
                                      __m256 mb, __m256i zy, __m256i lo, int is_signed,
                                      int cap, uint8_t* d0, uint8_t* d1) {
  const __m256 top = _mm256_set1_ps(cap ? 1073741824.0f : INFINITY);
#define EMBER_Q8_I16(X, M) \
  _mm256_cvtps_epi32(cap ? _mm256_min_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(X), M), top) \
                         : _mm256_mul_ps(_mm256_cvtepi32_ps(X), M))
  __m256i sa = _mm256_packs_epi32(EMBER_Q8_I16(a0, ma), EMBER_Q8_I16(a1, ma));
  __m256i sb = _mm256_packs_epi32(EMBER_Q8_I16(b0, mb), EMBER_Q8_I16(b1, mb));
#undef EMBER_Q8_I16
  sa = _mm256_max_epi16(_mm256_adds_epi16(sa, zy), lo);
  sb = _mm256_max_epi16(_mm256_adds_epi16(sb, zy), lo);
  /* dwords: a 0-3, a 8-11, b 0-3, b 8-11 | a 4-7, a 12-15, b 4-7, b 12-15 */
  __m256i v = is_signed ? _mm256_packs_epi16(sa, sb) : _mm256_packus_epi16(sa, sb);
  v = _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm_storeu_si128((__m128i*)d0, _mm256_castsi256_si128(v));
  _mm_storeu_si128((__m128i*)d1, _mm256_extracti128_si256(v, 1));
}

/* acc (+ bias: the tiles start at it) as int32, `count` columns of a row */
static inline void ember_q8_store16_i32(__m256i a0, __m256i a1, int32_t* dst, int count) {
  if (count == 16) {
    _mm256_storeu_si256((__m256i*)dst, a0);
    _mm256_storeu_si256((__m256i*)(dst + 8), a1);
  } else {
    int32_t tmp[16];
    _mm256_storeu_si256((__m256i*)tmp, a0);
    _mm256_storeu_si256((__m256i*)(tmp + 8), a1);
    memcpy(dst, tmp, (size_t)count * 4);
  }
}

/* 4 rows x 16 columns of sum_k row[k] * panel[k][col]; rows: 4 bytes broadcast per step
   (row i at rows + i * ldr), panel: [k4][16][4] bytes; MADDUBS puts the unsigned side
   first. Never inlined: inlined into the packing loops, gcc spills the accumulators. */
#define EMBER_Q8_TILE(NAME, MADDUBS)                                                        \
  static __attribute__((noinline, unused)) void NAME(const uint8_t* rows, int ldr,        \
                                                     const uint8_t* panel, int k4,          \
                          __m256i acc[8]) {                                                 \
    const __m256i ones = _mm256_set1_epi16(1);                                              \
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;                  \
    __m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;                                     \
    const uint8_t *r0 = rows, *r1 = rows + ldr, *r2 = rows + 2 * ldr, *r3 = rows + 3 * ldr; \
    for (int q = 0; q < k4; ++q) {                                                          \
      const __m256i p0 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q));              \
      const __m256i p1 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 32));         \
      int32_t t;                                                                            \
      __m256i b;                                                                            \
      memcpy(&t, r0 + 4 * q, 4);                                                            \
      b = _mm256_set1_epi32(t);                                                             \
      c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(MADDUBS(p0, b), ones));                 \
      c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(MADDUBS(p1, b), ones));                 \
      memcpy(&t, r1 + 4 * q, 4);                                                            \
      b = _mm256_set1_epi32(t);                                                             \
      c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(MADDUBS(p0, b), ones));                 \
      c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(MADDUBS(p1, b), ones));                 \
      memcpy(&t, r2 + 4 * q, 4);                                                            \
      b = _mm256_set1_epi32(t);                                                             \
      c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(MADDUBS(p0, b), ones));                 \
      c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(MADDUBS(p1, b), ones));                 \
      memcpy(&t, r3 + 4 * q, 4);                                                            \
      b = _mm256_set1_epi32(t);                                                             \
      c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(MADDUBS(p0, b), ones));                 \
      c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(MADDUBS(p1, b), ones));                 \
    }                                                                                       \
    acc[0] = c00; acc[1] = c01; acc[2] = c10; acc[3] = c11;                                 \
    acc[4] = c20; acc[5] = c21; acc[6] = c30; acc[7] = c31;                                 \
  }
/* the conv tile (the accumulators start at the rows' biases b4): 4 weight rows (broadcast) x
   a 16-position panel of unsigned bytes, two
   4-column steps per iteration with their vpmaddubsw results added in int16 (exact: the
   weights' pair groups fit, see split_pair_groups) before one vpmaddwd: 3 multiplies per
   32 x 2 products instead of 4; an odd last step alone */
#define EMBER_Q8_BCAST2(R)    \
  memcpy(&t, R + 4 * q, 4);      \
  b = _mm256_set1_epi32(t);      \
  memcpy(&t, R + 4 * q + 4, 4);  \
  b2 = _mm256_set1_epi32(t);
#define EMBER_Q8_PAIR_ACC(C, PA, PB)                                                 \
  C = _mm256_add_epi32(C, _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(PA, b),  \
                                                             _mm256_maddubs_epi16(PB, b2)), \
                                            ones));
#define EMBER_Q8_PAIR_ROW(C0, C1, R) \
  EMBER_Q8_BCAST2(R)                 \
  EMBER_Q8_PAIR_ACC(C0, p0, p2)      \
  EMBER_Q8_PAIR_ACC(C1, p1, p3)
static __attribute__((noinline, unused)) void ember_q8_tile_pairs(const uint8_t* rows, int ldr,
                                                                  const uint8_t* panel, int k4,
                                                                  const int32_t* b4,
                                                                  __m256i acc[8]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c00 = _mm256_set1_epi32(b4[0]), c01 = c00, c10 = _mm256_set1_epi32(b4[1]), c11 = c10;
  __m256i c20 = _mm256_set1_epi32(b4[2]), c21 = c20, c30 = _mm256_set1_epi32(b4[3]), c31 = c30;
  const uint8_t *r0 = rows, *r1 = rows + ldr, *r2 = rows + 2 * ldr, *r3 = rows + 3 * ldr;
  for (int q = 0; q + 2 <= k4; q += 2) {
    const __m256i p0 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q));
    const __m256i p1 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 32));
    const __m256i p2 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 64));
    const __m256i p3 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 96));
    int32_t t;
    __m256i b, b2;
    EMBER_Q8_PAIR_ROW(c00, c01, r0)
    EMBER_Q8_PAIR_ROW(c10, c11, r1)
    EMBER_Q8_PAIR_ROW(c20, c21, r2)
    EMBER_Q8_PAIR_ROW(c30, c31, r3)
  }
  acc[0] = c00; acc[1] = c01; acc[2] = c10; acc[3] = c11;
  acc[4] = c20; acc[5] = c21; acc[6] = c30; acc[7] = c31;
}

/* acc += the one step q of the tile (an odd k4's last) */
static inline void ember_q8_tile_step(const uint8_t* rows, int ldr, const uint8_t* panel, int q,
                                      __m256i acc[8]) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i p0 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q));
  const __m256i p1 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 32));
  for (int i = 0; i < 4; ++i) {
    int32_t t;
    memcpy(&t, rows + (long)i * ldr + 4 * q, 4);
    const __m256i b = _mm256_set1_epi32(t);
    acc[2 * i] = _mm256_add_epi32(acc[2 * i], _mm256_madd_epi16(_mm256_maddubs_epi16(p0, b), ones));
    acc[2 * i + 1] =
        _mm256_add_epi32(acc[2 * i + 1], _mm256_madd_epi16(_mm256_maddubs_epi16(p1, b), ones));
  }
}

/* acc[2i], acc[2i + 1] += the fix slots of rows i < `rows` (at wrows + i * ldw + 4 * k4, the
   used ones first): value v at column k adds v * panel byte k of each of the 16 positions */
static inline void ember_q8_add_fixes(const uint8_t* wrows, int ldw, const uint8_t* panel, int k4,
                                      int nfix, int rows, __m256i acc[8]) {
  const __m256i low = _mm256_set1_epi32(0xFF);
  for (int i = 0; i < rows; ++i) {
    const uint8_t* s = wrows + (long)i * ldw + 4 * k4;
    for (int f = 0; f < nfix && s[0] != 0; ++f, s += 4) {
      const int k = s[2] | s[3] << 8;
      if (k >= 4 * k4) continue; /* never from ember's packing: the weights are data */
      const __m128i sh = _mm_cvtsi32_si128(8 * (k & 3));
      const __m256i v = _mm256_set1_epi32((int8_t)s[0]);
      const uint8_t* p = panel + 64 * (k >> 2);
      const __m256i x0 = _mm256_and_si256(
          _mm256_srl_epi32(_mm256_loadu_si256((const __m256i*)p), sh), low);
      const __m256i x1 = _mm256_and_si256(
          _mm256_srl_epi32(_mm256_loadu_si256((const __m256i*)(p + 32)), sh), low);
      acc[2 * i] = _mm256_add_epi32(acc[2 * i], _mm256_mullo_epi32(x0, v));
      acc[2 * i + 1] = _mm256_add_epi32(acc[2 * i + 1], _mm256_mullo_epi32(x1, v));
    }
  }
}
#define EMBER_Q8_ROWS_U8(p, b) _mm256_maddubs_epi16((b), (p))
EMBER_Q8_TILE(ember_q8_tile_rows_u8, EMBER_Q8_ROWS_U8)
#else
/* the same tile in plain C: acc[i][j], i < 4 rows, j < 16 columns */
static inline void ember_q8_tile_ref(const uint8_t* rows, int ldr, const uint8_t* panel, int k4,
                              int rows_u8, int32_t acc[4][16]) {
  for (int i = 0; i < 4; ++i) {
    const uint8_t* r = rows + i * ldr;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int q = 0; q < k4; ++q) {
        for (int t = 0; t < 4; ++t) {
          int32_t a = rows_u8 ? (int32_t)r[4 * q + t] : (int32_t)(int8_t)r[4 * q + t];
          uint8_t pb = panel[64 * q + 4 * j + t];
          int32_t b = rows_u8 ? (int32_t)(int8_t)pb : (int32_t)pb;
          s += a * b;
        }
      }
      acc[i][j] = s;
    }
  }
}

/* the fix slots of the conv rows (see ember_q8_add_fixes), in plain C */
static inline void ember_q8_add_fixes_ref(const uint8_t* wrows, int ldw, const uint8_t* panel,
                                          int k4, int nfix, int rows, int32_t acc[4][16]) {
  for (int i = 0; i < rows; ++i) {
    const uint8_t* s = wrows + (long)i * ldw + 4 * k4;
    for (int f = 0; f < nfix && s[0] != 0; ++f, s += 4) {
      const int k = s[2] | s[3] << 8;
      if (k >= 4 * k4) continue; /* never from ember's packing: the weights are data */
      const uint8_t* p = panel + 64 * (k >> 2) + (k & 3);
      for (int j = 0; j < 16; ++j) acc[i][j] += (int8_t)s[0] * p[4 * j];
    }
  }
}
#endif

"""

#: the whole helper block: tiles, packing, stores, the tail tiles, then the conv, dense and
#: MatMulInteger drivers.
INT8_KERNELS_C = (
    _TILES_C
    + INT8_TAIL_TILES_C
    + INT8_AVX512_C
    + INT8_REAL_POSITIONS_C
    + INT8_PATCHES_C
    + INT8_CONV_C
    + INT8_DENSE_C
    + INT8_DYNAMIC_C
)
