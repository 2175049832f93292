"""C source of the int8 depthwise convolution's helpers (``int8_dwconv_add.py``'s block, ahead
of its driver): the image rows widened to int16 minus the zero point (``ember_q8_widen``,
``ember_q8_widen_row``), 16 outputs requantized with the epilogue's constants
(``ember_q8_store16c``) and two taps of 16 or 32 outputs by ``vpmaddwd``
(``ember_q8_dw_taps``, ``ember_q8_dw_taps512``).
"""

from __future__ import annotations

DW_COMMON_C = r"""/* dst[j] = x[j * step] - zx as int16, j < n (steps 1 and 2 vectorized) */
static inline void ember_q8_widen(const uint8_t* src, int16_t* dst, int n, int step, int zx,
                                  int x_signed) {
  int j = 0;
#if defined(__AVX2__)
  const __m256i z = _mm256_set1_epi16((int16_t)zx);
  if (step == 1) {
    for (; j + 16 <= n; j += 16) {
      const __m128i v = _mm_loadu_si128((const __m128i*)(src + j));
      const __m256i w = x_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
      _mm256_storeu_si256((__m256i*)(dst + j), _mm256_sub_epi16(w, z));
    }
    for (; j + 8 <= n; j += 8) {
      const __m128i v = _mm_loadl_epi64((const __m128i*)(src + j));
      const __m128i w = x_signed ? _mm_cvtepi8_epi16(v) : _mm_cvtepu8_epi16(v);
      _mm_storeu_si128((__m128i*)(dst + j), _mm_sub_epi16(w, _mm256_castsi256_si128(z)));
    }
  } else if (step == 2) { /* the low byte of each 16-bit word: 16 elements per 32 bytes */
    for (; j + 16 < n; j += 16) {
      const __m256i v = _mm256_loadu_si256((const __m256i*)(src + 2 * j));
      const __m256i w = x_signed ? _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8)
                                 : _mm256_and_si256(v, _mm256_set1_epi16(0xFF));
      _mm256_storeu_si256((__m256i*)(dst + j), _mm256_sub_epi16(w, z));
    }
  }
#endif
  for (; j < n; ++j) {
    const uint8_t b = src[(long)j * step];
    dst[j] = (int16_t)((x_signed ? (int32_t)(int8_t)b : (int32_t)b) - zx);
  }
}

#if defined(__AVX2__)
/* ember_q8_widen for steps 1 and 2, 16 at a time even at the end of the row: the last
   vector spills up to 15 elements past dst + n, and dst[n, n + 16) is then zeroed (a store
   after the store, no reload): a caller writing rows in increasing order rewrites or wants
   zero there. Reads up to 32 bytes past src, never at or past src_end (the rest then in
   plain C, exactly) */
static inline void ember_q8_widen_row(const uint8_t* src, int16_t* dst, int n, int step,
                                      int zx, int x_signed, const uint8_t* src_end) {
  const __m256i z = _mm256_set1_epi16((int16_t)zx);
  const int span = step == 1 ? 16 : 32;
  int j = 0;
  if (step <= 2) {
    for (; j < n && src + (long)step * j + span <= src_end; j += 16) {
      __m256i w;
      if (step == 1) {
        const __m128i v = _mm_loadu_si128((const __m128i*)(src + j));
        w = x_signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
      } else {
        const __m256i v = _mm256_loadu_si256((const __m256i*)(src + 2 * (long)j));
        w = x_signed ? _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8)
                     : _mm256_and_si256(v, _mm256_set1_epi16(0xFF));
      }
      _mm256_storeu_si256((__m256i*)(dst + j), _mm256_sub_epi16(w, z));
    }
  }
  if (j < n) {
    ember_q8_widen(src + (long)j * step, dst + j, n - j, step, zx, x_signed);
  } else if (j > n) {
    _mm256_storeu_si256((__m256i*)(dst + n), _mm256_setzero_si256());
  }
}

/* 16 outputs requantized as ember_q8_store16 (count 16) with the epilogue's constants
   broadcast once by the caller (zy, lo) and cap 0 dropping the 2^30 cap (see e->cap) */
static inline void ember_q8_store16c(__m256i a0, __m256i a1, __m256 m, __m256i zy, __m256i lo,
                                     int is_signed, int cap, int interleaved, uint8_t* dst) {
  __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(a0), m);
  __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(a1), m);
  if (cap) {
    v0 = _mm256_min_ps(v0, _mm256_set1_ps(1073741824.0f));
    v1 = _mm256_min_ps(v1, _mm256_set1_ps(1073741824.0f));
  }
  __m256i s = _mm256_packs_epi32(_mm256_cvtps_epi32(v0), _mm256_cvtps_epi32(v1));
  s = _mm256_max_epi16(_mm256_adds_epi16(s, zy), lo);
  if (!interleaved) s = _mm256_permute4x64_epi64(s, 0xD8);
  const __m128i l = _mm256_castsi256_si128(s), h = _mm256_extracti128_si256(s, 1);
  _mm_storeu_si128((__m128i*)dst, is_signed ? _mm_packs_epi16(l, h) : _mm_packus_epi16(l, h));
}

/* two taps of 16 outputs: rows pa, pb (int16) times the weight pair w[0], w[1]; lo and hi
   hold the outputs in the order of vpunpcklwd/vpunpckhwd (ember_q8_store16 interleaved) */
static inline void ember_q8_dw_taps(const int16_t* pa, const int16_t* pb, const int16_t* w,
                                    __m256i* lo, __m256i* hi) {
  const __m256i va = _mm256_loadu_si256((const __m256i*)pa);
  const __m256i vb = _mm256_loadu_si256((const __m256i*)pb);
  const uint32_t pair = (uint16_t)w[0] | ((uint32_t)(uint16_t)w[1] << 16);
  const __m256i wp = _mm256_set1_epi32((int32_t)pair);
  *lo = _mm256_add_epi32(*lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(va, vb), wp));
  *hi = _mm256_add_epi32(*hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(va, vb), wp));
}

#if defined(__AVX512BW__)
/* ember_q8_dw_taps on 32 outputs, the pair of weights given broadcast (wp): lo, hi hold
   positions 0-3, 8-11, 16-19, 24-27 and 4-7, 12-15, 20-23, 28-31 (vpunpcklwd/vpunpckhwd
   per 128-bit lane) */
static inline void ember_q8_dw_taps512(const int16_t* pa, const int16_t* pb, __m512i wp,
                                       __m512i* lo, __m512i* hi) {
  const __m512i va = _mm512_loadu_si512((const void*)pa);
  const __m512i vb = _mm512_loadu_si512((const void*)pb);
  *lo = _mm512_add_epi32(*lo, _mm512_madd_epi16(_mm512_unpacklo_epi16(va, vb), wp));
  *hi = _mm512_add_epi32(*hi, _mm512_madd_epi16(_mm512_unpackhi_epi16(va, vb), wp));
}

#endif

"""
