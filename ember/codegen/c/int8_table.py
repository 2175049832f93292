"""C source of the 256-entry byte table (``ember_q8_table``, in ``int8_dwconv_add.py``'s
block): ``y[i] = table[(uint8_t)x[i]]``, the tables fuse_qdq makes of elementwise chains
between 8-bit tensors (sigmoid, SiLU, GELU, requantizations).

With AVX512_VBMI 64 bytes a step: ``vpermi2b`` looks up the low 7 bits in entries 0-127
and in 128-255, the byte's top bit picks one (3 instructions for 64 lookups; a gather of
32-bit entries, the portable form, retires about one lookup a cycle). Otherwise a plain
loop, which the compiler keeps scalar.
"""

from __future__ import annotations

TABLE_C = r"""static inline int32_t ember_q8_table(const void* x_, const void* table_, void* y_,
                                     int64_t n) {
  const uint8_t* x = (const uint8_t*)x_;
  const uint8_t* table = (const uint8_t*)table_;
  uint8_t* y = (uint8_t*)y_;
  int64_t i = 0;
#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
  const __m512i t0 = _mm512_loadu_si512((const void*)table);
  const __m512i t1 = _mm512_loadu_si512((const void*)(table + 64));
  const __m512i t2 = _mm512_loadu_si512((const void*)(table + 128));
  const __m512i t3 = _mm512_loadu_si512((const void*)(table + 192));
  for (; i < n; i += 64) {
    const __mmask64 keep = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
    const __m512i v = _mm512_maskz_loadu_epi8(keep, (const void*)(x + i));
    const __m512i lo = _mm512_permutex2var_epi8(t0, v, t1);
    const __m512i hi = _mm512_permutex2var_epi8(t2, v, t3);
    const __m512i out = _mm512_mask_blend_epi8(_mm512_movepi8_mask(v), lo, hi);
    _mm512_mask_storeu_epi8((void*)(y + i), keep, out);
  }
#endif
  for (; i < n; ++i) y[i] = table[x[i]];
  return 0;
}

"""
