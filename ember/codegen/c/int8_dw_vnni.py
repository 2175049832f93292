"""C source of the AVX-512 VNNI depthwise kernels (3x3, taps in int8's range): a dword of 4
image bytes times (w0, w1, w2, 0) on ``vpdpbusd`` is one row of an output's taps, so a
row of taps is one instruction per 16 outputs, with no widening to int16 and no pairs'
shuffles (``int8_dw_same3.py``'s kernels, kept for wider taps).

* ``ember_q8_dw_s1flat``: stride 1 'same', 64 outputs of the flattened map a step (the
  bytes a tap must not see masked to the zero point by a table found once per task);
* ``ember_q8_dw_s2vnni``: stride 2, an output row at a time, two phases of 16 outputs;
* ``ember_q8_dw_s2small``: stride 2 on maps up to 14 wide (outputs up to 7), 4 output rows
  a vector, the taps gathered by ``vpermt2b`` from the 9 image rows they need.

The zero point comes off the bias once (int8 data flipped to uint8); the integer sums are
the planes' (exact), requantized as ``ember_q8_store64``, so the bytes are the AVX2
build's. This text follows ``int8_dw_same3.py``'s and precedes ``int8_dwconv_add.py``'s.
"""

from __future__ import annotations

DW_VNNI_C = r"""#if defined(__AVX512BW__)
/* per step of 64 outputs of ember_q8_dw_s1flat, the byte masks of its 12 loads ([kh][d]) */
enum { EMBER_Q8_S1FLAT_TAB = 12 };
/* the nibbles of dwords j < k of a mask (k clamped to [0, 16]) */
static inline uint64_t ember_q8_nibbles_below(long k) {
  return k <= 0 ? 0 : k >= 16 ? ~0ull : (1ull << (4 * k)) - 1;
}

/* the masks of ember_q8_dw_s1flat for every step of an H x W map into tab: load (kh, d) of
   step f holds, as dword j, the bytes f + 4j + d - 1 + (kh - 1) W + [0, 4) of output
   o = f + 4j + d: byte 0 (tap kw = 0) where o has a column left, byte 1 (kw = 1) always,
   byte 2 (kw = 2) where it has a column right, byte 3 (weight 0) never; all of them only
   where o < H W and the row kh - 1 away is in the image. Dword j of phase d is below a
   bound b where j < ceil((b - f - d) / 4); the first and last columns of the rows that
   meet the step are cleared one bit each */
static inline void ember_q8_s1flat_masks(int H, int W, uint64_t* tab) {
  const long P = (long)H * W;
  for (long f = 0; f < P; f += 64, tab += EMBER_Q8_S1FLAT_TAB) {
    uint64_t mid[4];
    for (int d = 0; d < 4; ++d) {
      const long n = P - f - d;
      mid[d] = ember_q8_nibbles_below(n <= 0 ? 0 : (n + 3) / 4) & 0x7777777777777777ull;
    }
    for (long s = (f + W - 1) / W * W; s < f + 64 && s < P; s += W) /* column 0: no left */
      mid[(s - f) % 4] &= ~(1ull << (4 * ((s - f) / 4)));
    for (long s = (f + W) / W * W; s <= f + 64 && s <= P; s += W) /* column W - 1: no right */
      mid[(s - 1 - f) % 4] &= ~(4ull << (4 * ((s - 1 - f) / 4)));
    for (int d = 0; d < 4; ++d) {
      const long up = W - f - d, down = P - W - f - d; /* o >= W: a row above; o < P - W */
      tab[d] = mid[d] & ~ember_q8_nibbles_below(up <= 0 ? 0 : (up + 3) / 4);
      tab[4 + d] = mid[d];
      tab[8 + d] = mid[d] & ember_q8_nibbles_below(down <= 0 ? 0 : (down + 3) / 4);
    }
  }
}

#if defined(__AVX512VNNI__)
/* one channel of a 3x3 stride-1 'same' depthwise convolution (weights in int8's range) on
   the flattened image, 64 outputs a step, on vpdpbusd: ember_q8_dw_s1rows's dwords (bytes
   o - 1, o, o + 1 of a row of the image and a fourth of weight 0 make output o's 3 taps of
   that row; 4 loads a row of taps, bytes -1, 0, 1, 2 from the step, cover outputs 0-3
   mod 4) taken across the rows of the map: the bytes a tap must not see (the column left
   of column 0, right of the last, the rows above and below the image) are masked to the
   zero point by the table of ember_q8_s1flat_masks, found once per task. Small maps fill
   the vectors (14x14: 4 steps of 64, not 7 vectors of 32 with ember_q8_dw_same3; 7x7: 1,
   not 2) with 12 loads and 12 vpdpbusd a step, no widening and no pairs' shuffles; the
   same integer sums (so bytes) as the planes' */
static inline void ember_q8_dw_s1flat(const uint8_t* xc, const int16_t* wc, int32_t bias,
                                      float mult, const ember_q8_epi* e, uint8_t* yc, int H,
                                      int W, int zx, int x_signed, const uint64_t* tab) {
  const long P = (long)H * W;
  const int flip = x_signed ? 0x80 : 0, zu = zx + (x_signed ? 128 : 0);
  const __m512i fb = _mm512_set1_epi8((char)flip), zraw = _mm512_set1_epi8((char)(zu ^ flip));
  int32_t wsum = 0;
  __m512i wr[3];
  for (int kh = 0; kh < 3; ++kh) {
    const uint32_t q = (uint32_t)(uint8_t)wc[3 * kh] | (uint32_t)(uint8_t)wc[3 * kh + 1] << 8 |
                       (uint32_t)(uint8_t)wc[3 * kh + 2] << 16;
    wr[kh] = _mm512_set1_epi32((int32_t)q);
    wsum += wc[3 * kh] + wc[3 * kh + 1] + wc[3 * kh + 2];
  }
  const __m512i b0 = _mm512_set1_epi32(bias - zu * wsum);
  const __m512 m = _mm512_set1_ps(mult);
  const __m512 top = _mm512_set1_ps(e->cap ? 1073741824.0f : INFINITY);
  const __m512i zy = _mm512_set1_epi16(e->zy16), lo = _mm512_set1_epi16(e->lo16);
  const __m512i tr = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  for (long f = 0; f < P; f += 64, tab += EMBER_Q8_S1FLAT_TAB) {
    __m512i acc[4] = {b0, b0, b0, b0};
    _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; ++kh) {
      _Pragma("GCC unroll 4") for (int d = 0; d < 4; ++d) {
        const intptr_t at = (intptr_t)f + d - 1 + (intptr_t)(kh - 1) * W; /* may be < 0 */
        const uint8_t* src = (const uint8_t*)((uintptr_t)xc + (uintptr_t)at);
        const __m512i x = _mm512_mask_loadu_epi8(zraw, (__mmask64)tab[4 * kh + d], src);
        acc[d] = _mm512_dpbusd_epi32(acc[d], x_signed ? _mm512_xor_si512(x, fb) : x, wr[kh]);
      }
    }
#define EMBER_Q8_I32(X) \
  _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(X), m), top))
    __m512i s01 = _mm512_packs_epi32(EMBER_Q8_I32(acc[0]), EMBER_Q8_I32(acc[1]));
    __m512i s23 = _mm512_packs_epi32(EMBER_Q8_I32(acc[2]), EMBER_Q8_I32(acc[3]));
#undef EMBER_Q8_I32
    s01 = _mm512_max_epi16(_mm512_adds_epi16(s01, zy), lo);
    s23 = _mm512_max_epi16(_mm512_adds_epi16(s23, zy), lo);
    const __m512i b = e->is_signed ? _mm512_packs_epi16(s01, s23) : _mm512_packus_epi16(s01, s23);
    const long n = P - f < 64 ? P - f : 64;
    const __mmask64 kn = n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1;
    _mm512_mask_storeu_epi8(yc + f, kn, _mm512_shuffle_epi8(b, tr));
  }
}

/* one channel of a 3x3 stride-2 depthwise convolution (weights in int8's range, padding 1
   before, 0 or 1 after) on vpdpbusd, an output row at a time: the dword at image byte
   2 ow - 1 of a row holds output ow's 3 taps of that row (and a fourth byte of weight 0),
   and outputs ow, ow + 2 sit 4 bytes apart, so one load from byte 2 (ow0 + p) - 1 gives
   the 16 outputs ow0 + p + 2j of phase p: 6 loads and 6 vpdpbusd for 32 outputs, not
   ember_q8_dw_s2rows's 9 extractions and 5 pairs of shuffles and madds; bytes outside the
   image loaded as the zero point, the zero point off the bias once (int8 data flipped to
   uint8). The same integer sums (so bytes) as the planes' */
static inline void ember_q8_dw_s2vnni(const uint8_t* xc, const int16_t* wc, int32_t bias,
                                      float mult, const ember_q8_epi* e, uint8_t* yc, int H,
                                      int W, int OH, int OW, int zx, int x_signed) {
  const int flip = x_signed ? 0x80 : 0, zu = zx + (x_signed ? 128 : 0);
  const __m512i fb = _mm512_set1_epi8((char)flip), zraw = _mm512_set1_epi8((char)(zu ^ flip));
  const __m512i zb = _mm512_set1_epi8((char)zu);
  int32_t wsum = 0;
  __m512i wr[3];
  for (int kh = 0; kh < 3; ++kh) {
    const uint32_t q = (uint32_t)(uint8_t)wc[3 * kh] | (uint32_t)(uint8_t)wc[3 * kh + 1] << 8 |
                       (uint32_t)(uint8_t)wc[3 * kh + 2] << 16;
    wr[kh] = _mm512_set1_epi32((int32_t)q);
    wsum += wc[3 * kh] + wc[3 * kh + 1] + wc[3 * kh + 2];
  }
  const __m512i b0 = _mm512_set1_epi32(bias - zu * wsum);
  const __m512 m = _mm512_set1_ps(mult);
  const __m512 top = _mm512_set1_ps(e->cap ? 1073741824.0f : INFINITY);
  const __m512i zy = _mm512_set1_epi16(e->zy16), lo = _mm512_set1_epi16(e->lo16);
  /* per 128-bit lane: words of outputs 0, 2, 4, 6, 1, 3, 5, 7 (as bytes) in order; then
     the low 8 bytes of each lane together */
  const __m512i tr = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15));
  const __m512i lanes = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for (int ow0 = 0; ow0 < OW; ow0 += 32) {
    __mmask64 k[2];
    for (int p = 0; p < 2; ++p) { /* image bytes [0, W) of the load from 2 (ow0 + p) - 1 */
      const int base = 2 * (ow0 + p) - 1, i0 = base < 0 ? -base : 0;
      const int i1 = W - base < 64 ? W - base : 64;
      k[p] = i1 <= i0 ? 0
                      : (i1 >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << i1) - 1) &
                            ~(((__mmask64)1 << i0) - 1);
    }
    const int n = OW - ow0 < 32 ? OW - ow0 : 32;
    const __mmask32 kn = n >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << n) - 1;
    for (int oh = 0; oh < OH; ++oh) {
      __m512i a0 = b0, a1 = b0;
      _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; ++kh) {
        const int r = 2 * oh + kh - 1;
        if (r < 0 || r >= H) {
          a0 = _mm512_dpbusd_epi32(a0, zb, wr[kh]);
          a1 = _mm512_dpbusd_epi32(a1, zb, wr[kh]);
          continue;
        }
        const uint8_t* row = xc + (long)r * W + 2 * ow0;
        __m512i x0 = _mm512_mask_loadu_epi8(zraw, k[0], (const uint8_t*)((uintptr_t)row - 1));
        __m512i x1 = _mm512_mask_loadu_epi8(zraw, k[1], row + 1);
        if (x_signed) x0 = _mm512_xor_si512(x0, fb), x1 = _mm512_xor_si512(x1, fb);
        a0 = _mm512_dpbusd_epi32(a0, x0, wr[kh]);
        a1 = _mm512_dpbusd_epi32(a1, x1, wr[kh]);
      }
#define EMBER_Q8_I32(X) \
  _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(X), m), top))
      __m512i s = _mm512_packs_epi32(EMBER_Q8_I32(a0), EMBER_Q8_I32(a1));
#undef EMBER_Q8_I32
      s = _mm512_max_epi16(_mm512_adds_epi16(s, zy), lo);
      __m512i b = e->is_signed ? _mm512_packs_epi16(s, s) : _mm512_packus_epi16(s, s);
      b = _mm512_permutexvar_epi64(lanes, _mm512_shuffle_epi8(b, tr));
      _mm256_mask_storeu_epi8(yc + (long)oh * OW + ow0, kn, _mm512_castsi512_si256(b));
    }
  }
}

#if defined(__AVX512VBMI__)
/* ember_q8_dw_s2small on maps up to this width: 9 image rows (4 output rows' taps) and a
   byte of the zero point fit vpermt2b's 128-byte table */
#define EMBER_Q8_S2SMALL_MAX_W 14
/* the vpermt2b indexes of ember_q8_dw_s2small for maps W wide, OW outputs a row, into tab:
   per kh and phase p 64 bytes (byte b of dword j of lane l: row 2 l + kh of the table,
   column 2 (p + 2 j) - 1 + b, or byte 127, the zero point), then 32 bytes placing the 4
   rows' outputs (byte k: row k / OW of the lanes' low 8, column k % OW). Found once per
   task: per channel they took 3 of 4 parts of the kernel's time */
static inline void ember_q8_s2small_tab(int W, int OW, uint8_t* tab) {
  for (int kh = 0; kh < 3; ++kh) {
    for (int p = 0; p < 2; ++p) {
      for (int l = 0; l < 4; ++l) {
        for (int j = 0; j < 4; ++j) {
          for (int b = 0; b < 4; ++b, ++tab) {
            const int col = 2 * (p + 2 * j) - 1 + b;
            *tab = b < 3 && col >= 0 && col < W ? (uint8_t)((2 * l + kh) * W + col) : 127;
          }
        }
      }
    }
  }
  memset(tab, 0, 32);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < OW; ++c) tab[r * OW + c] = (uint8_t)(8 * r + c);
  }
}

/* bits [lo, hi) of a 64-bit mask (both clamped to [0, 64]) */
static inline __mmask64 ember_q8_bit_range(long lo, long hi) {
  lo = lo < 0 ? 0 : lo > 64 ? 64 : lo;
  hi = hi < lo ? lo : hi > 64 ? 64 : hi;
  const __mmask64 below = hi >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << hi) - 1;
  return below & ~(lo >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << lo) - 1);
}

/* one channel of a 3x3 stride-2 depthwise convolution (weights in int8's range, padding 1
   before, 0 or 1 after) of a map up to 14 wide (outputs up to 7 a row), 4 output rows a
   vector: ember_q8_dw_s2vnni's dwords, one 128-bit lane per output row (phase p: outputs
   p, p + 2, p + 4, p + 6), gathered by vpermt2b from the 9 image rows the 4 rows' taps need
   (two masked loads: rows outside the image and byte 127 the zero point, the index of the
   columns outside it; indexes of ember_q8_s2small_tab); the 4 rows' bytes stored together
   (vpermb). On MobileNetV2's 14 -> 7 layer 2 vectors a channel, not 7 of 7 lanes in 32 */
static inline void ember_q8_dw_s2small(const uint8_t* xc, const int16_t* wc, int32_t bias,
                                       float mult, const ember_q8_epi* e, uint8_t* yc, int H,
                                       int W, int OH, int OW, int zx, int x_signed,
                                       const uint8_t* tab) {
  const int flip = x_signed ? 0x80 : 0, zu = zx + (x_signed ? 128 : 0);
  const __m512i fb = _mm512_set1_epi8((char)flip), zraw = _mm512_set1_epi8((char)(zu ^ flip));
  const long P = (long)H * W;
  int32_t wsum = 0;
  __m512i wr[3], idx[3][2];
  for (int kh = 0; kh < 3; ++kh) {
    const uint32_t q = (uint32_t)(uint8_t)wc[3 * kh] | (uint32_t)(uint8_t)wc[3 * kh + 1] << 8 |
                       (uint32_t)(uint8_t)wc[3 * kh + 2] << 16;
    wr[kh] = _mm512_set1_epi32((int32_t)q);
    wsum += wc[3 * kh] + wc[3 * kh + 1] + wc[3 * kh + 2];
    idx[kh][0] = _mm512_loadu_si512((const void*)(tab + 128 * kh));
    idx[kh][1] = _mm512_loadu_si512((const void*)(tab + 128 * kh + 64));
  }
  const __m256i out = _mm256_loadu_si256((const __m256i*)(tab + 384));
  const __m512i b0 = _mm512_set1_epi32(bias - zu * wsum);
  const __m512 m = _mm512_set1_ps(mult);
  const __m512 top = _mm512_set1_ps(e->cap ? 1073741824.0f : INFINITY);
  const __m512i zy = _mm512_set1_epi16(e->zy16), lo = _mm512_set1_epi16(e->lo16);
  const __m512i tr = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15));
  const __m512i lanes = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for (int oh0 = 0; oh0 < OH; oh0 += 4) {
    const long base = (long)(2 * oh0 - 1) * W; /* table byte 0 */
    const long i0 = base < 0 ? -base : 0, i1 = 9L * W < P - base ? 9L * W : P - base;
    const __mmask64 k0 = ember_q8_bit_range(i0, i1), k1 = ember_q8_bit_range(i0 - 64, i1 - 64);
    const uint8_t* src = (const uint8_t*)((uintptr_t)xc + (uintptr_t)(intptr_t)base);
    __m512i t0 = _mm512_mask_loadu_epi8(zraw, k0, src);
    __m512i t1 = _mm512_mask_loadu_epi8(zraw, k1, src + 64);
    if (x_signed) t0 = _mm512_xor_si512(t0, fb), t1 = _mm512_xor_si512(t1, fb);
    __m512i a0 = b0, a1 = b0;
    _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; ++kh) {
      a0 = _mm512_dpbusd_epi32(a0, _mm512_permutex2var_epi8(t0, idx[kh][0], t1), wr[kh]);
      a1 = _mm512_dpbusd_epi32(a1, _mm512_permutex2var_epi8(t0, idx[kh][1], t1), wr[kh]);
    }
#define EMBER_Q8_I32(X) \
  _mm512_cvtps_epi32(_mm512_min_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(X), m), top))
    __m512i s = _mm512_packs_epi32(EMBER_Q8_I32(a0), EMBER_Q8_I32(a1));
#undef EMBER_Q8_I32
    s = _mm512_max_epi16(_mm512_adds_epi16(s, zy), lo);
    __m512i b = e->is_signed ? _mm512_packs_epi16(s, s) : _mm512_packus_epi16(s, s);
    b = _mm512_permutexvar_epi64(lanes, _mm512_shuffle_epi8(b, tr));
    const int n = (OH - oh0 < 4 ? OH - oh0 : 4) * OW;
    _mm256_mask_storeu_epi8(yc + (long)oh0 * OW, (__mmask32)((1ull << n) - 1),
                            _mm256_permutexvar_epi8(out, _mm512_castsi512_si256(b)));
  }
}
#endif
#endif
#endif
"""
