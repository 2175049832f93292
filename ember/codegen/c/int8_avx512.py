"""C source of the AVX-512 VNNI int8 tiles (``vpdpbusd`` on zmm), taken by the conv and dense
drivers of ``int8_conv.py`` where the compiler defines ``__AVX512VNNI__`` and
``__AVX512BW__`` (``-march`` of Ice Lake, Sapphire Rapids, Zen 4, Zen 5); the AVX2 and
portable paths are unchanged.

One ``vpdpbusd`` sums 4 unsigned x signed byte products into each of 16 int32 lanes without
saturation, so a 16-position panel step (``[k4][16][4]``, 64 bytes) is one zmm: the conv tile
is 4 weight rows (4 bytes broadcast) x up to 4 panels (64 positions), 16 accumulators; the
dense tile 4 data rows (broadcast) x up to 4 weight panels (64 columns). The integer sums are
exact, the same as the ``vpmaddubsw`` tiles' (whose weights never saturate their pair sums),
and the requantization ``clamp(cvtps(float(acc) * m) + zy, lo, hi)`` is the AVX2 stores'
(int16 saturation, then bytes) computed as an int32 clamp before the add, so the bytes are
bit-identical to the AVX2 build's.
"""

from __future__ import annotations

INT8_AVX512_C = r"""#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define EMBER_Q8_VNNI512 1
/* the epilogue as int32 vectors: clamp(v, lo - zy, hi - zy) + zy is clamp(v + zy, lo, hi)
   without overflow, the AVX2 stores' saturating int16 steps' result */
typedef struct {
  __m512i lo, hi, zy;
  int cap;
} ember_q8_epi512;

static inline ember_q8_epi512 ember_q8_epi512_of(const ember_q8_epi* e) {
  const int32_t zy = e->zy16, hi = e->is_signed ? 127 : 255;
  ember_q8_epi512 v = {_mm512_set1_epi32(e->lo16 - zy), _mm512_set1_epi32(hi - zy),
                       _mm512_set1_epi32(zy), e->cap};
  return v;
}

/* 16 int32 requantized by m to 16 bytes (cvtps rounds half to even, as rintf) */
static inline __m128i ember_q8_requant512(__m512i acc, __m512 m, const ember_q8_epi512* e) {
  __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), m);
  if (e->cap) v = _mm512_min_ps(v, _mm512_set1_ps(1073741824.0f));
  __m512i t = _mm512_max_epi32(_mm512_cvtps_epi32(v), e->lo);
  t = _mm512_add_epi32(_mm512_min_epi32(t, e->hi), e->zy);
  return _mm512_cvtepi32_epi8(t);
}

/* 64 consecutive outputs (a0..a3: 16 each) requantized with the AVX2 stores' own steps
   (int16 pack with saturation, + zy saturating, max lo, bytes with the type's saturation)
   and one dword permute: 2 + 1 packs for 64 where vpmovdb takes 2 uops per 16 (short sums
   are store-bound); zy, lo: the epilogue's int16 constants broadcast */
static inline void ember_q8_store64(__m512i a0, __m512i a1, __m512i a2, __m512i a3, __m512 m,
                                    __m512i zy, __m512i lo, int is_signed, int cap,
                                    __mmask64 keep, uint8_t* dst) {
  const __m512 top = _mm512_set1_ps(cap ? 1073741824.0f : INFINITY);
#define EMBER_Q8_I32(X) \
  _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(X), m), top))
  __m512i s01 = _mm512_packs_epi32(EMBER_Q8_I32(a0), EMBER_Q8_I32(a1));
  __m512i s23 = _mm512_packs_epi32(EMBER_Q8_I32(a2), EMBER_Q8_I32(a3));
#undef EMBER_Q8_I32
  s01 = _mm512_max_epi16(_mm512_adds_epi16(s01, zy), lo);
  s23 = _mm512_max_epi16(_mm512_adds_epi16(s23, zy), lo);
  /* 128-bit lane L holds dwords: a0, a1, a2, a3 positions 4L..4L+3 */
  const __m512i b = is_signed ? _mm512_packs_epi16(s01, s23) : _mm512_packus_epi16(s01, s23);
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i out = _mm512_permutexvar_epi32(idx, b);
  if (keep == ~(__mmask64)0) _mm512_storeu_si512((void*)dst, out);
  else _mm512_mask_storeu_epi8((void*)dst, keep, out);
}

static inline __mmask16 ember_q8_mask16(int count) {
  return count >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (count > 0 ? count : 0)) - 1u);
}

/* R rows (4 bytes of row i at rows + i * ldr + 4 q, broadcast) x NP panels (panel j at
   panel + j * pstride, [k4][16][4]) into acc[S i + j]; ROWS_U8: the rows are the unsigned
   side (dense), else the panels are (conv). The accumulators start at init[i] (or zero) */
#define EMBER_Q8_TILE512(NAME, R, NP, S, ROWS_U8)                                             \
  static __attribute__((noinline, unused)) void NAME(const uint8_t* rows, int ldr,            \
                                                     const uint8_t* panel, long pstride,      \
                                                     int k4, const int32_t* init,             \
                                                     int nfix, int nrow, __m512i* acc) {      \
    __m512i c[R][NP];                                                                         \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                                       \
      _Pragma("GCC unroll 4") for (int j = 0; j < NP; ++j)                                    \
        c[i][j] = _mm512_set1_epi32(init != NULL ? init[i] : 0);                              \
    for (int q = 0; q < k4; ++q) {                                                            \
      __m512i p[NP];                                                                          \
      _Pragma("GCC unroll 4") for (int j = 0; j < NP; ++j)                                    \
        p[j] = _mm512_loadu_si512((const void*)(panel + j * pstride + 64 * q));               \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {                                   \
        int32_t t;                                                                            \
        memcpy(&t, rows + (long)i * ldr + 4 * q, 4);                                          \
        const __m512i b = _mm512_set1_epi32(t);                                               \
        _Pragma("GCC unroll 4") for (int j = 0; j < NP; ++j)                                  \
          c[i][j] = ROWS_U8 ? _mm512_dpbusd_epi32(c[i][j], b, p[j])                           \
                            : _mm512_dpbusd_epi32(c[i][j], p[j], b);                          \
      }                                                                                       \
    }                                                                                         \
    /* the fix slots of rows i < nrow (after K's 4 k4 bytes): value v at column k is one more \
       vpdpbusd of the panels' step k / 4 with v alone in byte k % 4 of the broadcast */      \
    if (!ROWS_U8 && nfix > 0) _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {           \
      const uint8_t* s = rows + (long)i * ldr + 4 * k4;                                       \
      for (int f = 0; i < nrow && f < nfix && s[0] != 0; ++f, s += 4) {                       \
        const int k = s[2] | s[3] << 8;                                                       \
        if (k >= 4 * k4) continue; /* never from ember's packing: the weights are data */     \
        const __m512i b = _mm512_set1_epi32((int32_t)((uint32_t)s[0] << (8 * (k & 3))));      \
        _Pragma("GCC unroll 4") for (int j = 0; j < NP; ++j) c[i][j] = _mm512_dpbusd_epi32(  \
            c[i][j], _mm512_loadu_si512((const void*)(panel + j * pstride + 64 * (k >> 2))), \
            b);                                                                               \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                                       \
      _Pragma("GCC unroll 4") for (int j = 0; j < NP; ++j) acc[S * i + j] = c[i][j];          \
  }
/* the conv: 8 rows x 3 panels (24 accumulators: per step 3 panel loads from L2 for 24
   products, where 4 x 4 streamed 4 for 16), 4-row tiles for a last block of 1-4 rows */
EMBER_Q8_TILE512(ember_q8_conv512_8x3, 8, 3, 3, 0)
EMBER_Q8_TILE512(ember_q8_conv512_8x2, 8, 2, 3, 0)
EMBER_Q8_TILE512(ember_q8_conv512_8x1, 8, 1, 3, 0)
EMBER_Q8_TILE512(ember_q8_conv512_4, 4, 4, 4, 0)
EMBER_Q8_TILE512(ember_q8_conv512_2, 4, 2, 4, 0)
EMBER_Q8_TILE512(ember_q8_conv512_1, 4, 1, 4, 0)
EMBER_Q8_TILE512(ember_q8_dense512_4, 4, 4, 4, 1)
EMBER_Q8_TILE512(ember_q8_dense512_2, 4, 2, 4, 1)
EMBER_Q8_TILE512(ember_q8_dense512_1, 4, 1, 4, 1)
#undef EMBER_Q8_TILE512

/* one row (unsigned, broadcast) x 4 weight panels, the even and odd K steps in separate
   accumulators (8 chains: a classifier at batch 1 was latency-bound on the 4 of one row, or
   computed 4 rows for 1 with the 4-row tile): acc[j] as the 4-row tile's row 0 */
static __attribute__((noinline, unused)) void ember_q8_dense512_row4(const uint8_t* row,
                                                                     const uint8_t* panel,
                                                                     long pstride, int k4,
                                                                     __m512i* acc) {
  __m512i c[2][4];
  _Pragma("GCC unroll 4") for (int j = 0; j < 4; ++j) c[0][j] = c[1][j] = _mm512_setzero_si512();
  int q = 0;
  for (; q + 2 <= k4; q += 2) {
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; ++h) {
      int32_t t;
      memcpy(&t, row + 4 * (q + h), 4);
      const __m512i b = _mm512_set1_epi32(t);
      _Pragma("GCC unroll 4") for (int j = 0; j < 4; ++j) c[h][j] = _mm512_dpbusd_epi32(
          c[h][j], b, _mm512_loadu_si512((const void*)(panel + j * pstride + 64 * (q + h))));
    }
  }
  if (q < k4) {
    int32_t t;
    memcpy(&t, row + 4 * q, 4);
    const __m512i b = _mm512_set1_epi32(t);
    _Pragma("GCC unroll 4") for (int j = 0; j < 4; ++j) c[0][j] = _mm512_dpbusd_epi32(
        c[0][j], b, _mm512_loadu_si512((const void*)(panel + j * pstride + 64 * q)));
  }
  _Pragma("GCC unroll 4") for (int j = 0; j < 4; ++j) acc[j] = _mm512_add_epi32(c[0][j], c[1][j]);
}

/* the 8-row tiles from this many 4-byte steps of K on: below, 4 x 4 (MobileNetV2's 1x1
   expansions of K 16 and 24 at 112x112 and 56x56 ran 0.169 -> 0.188 and 0.058 -> 0.070 ms
   on 8 x 3, epilogue-bound; ResNet-50's 56x56 1x1 of K 64, 16 steps: 64 -> 256 0.198 ->
   0.172 ms (4 layers alike), 64 -> 64 0.058 -> 0.051 as 4 x 4; MobileNetV2 whole 1.81 ->
   1.78 ms; 1 thread, in-process interleaved, thread CPU time, load average 13-16) */
#define EMBER_Q8_EIGHT_ROWS_K4 32
/* from this many 4-byte steps of K on (4 panels of 64 KB: out of L1), a block's last 4
   panels run as 8 x 2 twice, half the panel loads from L2 of the 4 x 4 tile's (ResNet-50
   int8, 1 thread: 7x7 3x3 layers 0.443 -> 0.399 and 0.433 -> 0.415 ms, 14x14 3x3 1.003 ->
   0.964 (3 calls), 7x7 1x1 of K 2048 0.201 -> 0.186; at K 256, 16 KB panels, 4 x 4 stays:
   14x14 1x1 0.155 -> 0.172 as 8 x 2) */
#define EMBER_Q8_TWO_PAIRS_K4 256

/* the tiles' int8 outputs of a row's 1-4 panels requantized together (ember_q8_store64:
   3 packs and a permute) into one (masked) 64-byte store, where each 16-position panel
   took its own vpmovdb and 16-byte masked store (1 thread, in-process interleaved, thread
   CPU time, load 1-2, 0 -> 1: ResNet-50 int8 13.21 -> 12.91 and 12.88 -> 12.75 ms,
   MobileNetV2 int8 1.656 -> 1.534 ms; the same bytes) */
#define EMBER_Q8_PACKED_STORES 1

/* up to 8 weight rows (`rows`; the packed weight has them up to a multiple of 4) times np
   consecutive panels of a convolution, requantized into y (row i at y + i * stride, panel
   j's 16 positions at 16 j, `valid` positions in all) or, with y32, stored as int32 */
static inline void ember_q8_conv_tiles512(const uint8_t* wrows, int ldw, const uint8_t* panels,
                                          int np, int k4, int nfix, const int32_t* bias,
                                          const float* mult, int rows, const ember_q8_epi* e,
                                          uint8_t* y, int32_t* y32, long stride, int valid) {
  const long pstride = (long)k4 * 64;
  /* 8-row tiles over groups of 3 panels up to `split`; the rest (all of a short sum, the
     last 4 panels where 3-groups would leave 1: 7x7 maps are 4 panels) as 4-row blocks, or
     on long sums as two 8-row tiles of 2 */
  const int split = rows <= 4 || k4 < EMBER_Q8_EIGHT_ROWS_K4               ? 0
                    : np % 3 == 1 && np >= 4 && k4 < EMBER_Q8_TWO_PAIRS_K4 ? np - 4
                                                                           : np;
  if (rows > 4 && split < np) {
    const long at = 16L * split;
    for (int h = 0; h < rows; h += 4)
      ember_q8_conv_tiles512(wrows + (long)h * ldw, ldw, panels + split * pstride, np - split, k4,
                             nfix, bias + h, mult != NULL ? mult + h : NULL,
                             rows - h < 4 ? rows - h : 4, e, y != NULL ? y + h * stride + at : NULL,
                             y32 != NULL ? y32 + h * stride + at : NULL, stride, valid - (int)at);
    if (split == 0) return;
    np = split;
  }
  int32_t b8[8]; /* bias is not padded to the tile's rows */
  for (int i = 0; i < 8; ++i) b8[i] = i < rows ? bias[i] : 0;
  const ember_q8_epi512 v = ember_q8_epi512_of(e);
  const int eight = rows > 4, S = eight ? 3 : 4, G = eight ? 3 : 4;
  __m512i acc[24];
  for (int j0 = 0, n = 0; j0 < np; j0 += n) {
    n = np - j0 < G ? np - j0 : eight && np - j0 == 4 ? 2 : G;
    const uint8_t* pan = panels + j0 * pstride;
    if (eight) {
      if (n == 3) ember_q8_conv512_8x3(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
      else if (n == 2) ember_q8_conv512_8x2(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
      else ember_q8_conv512_8x1(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
    } else if (n == 4) {
      ember_q8_conv512_4(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
    } else if (n == 3) { /* 2 + 1 */
      __m512i one[16];
      ember_q8_conv512_2(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
      ember_q8_conv512_1(wrows, ldw, pan + 2 * pstride, pstride, k4, b8, nfix, rows, one);
      for (int i = 0; i < 4; ++i) acc[4 * i + 2] = one[4 * i];
    } else if (n == 2) {
      ember_q8_conv512_2(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
    } else {
      ember_q8_conv512_1(wrows, ldw, pan, pstride, k4, b8, nfix, rows, acc);
    }
#if EMBER_Q8_PACKED_STORES
    if (y32 == NULL) { /* the n panels' (up to 64) bytes of row i in one store */
      const int left = valid - 16 * j0, nb = left < 16 * n ? left : 16 * n;
      const __mmask64 keep = nb >= 64  ? ~(__mmask64)0
                             : nb <= 0 ? (__mmask64)0
                                       : ((__mmask64)1 << nb) - 1;
      const __m512i zy = _mm512_set1_epi16(e->zy16), lo = _mm512_set1_epi16(e->lo16);
      for (int i = 0; i < rows; ++i) {
        const __m512i* a = acc + S * i;
        ember_q8_store64(a[0], a[n > 1], a[n > 2 ? 2 : 0], a[n > 3 ? 3 : 0],
                         _mm512_set1_ps(mult[i]), zy, lo, e->is_signed, e->cap, keep,
                         y + i * stride + 16 * j0);
      }
      continue;
    }
#endif
    for (int i = 0; i < rows; ++i) {
      const __m512 m = y32 != NULL ? _mm512_setzero_ps() : _mm512_set1_ps(mult[i]);
      for (int j = 0; j < n; ++j) {
        const int at = 16 * (j0 + j), count = valid - at < 16 ? valid - at : 16;
        const __mmask16 k = ember_q8_mask16(count);
        if (y32 != NULL)
          _mm512_mask_storeu_epi32(y32 + i * stride + at, k, acc[S * i + j]);
        else
          _mm_mask_storeu_epi8(y + i * stride + at, k, ember_q8_requant512(acc[S * i + j], m, &v));
      }
    }
  }
}

/* a last panel of at most this many positions runs as dot products of K-contiguous patch
   columns (ember_q8_tail_cols) with the weight rows instead of a 16-position panel tile,
   where K has EMBER_Q8_TAIL_K4 4-byte steps per column at least (the dots' 8 x ncol sums
   are reduced to scalars at the end, and the other panels' tiles change shape): ResNet-50
   int8 (1 thread, in-process interleaved, thread CPU time) 7x7 1x1 layers (49 positions:
   3 panels + 1, k4 128-512) 0.426 -> 0.340, 0.264 -> 0.213, 0.182 -> 0.163 ms; 14x14 1x1
   of k4 256 (196: 12 + 4) 0.138 -> 0.134; but 14x14 1x1 of k4 64 (4 columns) 0.155 ->
   0.168, and MobileNetV2's 7x7 1x1 of k4 40 and 80 (1 column) 0.036 -> 0.040 and 0.082 ->
   0.090, hence the bound */
#define EMBER_Q8_TAIL_COLS 4
#define EMBER_Q8_TAIL_K4 96

/* the first `n` positions of a packed panel ([k4][16][4]) as K-contiguous columns (4 k4
   bytes each, column j at cols + j * 4 k4): the data the dot products read */
static inline void ember_q8_tail_cols(const uint8_t* panel, int k4, int n, uint8_t* cols) {
  for (int j = 0; j < n; ++j)
    for (int q = 0; q < k4; ++q) memcpy(cols + (long)j * 4 * k4 + 4 * q, panel + 64 * q + 4 * j, 4);
}

/* R weight rows x NC columns: 64-byte steps of vpdpbusd (row bytes signed, column bytes
   unsigned), R x NC independent sums reduced to int32 in out[NC i + j] */
#define EMBER_Q8_DOTS512(NAME, R, NC)                                                         \
  static __attribute__((noinline, unused)) void NAME(const uint8_t* wrows, int ldw,          \
                                                     const uint8_t* cols, int kb,             \
                                                     int32_t* out) {                          \
    __m512i a[R][NC];                                                                         \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                                       \
      _Pragma("GCC unroll 4") for (int j = 0; j < NC; ++j) a[i][j] = _mm512_setzero_si512(); \
    /* whole 64-byte steps by plain loads, the last partial one masked */                     \
    for (int k = 0; k < kb; k += 64) {                                                        \
      const int full = kb - k >= 64;                                                          \
      const __mmask64 m = full ? ~(__mmask64)0 : ((__mmask64)1 << (kb - k)) - 1;              \
      __m512i c[NC];                                                                          \
      _Pragma("GCC unroll 4") for (int j = 0; j < NC; ++j) {                                  \
        const void* at = (const void*)(cols + (long)j * kb + k);                              \
        c[j] = full ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi8(m, at);                \
      }                                                                                       \
      _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {                                   \
        const void* at = (const void*)(wrows + (long)i * ldw + k);                            \
        const __m512i w = full ? _mm512_loadu_si512(at) : _mm512_maskz_loadu_epi8(m, at);     \
        _Pragma("GCC unroll 4") for (int j = 0; j < NC; ++j)                                  \
          a[i][j] = _mm512_dpbusd_epi32(a[i][j], c[j], w);                                    \
      }                                                                                       \
    }                                                                                         \
    _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i)                                       \
      _Pragma("GCC unroll 4") for (int j = 0; j < NC; ++j)                                    \
        out[NC * i + j] = _mm512_reduce_add_epi32(a[i][j]);                                   \
  }
EMBER_Q8_DOTS512(ember_q8_dots512_8x1, 8, 1)
EMBER_Q8_DOTS512(ember_q8_dots512_8x2, 8, 2)
EMBER_Q8_DOTS512(ember_q8_dots512_4x1, 4, 1)
EMBER_Q8_DOTS512(ember_q8_dots512_4x2, 4, 2)
EMBER_Q8_DOTS512(ember_q8_dots512_4x4, 4, 4)
#undef EMBER_Q8_DOTS512

/* the `ncol` (1-4) columns of a partial last panel times up to 8 weight rows, + bias and the
   fix slots, stored as the tiles store a panel of `ncol` valid positions (same bytes) */
static inline void ember_q8_conv_dots512(const uint8_t* wrows, int ldw, const uint8_t* cols,
                                         int ncol, int k4, int nfix, const int32_t* bias,
                                         const float* mult, int rows, const ember_q8_epi* e,
                                         uint8_t* y, int32_t* y32, long stride) {
  const int kb = 4 * k4, nc = ncol <= 1 ? 1 : ncol <= 2 ? 2 : 4;
  int32_t s[32] = {0};
  if (rows > 4) {
    if (nc == 1) ember_q8_dots512_8x1(wrows, ldw, cols, kb, s);
    else if (nc == 2) ember_q8_dots512_8x2(wrows, ldw, cols, kb, s);
    else { /* two 4 x 4 (8 x 4 held 32 sums: more than the registers) */
      ember_q8_dots512_4x4(wrows, ldw, cols, kb, s);
      ember_q8_dots512_4x4(wrows + 4L * ldw, ldw, cols, kb, s + 16);
    }
  } else {
    if (nc == 1) ember_q8_dots512_4x1(wrows, ldw, cols, kb, s);
    else if (nc == 2) ember_q8_dots512_4x2(wrows, ldw, cols, kb, s);
    else ember_q8_dots512_4x4(wrows, ldw, cols, kb, s);
  }
  for (int i = 0; i < rows; ++i) { /* the fix slots, into the sums */
    const uint8_t* f = wrows + (long)i * ldw + kb;
    for (int t = 0; t < nfix && f[0] != 0; ++t, f += 4) {
      const int k = f[2] | f[3] << 8;
      if (k >= kb) continue; /* never from ember's packing: the weights are data */
      for (int j = 0; j < ncol; ++j)
        s[nc * i + j] += (int8_t)f[0] * (int32_t)cols[(long)j * kb + k];
    }
  }
  /* per column one vector of the rows' sums (lanes = rows, each with its own multiplier) */
  const __mmask16 km = ember_q8_mask16(rows);
  const __m512i b = _mm512_maskz_loadu_epi32(km, (const void*)bias);
  const __m512 m = y32 != NULL ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(km, mult);
  const ember_q8_epi512 v = y32 != NULL ? (ember_q8_epi512){0} : ember_q8_epi512_of(e);
  const __m512i lo = _mm512_loadu_si512((const void*)s);
  const __m512i hi = _mm512_loadu_si512((const void*)(s + 16));
  for (int j = 0; j < ncol; ++j) {
    const __m512i idx = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0),
                           _mm512_set1_epi32(nc)),
        _mm512_set1_epi32(j));
    const __m512i acc = _mm512_add_epi32(_mm512_permutex2var_epi32(lo, idx, hi), b);
    if (y32 != NULL) {
      int32_t out[16];
      _mm512_storeu_si512((void*)out, acc);
      for (int i = 0; i < rows; ++i) y32[i * stride + j] = out[i];
      continue;
    }
    uint8_t out[16];
    _mm_storeu_si128((__m128i*)out, ember_q8_requant512(acc, m, &v));
    for (int i = 0; i < rows; ++i) y[i * stride + j] = out[i];
  }
}

/* the tiles over np panels, or with ncol > 0 (`cols` from ember_q8_tail_cols of the last
   panel, which holds ncol valid positions) the tiles over np - 1 and dot products for it */
static inline void ember_q8_conv_block512(const uint8_t* wrows, int ldw, const uint8_t* panels,
                                          int np, int k4, int nfix, const int32_t* bias,
                                          const float* mult, int rows, const ember_q8_epi* e,
                                          uint8_t* y, int32_t* y32, long stride, int valid,
                                          const uint8_t* cols, int ncol) {
  if (ncol > 0) {
    np -= 1;
    const long at = 16L * np;
    ember_q8_conv_dots512(wrows, ldw, cols, ncol, k4, nfix, bias, mult, rows, e,
                          y != NULL ? y + at : NULL, y32 != NULL ? y32 + at : NULL, stride);
    valid = 16 * np;
  }
  if (np > 0)
    ember_q8_conv_tiles512(wrows, ldw, panels, np, k4, nfix, bias, mult, rows, e, y, y32, stride,
                           valid);
}

/* weight panels [pb, pe) (16 output columns each) times every row of xr (R rows of ldr
   bytes, unsigned, zero rows up to a multiple of 4), + bias, requantized into y (N columns)
   or stored as int32 into y32 */
static inline void ember_q8_dense_range512(const uint8_t* xr, int ldr, const uint8_t* w, int k4,
                                           const int32_t* bias, const float* mult,
                                           const ember_q8_epi* e, uint8_t* y, int32_t* y32,
                                           int R, int N, int pb, int pe) {
  const long pstride = (long)k4 * 64;
  const ember_q8_epi512 v = y32 != NULL ? (ember_q8_epi512){0} : ember_q8_epi512_of(e);
  __m512i acc[16];
  for (int pn = pb; pn < pe; pn += 4) {
    const int n = pe - pn < 4 ? pe - pn : 4;
    const uint8_t* pan = w + pn * pstride;
    for (int r0 = 0; r0 < R; r0 += 4) {
      const uint8_t* rows = xr + (long)r0 * ldr;
      if (n == 4 && R - r0 == 1) {
        ember_q8_dense512_row4(rows, pan, pstride, k4, acc);
      } else if (n == 4) {
        ember_q8_dense512_4(rows, ldr, pan, pstride, k4, NULL, 0, 0, acc);
      } else if (n == 3) { /* 2 + 1 */
        __m512i one[16];
        ember_q8_dense512_2(rows, ldr, pan, pstride, k4, NULL, 0, 0, acc);
        ember_q8_dense512_1(rows, ldr, pan + 2 * pstride, pstride, k4, NULL, 0, 0, one);
        for (int i = 0; i < 4; ++i) acc[4 * i + 2] = one[4 * i];
      } else if (n == 2) {
        ember_q8_dense512_2(rows, ldr, pan, pstride, k4, NULL, 0, 0, acc);
      } else {
        ember_q8_dense512_1(rows, ldr, pan, pstride, k4, NULL, 0, 0, acc);
      }
      const int rws = R - r0 < 4 ? R - r0 : 4;
      for (int j = 0; j < n; ++j) {
        const int n0 = 16 * (pn + j), count = N - n0 < 16 ? N - n0 : 16;
        const __mmask16 k = ember_q8_mask16(count);
        const __m512i b = _mm512_loadu_si512((const void*)(bias + n0)); /* padded to 16 */
        const __m512 m = y32 != NULL ? _mm512_setzero_ps() : _mm512_loadu_ps(mult + n0);
        for (int i = 0; i < rws; ++i) {
          const __m512i a = _mm512_add_epi32(acc[4 * i + j], b);
          const long at = (long)(r0 + i) * N + n0;
          if (y32 != NULL)
            _mm512_mask_storeu_epi32(y32 + at, k, a);
          else
            _mm_mask_storeu_epi8(y + at, k, ember_q8_requant512(a, m, &v));
        }
      }
    }
  }
}
#endif
"""
