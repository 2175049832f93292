"""C source of the int8 convolution's image copies and patch packing, ahead of the conv
driver of ``int8_conv.py`` in ``int8_kernels.py``'s block:

* ``ember_q8_pack``: panels ``[np][k4][16][4]`` from patch rows (with VBMI 4 panels per
  64-byte load of each row, interleaved by ``vpermt2b``);
* ``ember_q8_phase_planes``: the zero-point-padded image split into ``sh x sw`` phase planes
  (stride 1 with AVX-512BW: a masked load over the pad bytes, one masked store per 64);
* ``ember_q8_subsample``: a 1x1 strided convolution's pixels (stride 2 with AVX-512BW: 32
  by ``vpmovwb`` per masked load).
"""

from __future__ import annotations

INT8_PATCHES_C = r"""
/* panels [np][k4][16][4] from rows (row k at base + offs[k]; from k = K on, zrow: the
   weights there are zero, so any value does), top bit flipped by `flip` (0x80 makes int8
   data unsigned) */
static inline void ember_q8_pack(const uint8_t* base, const long* offs, int K,
                          const uint8_t* zrow, int k4,
                          int np, uint8_t flip, uint8_t* out) {
#if defined(__AVX512VBMI__)
  /* the 4 rows' 16 bytes in one zmm, interleaved by one vpermb: out 4j + t = in 16t + j */
  static const uint8_t ember_q8_pack_idx[64] = {
      0, 16, 32, 48, 1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51, 4, 20, 36, 52, 5, 21,
      37, 53, 6, 22, 38, 54, 7, 23, 39, 55, 8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58,
      11, 27, 43, 59, 12, 28, 44, 60, 13, 29, 45, 61, 14, 30, 46, 62, 15, 31, 47, 63};
  const __m512i idx = _mm512_loadu_si512((const void*)ember_q8_pack_idx);
  const __m512i f = _mm512_set1_epi8((char)flip);
  /* 4 panels from one 64-byte load of each row: rows 0, 1 (and 2, 3) interleaved by bytes
     into panels (0, 1) and (2, 3) (vpermt2b), then the two pairs by 16-bit units into each
     panel: 8 permutes for 4 panels where each took 3 inserts and a permute */
  uint8_t tab[4][64];
  for (int b = 0; b < 64; ++b) {
    const int u = b >> 5, j = (b >> 1) & 15, s = b & 1, t = b & 3, jj = b >> 2;
    tab[0][b] = (uint8_t)(64 * s + 16 * u + j);
    tab[1][b] = (uint8_t)(64 * s + 16 * (u + 2) + j);
    tab[2][b] = (uint8_t)((t < 2 ? 0 : 64) + 2 * jj + (t & 1));
    tab[3][b] = (uint8_t)((t < 2 ? 0 : 64) + 2 * (16 + jj) + (t & 1));
  }
  const __m512i ilo = _mm512_loadu_si512((const void*)tab[0]);
  const __m512i ihi = _mm512_loadu_si512((const void*)tab[1]);
  const __m512i o0 = _mm512_loadu_si512((const void*)tab[2]);
  const __m512i o1 = _mm512_loadu_si512((const void*)tab[3]);
  const long ps = (long)k4 * 64;
  for (int q = 0; q < k4; ++q) { /* the 4 rows' addresses once for all the panels */
    const uint8_t* r[4];
    for (int t = 0; t < 4; ++t) {
      int k = 4 * q + t;
      r[t] = k < K ? base + offs[k] : zrow;
    }
    uint8_t* o = out + (long)q * 64;
    int pp = 0;
    for (; pp + 4 <= np; pp += 4, o += 4 * ps) {
      const __m512i a = _mm512_xor_si512(_mm512_loadu_si512((const void*)(r[0] + 16 * pp)), f);
      const __m512i b = _mm512_xor_si512(_mm512_loadu_si512((const void*)(r[1] + 16 * pp)), f);
      const __m512i c = _mm512_xor_si512(_mm512_loadu_si512((const void*)(r[2] + 16 * pp)), f);
      const __m512i d = _mm512_xor_si512(_mm512_loadu_si512((const void*)(r[3] + 16 * pp)), f);
      const __m512i ab01 = _mm512_permutex2var_epi8(a, ilo, b);
      const __m512i ab23 = _mm512_permutex2var_epi8(a, ihi, b);
      const __m512i cd01 = _mm512_permutex2var_epi8(c, ilo, d);
      const __m512i cd23 = _mm512_permutex2var_epi8(c, ihi, d);
      _mm512_storeu_si512((void*)o, _mm512_permutex2var_epi8(ab01, o0, cd01));
      _mm512_storeu_si512((void*)(o + ps), _mm512_permutex2var_epi8(ab01, o1, cd01));
      _mm512_storeu_si512((void*)(o + 2 * ps), _mm512_permutex2var_epi8(ab23, o0, cd23));
      _mm512_storeu_si512((void*)(o + 3 * ps), _mm512_permutex2var_epi8(ab23, o1, cd23));
    }
    for (; pp < np; ++pp, o += (long)k4 * 64) {
      __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i*)(r[0] + 16 * pp)));
      x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i*)(r[1] + 16 * pp)), 1);
      x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i*)(r[2] + 16 * pp)), 2);
      x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i*)(r[3] + 16 * pp)), 3);
      x = _mm512_permutexvar_epi8(idx, _mm512_xor_si512(x, f));
      _mm512_storeu_si512((void*)o, x);
    }
  }
  return;
#endif
  for (int pp = 0; pp < np; ++pp) {
    for (int q = 0; q < k4; ++q) {
      const uint8_t* r[4];
      for (int t = 0; t < 4; ++t) {
        int k = 4 * q + t;
        r[t] = (k < K ? base + offs[k] : zrow) + 16 * pp;
      }
      uint8_t* o = out + ((long)pp * k4 + q) * 64;
#if defined(__AVX2__)
      const __m128i f = _mm_set1_epi8((char)flip);
      __m128i a = _mm_xor_si128(_mm_loadu_si128((const __m128i*)r[0]), f);
      __m128i b = _mm_xor_si128(_mm_loadu_si128((const __m128i*)r[1]), f);
      __m128i c = _mm_xor_si128(_mm_loadu_si128((const __m128i*)r[2]), f);
      __m128i d = _mm_xor_si128(_mm_loadu_si128((const __m128i*)r[3]), f);
      __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
      __m128i cd0 = _mm_unpacklo_epi8(c, d), cd1 = _mm_unpackhi_epi8(c, d);
      _mm_storeu_si128((__m128i*)o, _mm_unpacklo_epi16(ab0, cd0));
      _mm_storeu_si128((__m128i*)(o + 16), _mm_unpackhi_epi16(ab0, cd0));
      _mm_storeu_si128((__m128i*)(o + 32), _mm_unpacklo_epi16(ab1, cd1));
      _mm_storeu_si128((__m128i*)(o + 48), _mm_unpackhi_epi16(ab1, cd1));
#else
      for (int j = 0; j < 16; ++j)
        for (int t = 0; t < 4; ++t)
          o[4 * j + t] = (uint8_t)(r[t][j] ^ flip);
#endif
    }
  }
}

/* the sh x sw phase planes (Hq x Wq each, per channel) of the image padded with `pad`:
   plane (c, a, b) row i, column j is padded row i * sh + a, column j * sw + b */
static void ember_q8_phase_planes(const uint8_t* x, int C, int H, int W, int sh, int sw, int ph,
                                  int pw, int Hq, int Wq, uint8_t pad, uint8_t* out) {
  for (int c = 0; c < C; ++c) {
    for (int a = 0; a < sh; ++a) {
      for (int b = 0; b < sw; ++b) {
        /* columns j in [j0, j1) read the image at s = j * sw + b - pw */
        int j0 = pw - b > 0 ? (pw - b + sw - 1) / sw : 0;
        int j1 = W + pw - b > 0 ? (W + pw - b + sw - 1) / sw : 0;
        j1 = j1 < Wq ? j1 : Wq;
        j0 = j0 < j1 ? j0 : j1;
        for (int i = 0; i < Hq; ++i, out += Wq) {
          const int r = i * sh + a - ph;
          if (r < 0 || r >= H || j1 == j0) {
            memset(out, pad, (size_t)Wq);
            continue;
          }
          const uint8_t* src = x + ((long)c * H + r) * W + (long)j0 * sw + b - pw;
#if defined(__AVX512BW__)
          if (sw == 1) { /* 64 bytes at a time: the image's bytes [j0, j1) by a masked load
                            over the pad bytes, one masked store (no library calls) */
            const __m512i fill = _mm512_set1_epi8((char)pad);
            for (int o = 0; o < Wq; o += 64) {
              const int lo = j0 - o > 0 ? j0 - o : 0, hi = j1 - o < 64 ? j1 - o : 64;
              const int n = Wq - o < 64 ? Wq - o : 64;
              const __mmask64 upto = hi >= 64 ? ~(__mmask64)0
                                     : hi <= 0 ? (__mmask64)0
                                               : ((__mmask64)1 << hi) - 1;
              const __mmask64 take = lo >= 64 ? (__mmask64)0 : upto & ~(((__mmask64)1 << lo) - 1);
              const __m512i v = _mm512_mask_loadu_epi8(fill, take, (const void*)(src - j0 + o));
              _mm512_mask_storeu_epi8((void*)(out + o),
                                      n >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << n) - 1, v);
            }
            continue;
          }
#endif
          memset(out, pad, (size_t)j0);
          if (sw == 1) {
            memcpy(out + j0, src, (size_t)(j1 - j0));
          } else {
            const int n = j1 - j0, avail = W - (j0 * sw + b - pw); /* bytes left in the row */
            int j = 0;
#if defined(__AVX512BW__)
            if (sw == 2) /* the even bytes: 32 16-bit lanes narrowed by vpmovwb per load */
              for (; j < n; j += 32) {
                const int cnt = n - j < 32 ? n - j : 32, nb = 2 * cnt - 1; /* bytes read */
                const __mmask64 take = nb >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << nb) - 1;
                const __m512i v = _mm512_maskz_loadu_epi8(take, (const void*)(src + 2L * j));
                const __mmask32 put = (__mmask32)(cnt >= 32 ? ~0u : (1u << cnt) - 1u);
                _mm256_mask_storeu_epi8((void*)(out + j0 + j), put, _mm512_cvtepi16_epi8(v));
              }
#endif
#if defined(__AVX2__)
            if (sw == 2) { /* the even bytes of 32 as 16-bit lanes, packed: 16 per load */
              const __m256i low = _mm256_set1_epi16(0xFF);
              for (; j + 16 <= n && 2 * j + 32 <= avail; j += 16) {
                const __m256i v = _mm256_and_si256(
                    _mm256_loadu_si256((const __m256i*)(src + 2 * (long)j)), low);
                const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi16(v, v), 0xD8);
                _mm_storeu_si128((__m128i*)(out + j0 + j), _mm256_castsi256_si128(p));
              }
            }
#endif
            for (; j < n; ++j) out[j0 + j] = src[(long)j * sw];
          }
          memset(out + j1, pad, (size_t)(Wq - j1));
        }
      }
    }
  }
}

/* the pixels (oh * sh, ow * sw) of every plane of a 1x1 strided convolution's image, OH x OW
   per plane, into dst */
static void ember_q8_subsample(const uint8_t* x, int C, int H, int W, int OH, int OW, int sh,
                               int sw, uint8_t* dst) {
  for (int c = 0; c < C; ++c) {
    for (int oh = 0; oh < OH; ++oh) {
      const uint8_t* src = x + ((long)c * H + (long)oh * sh) * W;
      int ow = 0;
#if defined(__AVX512BW__)
      if (sw == 2) /* the even bytes: 32 16-bit lanes narrowed to bytes (vpmovwb) */
        for (; ow < OW; ow += 32) {
          const int n = OW - ow < 32 ? OW - ow : 32, nb = 2 * n - 1; /* bytes read */
          const __mmask64 take = nb >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << nb) - 1;
          const __m512i v = _mm512_maskz_loadu_epi8(take, (const void*)(src + 2L * ow));
          const __mmask32 put = (__mmask32)(n >= 32 ? ~0u : (1u << n) - 1u);
          _mm256_mask_storeu_epi8((void*)(dst + ow), put, _mm512_cvtepi16_epi8(v));
        }
#endif
      for (; ow < OW; ++ow) dst[ow] = src[(long)ow * sw];
      dst += OW;
    }
  }
}
"""
