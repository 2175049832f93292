"""C source of the AVX-512 depthwise kernels that read their taps from the image as int16
pairs, no planes (``ember_q8_dw_same3``: 3x3 stride 1 'same' on small maps, ``ember_q8_dw_s2rows``:
3x3 stride 2), for taps past int8's range (the rest take the vpdpbusd kernels of
``int8_dw_vnni.py``), called by ``ember_q8_dw_channel`` of ``int8_dwconv_add.py`` (this
text and then int8_dw_vnni.py's precede that block), and the 32-output requantization
``ember_q8_requant32_dw`` they share with its phase planes.

A 3x3 stride-1 depthwise convolution with padding 1 keeps the map's size, so output
``oh * W + ow`` is grid position ``p`` of the image itself and tap ``(kh, kw)`` the byte at
``p + (kh - 1) * W + kw - 1``: the taps are read straight from the image, 32 lanes at a time,
with the lanes that fall outside it (the row above the first, below the last, left of
column 0, right of the last column: a table of masks per vector, found once per task)
loaded as the zero point, and the 32 outputs stored in place. The sums are the planes'
(the same int16 pairs, exact), so the bytes are the AVX2 build's.
"""

from __future__ import annotations

DW_SAME3_C = r"""#if defined(__AVX512BW__)
/* per 32-position vector of a 3x3 stride-1 'same' depthwise (H x W in, H x W out): the lanes
   in the image, those with a row above, a row below, a column left, a column right */
enum { EMBER_Q8_SAME3_TAB = 5 };
/* ember_q8_dw_same3 up to this width (MobileNetV2 int8, AVX-512, 1 thread, per layer vs the
   int16 planes: 7x7x960 0.108 -> 0.060 ms, 14x14x384 0.094 -> 0.084, 14x14x576 0.069 ->
   0.062; 28x28 the same; 56x56 0.089 -> 0.095 and 112x112 0.070 -> 0.090: on wide rows
   the planes' per-row costs are small and the 9 byte-to-word widenings per vector, not 1,
   load the shuffle unit) */
#define EMBER_Q8_SAME3_MAX_W 16

/* ember_q8_store16c (interleaved) on 32 outputs: the per-lane int16 pack puts them in
   order; the byte saturation of the pack is the min with hi (s >= lo already) */
static inline __m256i ember_q8_requant32_dw(__m512i a0, __m512i a1, __m512 m, __m512i zy,
                                            __m512i lo, __m512i hi, int cap) {
  __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(a0), m);
  __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(a1), m);
  if (cap) {
    v0 = _mm512_min_ps(v0, _mm512_set1_ps(1073741824.0f));
    v1 = _mm512_min_ps(v1, _mm512_set1_ps(1073741824.0f));
  }
  __m512i s = _mm512_packs_epi32(_mm512_cvtps_epi32(v0), _mm512_cvtps_epi32(v1));
  s = _mm512_min_epi16(_mm512_max_epi16(_mm512_adds_epi16(s, zy), lo), hi);
  return _mm512_cvtepi16_epi8(s);
}

/* the 9 taps of 32 positions as int16 lanes (v[9] = v[8], its second weight 0) times the
   weight pairs wp into 32-bit sums, ember_q8_dw_taps512's order: lo positions 0-3, 8-11,
   16-19, 24-27, hi the others */
static inline void ember_q8_dw_pairs(const __m512i* v, const __m512i* wp, __m512i* lo,
                                     __m512i* hi) {
  __m512i l = _mm512_setzero_si512(), h = l;
  _Pragma("GCC unroll 5") for (int t = 0; t < 5; ++t) {
    const __m512i a = v[2 * t], b = v[2 * t + 1];
    l = _mm512_add_epi32(l, _mm512_madd_epi16(_mm512_unpacklo_epi16(a, b), wp[t]));
    h = _mm512_add_epi32(h, _mm512_madd_epi16(_mm512_unpackhi_epi16(a, b), wp[t]));
  }
  *lo = l, *hi = h;
}

/* the masks of ember_q8_dw_same3 for every vector of an H x W map into tab */
static inline void ember_q8_same3_masks(int H, int W, uint32_t* tab) {
  const long P = (long)H * W;
  for (long f = 0, c = 0; f < P; f += 32, tab += EMBER_Q8_SAME3_TAB) {
    uint64_t left = 0, right = 0;
    for (long s = -c; s < 32; s += W) { /* the row whose column 0 is lane s */
      long a = s + 1 < 0 ? 0 : s + 1, b = s + W < 32 ? s + W : 32;
      if (b > a) left |= ((1ull << (b - a)) - 1) << a;
      a = s < 0 ? 0 : s, b = s + W - 1 < 32 ? s + W - 1 : 32;
      if (b > a) right |= ((1ull << (b - a)) - 1) << a;
    }
    const uint64_t all = P - f >= 32 ? 0xFFFFFFFFull : (1ull << (P - f)) - 1;
    const long up = W - f, down = P - W - f; /* lanes >= up have a row above, < down below */
    const uint64_t top = up <= 0 ? all : up >= 32 ? 0 : all & ~((1ull << up) - 1);
    const uint64_t bottom = down >= 32 ? all : down <= 0 ? 0 : all & ((1ull << down) - 1);
    tab[0] = (uint32_t)all, tab[1] = (uint32_t)top, tab[2] = (uint32_t)bottom;
    tab[3] = (uint32_t)(left & all), tab[4] = (uint32_t)(right & all);
    c = (c + 32) % W;
  }
}

/* one channel of a 3x3 stride-1 depthwise convolution with padding 1 straight from the
   image: output p = oh * W + ow is grid position p, tap (kh, kw) the bytes at p + (kh - 1) W
   + kw - 1, the lanes outside the image (masks of ember_q8_same3_masks) loaded as the zero
   point: no int16 plane, no row copies (the sums, and so the bytes, are ember_q8_dw_flat's) */
static inline void ember_q8_dw_same3(const uint8_t* xc, const int16_t* wc, int32_t bias,
                                     float mult, const ember_q8_epi* e, uint8_t* yc, int H,
                                     int W, int zx, int x_signed, const uint32_t* tab) {
  const long P = (long)H * W;
  const __m256i zb = _mm256_set1_epi8((char)zx);
  const __m512i z = _mm512_set1_epi16((int16_t)zx);
  const __m512i zy = _mm512_set1_epi16(e->zy16), lo16 = _mm512_set1_epi16(e->lo16);
  const __m512i hi16 = _mm512_set1_epi16(e->is_signed ? 127 : 255), bv = _mm512_set1_epi32(bias);
  const __m512 m = _mm512_set1_ps(mult);
  __m512i wp[5];
  for (int t = 0; t < 5; ++t) {
    const uint32_t pair = (uint16_t)wc[2 * t] | ((uint32_t)(uint16_t)wc[2 * t + 1] << 16);
    wp[t] = _mm512_set1_epi32((int32_t)pair);
  }
  for (long f = 0; f < P; f += 32, tab += EMBER_Q8_SAME3_TAB) {
    const uint32_t rows[3] = {tab[1], tab[0], tab[2]}, cols[3] = {tab[3], tab[0], tab[4]};
    __m512i v[10];
    _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; ++kh) {
      _Pragma("GCC unroll 3") for (int kw = 0; kw < 3; ++kw) {
        const intptr_t at = (intptr_t)f + (intptr_t)(kh - 1) * W + kw - 1; /* may be < 0 */
        const uint8_t* src = (const uint8_t*)((uintptr_t)xc + (uintptr_t)at);
        const __m256i b = _mm256_mask_loadu_epi8(zb, (__mmask32)(rows[kh] & cols[kw]), src);
        v[3 * kh + kw] =
            _mm512_sub_epi16(x_signed ? _mm512_cvtepi8_epi16(b) : _mm512_cvtepu8_epi16(b), z);
      }
    }
    v[9] = v[8]; /* the last pair: tap 8 twice, its second weight 0 */
    __m512i lo, hi;
    ember_q8_dw_pairs(v, wp, &lo, &hi);
    const __m256i out = ember_q8_requant32_dw(_mm512_add_epi32(lo, bv), _mm512_add_epi32(hi, bv),
                                              m, zy, lo16, hi16, e->cap);
    _mm256_mask_storeu_epi8(yc + f, (__mmask32)tab[0], out);
  }
}

/* one channel of a 3x3 stride-2 depthwise convolution with padding 1 before (after: 0 or
   1) straight from the image, an output row at a time: 32 outputs of a row need 64 (+1)
   bytes of each of 3 image rows, whose even and odd bytes as 16-bit lanes are taps kw = 1
   and 2 (the 64 bytes from column 2 ow) and kw = 0 (the 64 from one column before): no
   phase planes, no row copies; bytes outside the image loaded as the zero point, rows
   outside it left out (the sums, and so the bytes, are ember_q8_dw_flat's). MobileNetV2
   int8, 1 thread, vs the planes: 112x112 -> 56x56 0.114 -> 0.087 ms, 56 -> 28 0.045 ->
   0.023, 28 -> 14 0.027 -> 0.017, 14 -> 7 0.037 -> 0.026 (even with 7 of 32 lanes: no
   per-row widening and copies) */
static inline void ember_q8_dw_s2rows(const uint8_t* xc, const int16_t* wc, int32_t bias,
                                      float mult, const ember_q8_epi* e, uint8_t* yc, int H,
                                      int W, int OH, int OW, int zx, int x_signed) {
  const __m512i zb = _mm512_set1_epi8((char)zx), z = _mm512_set1_epi16((int16_t)zx);
  const __m512i low = _mm512_set1_epi16(0xFF);
  const __m512i zy = _mm512_set1_epi16(e->zy16), lo16 = _mm512_set1_epi16(e->lo16);
  const __m512i hi16 = _mm512_set1_epi16(e->is_signed ? 127 : 255), bv = _mm512_set1_epi32(bias);
  const __m512 m = _mm512_set1_ps(mult);
  __m512i wp[5];
  for (int t = 0; t < 5; ++t) {
    const uint32_t pair = (uint16_t)wc[2 * t] | ((uint32_t)(uint16_t)wc[2 * t + 1] << 16);
    wp[t] = _mm512_set1_epi32((int32_t)pair);
  }
  for (int ow0 = 0; ow0 < OW; ow0 += 32) {
    const int n = OW - ow0 < 32 ? OW - ow0 : 32, left = W - 2 * ow0; /* bytes of the row left */
    const __mmask64 ka = left >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << left) - 1;
    __mmask64 kb = left + 1 >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (left + 1)) - 1;
    if (ow0 == 0) kb &= ~(__mmask64)1; /* column -1 */
    const __mmask32 kn = n >= 32 ? ~(__mmask32)0 : ((__mmask32)1 << n) - 1;
    for (int oh = 0; oh < OH; ++oh) {
      __m512i v[10];
      _Pragma("GCC unroll 3") for (int kh = 0; kh < 3; ++kh) {
        const int r = 2 * oh + kh - 1;
        if (r < 0 || r >= H) {
          v[3 * kh] = v[3 * kh + 1] = v[3 * kh + 2] = _mm512_setzero_si512();
          continue;
        }
        const uint8_t* row = xc + (long)r * W + 2 * ow0;
        const __m512i a = _mm512_mask_loadu_epi8(zb, ka, row);
        const __m512i b = _mm512_mask_loadu_epi8(zb, kb, (const uint8_t*)((uintptr_t)row - 1));
        __m512i t0, t1, t2;
        if (x_signed) {
          t0 = _mm512_srai_epi16(_mm512_slli_epi16(b, 8), 8);
          t1 = _mm512_srai_epi16(_mm512_slli_epi16(a, 8), 8);
          t2 = _mm512_srai_epi16(a, 8);
        } else {
          t0 = _mm512_and_si512(b, low), t1 = _mm512_and_si512(a, low);
          t2 = _mm512_srli_epi16(a, 8);
        }
        v[3 * kh] = _mm512_sub_epi16(t0, z);
        v[3 * kh + 1] = _mm512_sub_epi16(t1, z);
        v[3 * kh + 2] = _mm512_sub_epi16(t2, z);
      }
      v[9] = v[8]; /* the last pair: tap 8 twice, its second weight 0 */
      __m512i lo, hi;
      ember_q8_dw_pairs(v, wp, &lo, &hi);
      const __m256i out = ember_q8_requant32_dw(
          _mm512_add_epi32(lo, bv), _mm512_add_epi32(hi, bv), m, zy, lo16, hi16, e->cap);
      _mm256_mask_storeu_epi8(yc + (long)oh * OW + ow0, kn, out);
    }
  }
}
#endif
"""
