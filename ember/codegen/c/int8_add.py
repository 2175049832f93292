"""C source of onnxruntime's QLinearAdd on 8-bit tensors (``ember_q8_qlinear_add``, in
``int8_dwconv_add.py``'s block): two same-shape tensors, ``rint(fma(a, ra, fma(b, rb,
fixed)))`` (``vfmadd`` with FMA; without it each multiply-add is computed in double and
rounded once, the same value but for double-rounding cases).
"""

from __future__ import annotations

QLINEAR_ADD_C = r"""static inline float ember_q8_fma(float a, float b, float c) {
#if defined(__FMA__)
  return fmaf(a, b, c);
#else
  return (float)((double)a * (double)b + (double)c);
#endif
}

static inline int32_t ember_q8_qlinear_add(const void* a_, const void* b_, void* y_, int32_t n,
                                           float ra, float rb, float fixed, int32_t a_signed,
                                           int32_t b_signed, int32_t is_signed) {
  const uint8_t* a = (const uint8_t*)a_;
  const uint8_t* b = (const uint8_t*)b_;
  uint8_t* y = (uint8_t*)y_;
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  int i = 0;
#if defined(__AVX512BW__) && defined(__FMA__)
  { /* the same steps on 16 lanes */
    const __m512 ra16 = _mm512_set1_ps(ra), rb16 = _mm512_set1_ps(rb), f16 = _mm512_set1_ps(fixed);
    const __m512 lo16 = _mm512_set1_ps(lo), hi16 = _mm512_set1_ps(hi);
    for (; i + 16 <= n; i += 16) {
      const __m128i a8 = _mm_loadu_si128((const __m128i*)(a + i));
      const __m128i b8 = _mm_loadu_si128((const __m128i*)(b + i));
      const __m512i ai = a_signed ? _mm512_cvtepi8_epi32(a8) : _mm512_cvtepu8_epi32(a8);
      const __m512i bi = b_signed ? _mm512_cvtepi8_epi32(b8) : _mm512_cvtepu8_epi32(b8);
      __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), ra16,
                                 _mm512_fmadd_ps(_mm512_cvtepi32_ps(bi), rb16, f16));
      v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(v, lo16), hi16));
      _mm_storeu_si128((__m128i*)(y + i), _mm512_cvtepi32_epi8(q)); /* in range: truncation */
    }
  }
#endif
#if defined(__AVX2__) && defined(__FMA__)
  const __m256 vra = _mm256_set1_ps(ra), vrb = _mm256_set1_ps(rb), vf = _mm256_set1_ps(fixed);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  for (; i + 8 <= n; i += 8) {
    const __m128i a8 = _mm_loadl_epi64((const __m128i*)(a + i));
    const __m128i b8 = _mm_loadl_epi64((const __m128i*)(b + i));
    const __m256i ai = a_signed ? _mm256_cvtepi8_epi32(a8) : _mm256_cvtepu8_epi32(a8);
    const __m256i bi = b_signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8);
    const __m256 af = _mm256_cvtepi32_ps(ai), bf = _mm256_cvtepi32_ps(bi);
    __m256 v = _mm256_fmadd_ps(af, vra, _mm256_fmadd_ps(bf, vrb, vf));
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, vlo), vhi));
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i o = is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w);
    _mm_storel_epi64((__m128i*)(y + i), o);
  }
#endif
  for (; i < n; ++i) {
    const float av = a_signed ? (float)(int8_t)a[i] : (float)a[i];
    const float bv = b_signed ? (float)(int8_t)b[i] : (float)b[i];
    float v = rintf(ember_q8_fma(av, ra, ember_q8_fma(bv, rb, fixed)));
    v = v < lo ? lo : (v > hi ? hi : v);
    y[i] = (uint8_t)(int32_t)v;
  }
  return 0;
}
"""
