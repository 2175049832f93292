"""C source of the 8-bit max pool (``ember_q8_max_pool``, ``call_extern`` from ``ember.ops.quant``).

A QDQ MaxPool whose input and output share scale, zero point and type is a max pool on the
integers (the window maximum commutes with the increasing dequantize). Per plane it runs in
two separable passes, both on 32 bytes at a time with AVX2:

* along each input row, the maximum over the KW taps of every output column (the row copied
  into a buffer padded with the identity, so a tap is one strided load; stride 2 takes the
  even bytes as 16-bit lanes);
* down the rows, the maximum over the KH valid rows of the first pass for every output row.

Int8 data has its top bit flipped on the way in and out (``x + 128``: unsigned order is the
signed order), so the identity is the byte 0 either way and padding never wins. This text is
appended to the block of ``int8_dwconv_add.py``.
"""

from __future__ import annotations

POOL_C = r"""
/* dst[ow] = max over kw < KW of row[ow * sw + kw * dw], ow < OW (row: the padded input row) */
static inline void ember_q8_pool_row(const uint8_t* row, int OW, int KW, int sw, int dw,
                                     uint8_t* dst) {
  int ow = 0;
#if defined(__AVX2__)
  /* a last partial vector recomputes the 32 outputs that end the row (max is idempotent:
     the overlap is stored again with the same bytes) */
  if (sw == 1) {
    for (; ow < OW && OW >= 32; ow += 32) {
      if (ow + 32 > OW) ow = OW - 32;
      __m256i m = _mm256_loadu_si256((const __m256i*)(row + ow));
      for (int k = 1; k < KW; ++k)
        m = _mm256_max_epu8(m, _mm256_loadu_si256((const __m256i*)(row + ow + k * dw)));
      _mm256_storeu_si256((__m256i*)(dst + ow), m);
    }
  } else if (sw == 2) { /* the even bytes of 32 as 16-bit lanes: 16 outputs per load */
    const __m256i low = _mm256_set1_epi16(0xFF);
    for (; ow < OW && OW >= 32; ow += 32) {
      if (ow + 32 > OW) ow = OW - 32;
      __m256i m0 = _mm256_setzero_si256(), m1 = m0;
      for (int k = 0; k < KW; ++k) {
        const uint8_t* s = row + 2 * ow + k * dw;
        m0 = _mm256_max_epu16(m0, _mm256_and_si256(_mm256_loadu_si256((const __m256i*)s), low));
        m1 = _mm256_max_epu16(
            m1, _mm256_and_si256(_mm256_loadu_si256((const __m256i*)(s + 32)), low));
      }
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(m0, m1), 0xD8);
      _mm256_storeu_si256((__m256i*)(dst + ow), packed);
    }
  }
#endif
  for (; ow < OW; ++ow) {
    uint8_t m = 0;
    for (int k = 0; k < KW; ++k) {
      const uint8_t v = row[(long)ow * sw + (long)k * dw];
      m = v > m ? v : m;
    }
    dst[ow] = m;
  }
}

/* y = max pool of x over planes of H x W (P planes); int8 data with flip = 0x80; scratch:
   H * OW bytes of row maxima, then the padded row */
static inline int32_t ember_q8_max_pool(const void* x_, void* y_, void* scratch, int32_t P,
                                        int32_t H, int32_t W, int32_t OH, int32_t OW,
                                        int32_t KH, int32_t KW, int32_t sh, int32_t sw,
                                        int32_t ph, int32_t pw, int32_t dh, int32_t dw,
                                        int32_t flip) {
  const uint8_t* x = (const uint8_t*)x_;
  uint8_t* y = (uint8_t*)y_;
  uint8_t* hbuf = (uint8_t*)scratch;
  uint8_t* row = hbuf + (long)H * OW;
  const int Wr = (OW - 1) * sw + (KW - 1) * dw + 1 + 64; /* the padded row, room to over-read */
  memset(row, 0, (size_t)Wr);
  const int iw1 = W < Wr - 64 - pw ? W : Wr - 64 - pw; /* columns of the image that are used */
  for (int p = 0; p < P; ++p) {
    const uint8_t* xp = x + (long)p * H * W;
    for (int r = 0; r < H; ++r) {
      const uint8_t* src = xp + (long)r * W;
      if (flip)
        for (int j = 0; j < iw1; ++j) row[pw + j] = (uint8_t)(src[j] ^ flip);
      else
        memcpy(row + pw, src, (size_t)(iw1 > 0 ? iw1 : 0));
      ember_q8_pool_row(row, OW, KW, sw, dw, hbuf + (long)r * OW);
    }
    uint8_t* yp = y + (long)p * OH * OW;
    for (int oh = 0; oh < OH; ++oh) {
      uint8_t* dst = yp + (long)oh * OW;
      int j = 0; /* the maximum over the KH rows in a register, one store per vector */
#if defined(__AVX2__)
      for (; j < OW && OW >= 32; j += 32) {
        if (j + 32 > OW) j = OW - 32;
        __m256i m = _mm256_setzero_si256();
        for (int k = 0; k < KH; ++k) {
          const int r = oh * sh + k * dh - ph;
          if (r >= 0 && r < H)
            m = _mm256_max_epu8(m, _mm256_loadu_si256((const __m256i*)(hbuf + (long)r * OW + j)));
        }
        _mm256_storeu_si256((__m256i*)(dst + j), m);
      }
#endif
      for (; j < OW; ++j) {
        uint8_t m = 0;
        for (int k = 0; k < KH; ++k) {
          const int r = oh * sh + k * dh - ph;
          if (r >= 0 && r < H) m = hbuf[(long)r * OW + j] > m ? hbuf[(long)r * OW + j] : m;
        }
        dst[j] = m;
      }
      if (flip)
        for (int j = 0; j < OW; ++j) dst[j] ^= (uint8_t)flip;
    }
  }
  return 0;
}
/* onnxruntime's QLinearGlobalAveragePool on 8-bit NCHW planes of hw bytes: per plane the
   exact sum of its bytes (vpsadbw: 64 at a time; int8 data flipped to uint8, 128 a byte
   off the sum) minus zx * hw, times scale (float32), clamped to the output range less zy,
   rounded half to even (cvtps, the default rounding mode), plus zy */
static inline int32_t ember_q8_global_avg_pool(const void* x_, void* y_, float scale,
                                               int32_t planes, int32_t hw, int32_t zx,
                                               int32_t zy, int32_t x_signed,
                                               int32_t is_signed) {
  const uint8_t* x = (const uint8_t*)x_;
  uint8_t* y = (uint8_t*)y_;
  const float lo = (float)((is_signed ? -128 : 0) - zy), hi = (float)((is_signed ? 127 : 255) - zy);
  const int32_t off = zx * hw + (x_signed ? 128 * hw : 0);
  for (long c = 0; c < planes; ++c) {
    const uint8_t* p = x + c * (long)hw;
    int64_t sum = 0;
    int i = 0;
#if defined(__AVX512BW__)
    const __m512i flip = _mm512_set1_epi8(x_signed ? (char)0x80 : 0);
    __m512i acc = _mm512_setzero_si512();
    for (; i + 64 <= hw; i += 64) {
      const __m512i v = _mm512_xor_si512(_mm512_loadu_si512((const void*)(p + i)), flip);
      acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, _mm512_setzero_si512()));
    }
    if (i < hw) { /* the rest masked: the bytes past it as 0 (after the flip) */
      const __mmask64 k = ((__mmask64)1 << (hw - i)) - 1;
      const __m512i v = _mm512_maskz_mov_epi8(k, _mm512_xor_si512(
                                                     _mm512_maskz_loadu_epi8(k, p + i), flip));
      acc = _mm512_add_epi64(acc, _mm512_sad_epu8(v, _mm512_setzero_si512()));
      i = hw;
    }
    sum = _mm512_reduce_add_epi64(acc);
#endif
    for (; i < hw; ++i) sum += x_signed ? (uint8_t)(p[i] ^ 0x80) : p[i];
    float v = (float)(int32_t)(sum - off) * scale;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    y[c] = (uint8_t)(int32_t)(rintf(v) + (float)zy);
  }
  return 0;
}
"""
