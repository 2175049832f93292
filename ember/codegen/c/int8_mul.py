"""C source of onnxruntime's QLinearMul on 8-bit tensors (``ember_q8_qlinear_mul``, in
``int8_dwconv_add.py``'s block): ``rint(float((a - za) * (b - zb)) * ratio + zc)``,
saturated, each step rounded to float32 (a multiply, then an add: never one FMA), over
``rows`` rows of ``inner`` elements where one operand may hold one value per row (a
squeeze-excitation block's per-channel scale). The steps equal ``quantized_mul``'s float64
form: the int32 product is exact in float32 (|p| <= 2^16), and adding an integer zero
point to a float32 is exact in float64.
"""

from __future__ import annotations

QLINEAR_MUL_C = r"""static inline int32_t ember_q8_qlinear_mul(
    const void* a_, const void* b_, void* y_, int64_t rows, int64_t inner, int32_t which,
    float ratio, float zc, int32_t za, int32_t zb, int32_t a_signed, int32_t b_signed,
    int32_t is_signed) {
  const uint8_t* a = (const uint8_t*)a_;
  const uint8_t* b = (const uint8_t*)b_;
  uint8_t* y = (uint8_t*)y_;
  if (which == 1) { /* the whole operand first, the per-row one second */
    const uint8_t* t = a;
    a = b, b = t;
    int32_t s = za;
    za = zb, zb = s, s = a_signed, a_signed = b_signed, b_signed = s;
  }
  const int per_row = which != 0;
  const float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* ar = a + r * inner;
    const uint8_t* br = per_row ? b + r : b + r * inner;
    uint8_t* yr = y + r * inner;
    const int32_t brow = (per_row ? (b_signed ? (int32_t)(int8_t)br[0] : (int32_t)br[0]) : 0) - zb;
    int64_t i = 0;
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    const __m512i za16 = _mm512_set1_epi32(za), zb16 = _mm512_set1_epi32(zb);
    const __m512i b16row = _mm512_set1_epi32(brow);
    const __m512 r16 = _mm512_set1_ps(ratio), zc16 = _mm512_set1_ps(zc);
    const __m512 lo16 = _mm512_set1_ps(lo), hi16 = _mm512_set1_ps(hi);
    for (; i < inner; i += 16) {
      const __mmask16 keep = inner - i >= 16 ? (__mmask16)0xFFFF
                                             : (__mmask16)((1u << (inner - i)) - 1u);
      const __m128i a8 = _mm_maskz_loadu_epi8(keep, (const void*)(ar + i));
      const __m512i av = _mm512_sub_epi32(
          a_signed ? _mm512_cvtepi8_epi32(a8) : _mm512_cvtepu8_epi32(a8), za16);
      __m512i bv = b16row;
      if (!per_row) {
        const __m128i b8 = _mm_maskz_loadu_epi8(keep, (const void*)(br + i));
        bv = _mm512_sub_epi32(b_signed ? _mm512_cvtepi8_epi32(b8) : _mm512_cvtepu8_epi32(b8),
                              zb16);
      }
      const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_mullo_epi32(av, bv)), r16);
      __m512 v = _mm512_roundscale_ps(_mm512_add_ps(p, zc16),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_min_ps(_mm512_max_ps(v, lo16), hi16);
      _mm_mask_storeu_epi8((void*)(yr + i), keep, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
    }
#elif defined(__AVX2__)
    const __m256i za8 = _mm256_set1_epi32(za), zb8 = _mm256_set1_epi32(zb);
    const __m256i b8row = _mm256_set1_epi32(brow);
    const __m256 r8 = _mm256_set1_ps(ratio), zc8 = _mm256_set1_ps(zc);
    const __m256 lo8 = _mm256_set1_ps(lo), hi8 = _mm256_set1_ps(hi);
    for (; i + 8 <= inner; i += 8) {
      const __m128i a8 = _mm_loadl_epi64((const __m128i*)(ar + i));
      const __m256i av = _mm256_sub_epi32(
          a_signed ? _mm256_cvtepi8_epi32(a8) : _mm256_cvtepu8_epi32(a8), za8);
      __m256i bv = b8row;
      if (!per_row) {
        const __m128i b8 = _mm_loadl_epi64((const __m128i*)(br + i));
        bv = _mm256_sub_epi32(b_signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8),
                              zb8);
      }
      const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(av, bv)), r8);
      __m256 v = _mm256_round_ps(_mm256_add_ps(p, zc8),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo8), hi8));
      const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      _mm_storel_epi64((__m128i*)(yr + i),
                       is_signed ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
    }
#endif
    for (; i < inner; ++i) {
      const int32_t av = (a_signed ? (int32_t)(int8_t)ar[i] : (int32_t)ar[i]) - za;
      const int32_t bv = per_row ? brow : (b_signed ? (int32_t)(int8_t)br[i] : (int32_t)br[i]) - zb;
      const float p = (float)((double)(av * bv) * (double)ratio);
      float v = rintf((float)((double)p + (double)zc));
      v = v < lo ? lo : (v > hi ? hi : v);
      yr[i] = is_signed ? (uint8_t)(int8_t)(int32_t)v : (uint8_t)(int32_t)v;
    }
  }
  return 0;
}

"""
