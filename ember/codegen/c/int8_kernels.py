"""C source of the int8 kernels that ``ember.ops.quant`` calls through ``call_extern``.

Each function is a whole quantized layer (8-bit in, 8-bit out, requantization fused):

* ``ember_q8_conv``: ungrouped 2-D convolution, NCHW, as a matrix product of the weight
  (rows: output channels, packed at build time, ``[M/4*4][K/4*4]`` int8, K = C*KH*KW) and
  the image's patches, packed at run time per chunk of 16-position panels
  (``[panel][K/4][16][4]``: 4 consecutive K values per 32-bit lane);
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
levels, Arm, Cortex-M) the same functions run plain C loops with the same arithmetic. Signed
activations are made unsigned by flipping their top bit (``x + 128``), the zero point moved
with them; zero-point corrections (weight row sums) are folded into the bias at build time.
"""

from __future__ import annotations

#: the call_extern names this file defines.
INT8_KERNEL_NAMES: frozenset[str] = frozenset({"ember_q8_conv", "ember_q8_dense"})

#: key of the helper block in a FileContext.
HELPER_KEY = "0d_ember_q8"

INT8_KERNELS_C = r"""#if defined(__AVX2__)
#include <immintrin.h>
#endif
typedef struct { float zy, lo, hi; int relu, is_signed; } ember_q8_epi;

static inline void ember_q8_store1(int32_t acc, float m, const ember_q8_epi* e, uint8_t* dst) {
  float v = (float)acc * m;
  if (e->relu) v = v > 0.0f ? v : 0.0f;
  v = rintf(v) + e->zy;
  v = v < e->lo ? e->lo : v;
  v = v > e->hi ? e->hi : v;
  *dst = (uint8_t)(int32_t)v;
}

#if defined(__AVX2__)
/* requantize 16 int32 (a0: columns 0-7, a1: 8-15; or, with interleaved, the order that
   unpacklo/unpackhi_epi16 of two rows give) and store `count` bytes */
static inline void ember_q8_store16(__m256i a0, __m256i a1, __m256 m0, __m256 m1,
                                    const ember_q8_epi* e, int interleaved, uint8_t* dst,
                                    int count) {
  __m256 v0 = _mm256_mul_ps(_mm256_cvtepi32_ps(a0), m0);
  __m256 v1 = _mm256_mul_ps(_mm256_cvtepi32_ps(a1), m1);
  if (e->relu) {
    v0 = _mm256_max_ps(v0, _mm256_setzero_ps());
    v1 = _mm256_max_ps(v1, _mm256_setzero_ps());
  }
  const __m256 zy = _mm256_set1_ps(e->zy), lo = _mm256_set1_ps(e->lo);
  const __m256 hi = _mm256_set1_ps(e->hi);
  v0 = _mm256_add_ps(_mm256_round_ps(v0, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zy);
  v1 = _mm256_add_ps(_mm256_round_ps(v1, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zy);
  v0 = _mm256_min_ps(_mm256_max_ps(v0, lo), hi);
  v1 = _mm256_min_ps(_mm256_max_ps(v1, lo), hi);
  __m256i s = _mm256_packs_epi32(_mm256_cvtps_epi32(v0), _mm256_cvtps_epi32(v1));
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
#define EMBER_Q8_PANEL_U8(p, b) _mm256_maddubs_epi16((p), (b))
#define EMBER_Q8_ROWS_U8(p, b) _mm256_maddubs_epi16((b), (p))
EMBER_Q8_TILE(ember_q8_tile_panel_u8, EMBER_Q8_PANEL_U8)
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
#endif

/* rows k < K of the patch matrix for positions [p0, p0 + len), row k at rows + k * ld;
   out-of-image taps get `pad` (the zero point) */
static inline void ember_q8_im2col(const uint8_t* x, int C, int H, int W, int KH, int KW, int OW,
                            int sh, int sw, int ph, int pw, int dh, int dw, uint8_t pad,
                            int p0, int len, int P, uint8_t* rows, int ld) {
  int K = C * KH * KW;
  for (int k = 0; k < K; ++k) {
    int c = k / (KH * KW), kh = (k / KW) % KH, kw = k % KW;
    uint8_t* dst = rows + (long)k * ld;
    int i = 0;
    while (i < len) {
      int p = p0 + i;
      if (p >= P) {
        memset(dst + i, pad, (size_t)(len - i));
        break;
      }
      int oh = p / OW, ow = p % OW;
      int run = OW - ow < len - i ? OW - ow : len - i;
      int ih = oh * sh + kh * dh - ph;
      if (ih < 0 || ih >= H) {
        memset(dst + i, pad, (size_t)run);
      } else {
        const uint8_t* src = x + ((long)c * H + ih) * W;
        int iw0 = ow * sw + kw * dw - pw;
        if (sw == 1) {
          int a = iw0 < 0 ? -iw0 : 0;
          if (a > run) a = run;
          int b = W - iw0;
          if (b > run) b = run;
          if (b < a) b = a;
          memset(dst + i, pad, (size_t)a);
          memcpy(dst + i + a, src + iw0 + a, (size_t)(b - a));
          memset(dst + i + b, pad, (size_t)(run - b));
        } else {
          for (int j = 0; j < run; ++j) {
            int iw = iw0 + j * sw;
            dst[i + j] = (iw >= 0 && iw < W) ? src[iw] : pad;
          }
        }
      }
      i += run;
    }
  }
}

/* panels [np][k4][16][4] from rows (row k at base + offs[k]; from k = K on, zrow: the
   weights there are zero, so any value does), top bit flipped by `flip` (0x80 makes int8
   data unsigned) */
static inline void ember_q8_pack(const uint8_t* base, const long* offs, int K,
                          const uint8_t* zrow, int k4,
                          int np, uint8_t flip, uint8_t* out) {
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

/* 4 weight rows x one 16-position panel of a convolution, requantized into y rows */
static inline void ember_q8_conv_tile(const uint8_t* wrows, int ldw, const uint8_t* panel, int k4,
                               const int32_t* bias, const float* mult, int rows,
                               const ember_q8_epi* e, uint8_t* y, long P, int count) {
#if defined(__AVX2__)
  __m256i acc[8];
  ember_q8_tile_panel_u8(wrows, ldw, panel, k4, acc);
  for (int i = 0; i < rows; ++i) {
    const __m256i b = _mm256_set1_epi32(bias[i]);
    const __m256 m = _mm256_set1_ps(mult[i]);
    ember_q8_store16(_mm256_add_epi32(acc[2 * i], b), _mm256_add_epi32(acc[2 * i + 1], b), m,
                     m, e, 0, y + i * P, count);
  }
#else
  int32_t acc[4][16];
  ember_q8_tile_ref(wrows, ldw, panel, k4, 0, acc);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < count; ++j) ember_q8_store1(acc[i][j] + bias[i], mult[i], e, y + i * P + j);
#endif
}

/* a stride-1 convolution over the flattened padded image: output (oh, ow) is computed at
   grid position oh * Wp + ow, where every patch row is a contiguous run of the padded image
   (no im2col); the grid columns ow >= OW are computed and dropped */
static inline void ember_q8_conv_flat(const uint8_t* xn, const uint8_t* w, const int32_t* bias,
                                      const float* mult, const ember_q8_epi* e, uint8_t* yn,
                                      int C, int H, int W, int M, int KH, int KW, int OH,
                                      int OW, int ph, int pw, int dh, int dw, int xpad, int flip,
                                      int chunk, long* offs, const uint8_t* zrow,
                                      uint8_t* panels, uint8_t* ybuf, uint8_t* padded) {
  const int K = C * KH * KW, k4 = (K + 3) / 4, ldw = 4 * k4, ld = 16 * chunk, P = OH * OW;
  const int Hp = OH + (KH - 1) * dh, Wp = OW + (KW - 1) * dw, F = OH * Wp;
  const int npan = (F + 15) / 16;
  const long plane = (long)Hp * Wp;
  memset(padded, xpad, (size_t)(C * plane + Wp + 64));
  const int iw0 = pw > 0 ? 0 : -pw, iw1 = W < Wp - pw ? W : Wp - pw;
  for (int c = 0; c < C; ++c) {
    for (int ih = 0; ih < H; ++ih) {
      const int i = ih + ph;
      if (i < 0 || i >= Hp || iw1 <= iw0) continue;
      memcpy(padded + c * plane + (long)i * Wp + iw0 + pw, xn + ((long)c * H + ih) * W + iw0,
             (size_t)(iw1 - iw0));
    }
  }
  for (int k = 0; k < K; ++k) {
    const int c = k / (KH * KW), kh = (k / KW) % KH, kw = k % KW;
    offs[k] = c * plane + (long)kh * dh * Wp + kw * dw;
  }
  for (int pc = 0; pc < npan; pc += chunk) {
    const int cp = npan - pc < chunk ? npan - pc : chunk, f0 = 16 * pc;
    const int f1 = f0 + 16 * cp < F ? f0 + 16 * cp : F;
    ember_q8_pack(padded + f0, offs, K, zrow, k4, cp, (uint8_t)flip, panels);
    for (int o0 = 0; o0 < M; o0 += 4) {
      const int rws = M - o0 < 4 ? M - o0 : 4;
      for (int pp = 0; pp < cp; ++pp)
        ember_q8_conv_tile(w + (long)o0 * ldw, ldw, panels + (long)pp * k4 * 64, k4, bias + o0,
                           mult + o0, rws, e, ybuf + 16 * pp, ld, 16);
      for (int i = 0; i < rws; ++i) {
        for (int f = f0; f < f1;) {
          const int oh = f / Wp, ow = f % Wp;
          const int run = Wp - ow < f1 - f ? Wp - ow : f1 - f;
          if (ow < OW) {
            const int n = OW - ow < run ? OW - ow : run;
            memcpy(yn + (long)(o0 + i) * P + oh * OW + ow, ybuf + (long)i * ld + (f - f0),
                   (size_t)n);
          }
          f += run;
        }
      }
    }
  }
}

static inline int32_t ember_q8_conv(const void* x_, const void* w_, const int32_t* bias,
                                    const float* mult, void* y_, void* scratch, int32_t N,
                                    int32_t C, int32_t H, int32_t W, int32_t M, int32_t KH,
                                    int32_t KW, int32_t OH, int32_t OW, int32_t sh, int32_t sw,
                                    int32_t ph, int32_t pw, int32_t dh, int32_t dw, int32_t xpad,
                                    int32_t flip, int32_t zy, int32_t relu, int32_t is_signed,
                                    int32_t chunk) {
  const uint8_t* x = (const uint8_t*)x_;
  const uint8_t* w = (const uint8_t*)w_;
  uint8_t* y = (uint8_t*)y_;
  const int K = C * KH * KW, k4 = (K + 3) / 4, ldw = 4 * k4, P = OH * OW;
  const int npan = (P + 15) / 16, ld = 16 * chunk;
  const int direct = KH == 1 && KW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  const int flat = !direct && sh == 1 && sw == 1;
  ember_q8_epi e = {(float)zy, is_signed ? -128.0f : 0.0f, is_signed ? 127.0f : 255.0f,
                    relu, is_signed};
  /* scratch: offs[4 * k4] | zrow[ld] | panels[chunk * k4 * 64] | ybuf[4 * ld] | rows or
     the padded image */
  long* offs = (long*)scratch;
  uint8_t* zrow = (uint8_t*)(offs + 4 * k4);
  uint8_t* panels = zrow + ld;
  uint8_t* ybuf = panels + (long)chunk * k4 * 64;
  uint8_t* rows = ybuf + 4 * ld;
  memset(zrow, 0, (size_t)ld);
  for (int n = 0; n < N; ++n) {
    const uint8_t* xn = x + (long)n * C * H * W;
    uint8_t* yn = y + (long)n * M * P;
    if (flat) {
      ember_q8_conv_flat(xn, w, bias, mult, &e, yn, C, H, W, M, KH, KW, OH, OW, ph, pw, dh, dw,
                         xpad, flip, chunk, offs, zrow, panels, ybuf, rows);
      continue;
    }
    for (int pc = 0; pc < npan; pc += chunk) {
      const int cp = npan - pc < chunk ? npan - pc : chunk, p0 = 16 * pc;
      if (direct && p0 + 16 * cp <= P) { /* 1x1: the image rows are the patch rows */
        for (int k = 0; k < K; ++k) offs[k] = (long)k * P;
        ember_q8_pack(xn + p0, offs, K, zrow, k4, cp, (uint8_t)flip, panels);
      } else {
        ember_q8_im2col(xn, C, H, W, KH, KW, OW, sh, sw, ph, pw, dh, dw, (uint8_t)xpad, p0,
                        16 * cp, P, rows, ld);
        for (int k = 0; k < K; ++k) offs[k] = (long)k * ld;
        ember_q8_pack(rows, offs, K, zrow, k4, cp, (uint8_t)flip, panels);
      }
      for (int o0 = 0; o0 < M; o0 += 4) {
        const int rws = M - o0 < 4 ? M - o0 : 4;
        for (int pp = 0; pp < cp; ++pp) {
          const int p = p0 + 16 * pp, count = P - p < 16 ? P - p : 16;
          ember_q8_conv_tile(w + (long)o0 * ldw, ldw, panels + (long)pp * k4 * 64, k4,
                             bias + o0, mult + o0, rws, &e, yn + (long)o0 * P + p, P, count);
        }
      }
    }
  }
  return 0;
}

static inline int32_t ember_q8_dense(const void* x_, const void* w_, const int32_t* bias,
                       const float* mult,
                       void* y_, void* scratch, int32_t R, int32_t K, int32_t N, int32_t flip,
                       int32_t zy, int32_t relu, int32_t is_signed) {
  const uint8_t* x = (const uint8_t*)x_;
  const uint8_t* w = (const uint8_t*)w_;
  uint8_t* y = (uint8_t*)y_;
  const int k4 = (K + 3) / 4, ldr = 4 * k4, R4 = (R + 3) / 4 * 4, npan = (N + 15) / 16;
  ember_q8_epi e = {(float)zy, is_signed ? -128.0f : 0.0f, is_signed ? 127.0f : 255.0f,
                    relu, is_signed};
  uint8_t* xr = (uint8_t*)scratch;
  for (int r = 0; r < R4; ++r) {
    for (int k = 0; k < ldr; ++k)
      xr[(long)r * ldr + k] = (r < R && k < K) ? (uint8_t)(x[(long)r * K + k] ^ flip) : 0;
  }
  for (int pn = 0; pn < npan; ++pn) {
    const uint8_t* panel = w + (long)pn * k4 * 64;
    const int n0 = 16 * pn, count = N - n0 < 16 ? N - n0 : 16;
    for (int r0 = 0; r0 < R; r0 += 4) {
      const int rws = R - r0 < 4 ? R - r0 : 4;
#if defined(__AVX2__)
      __m256i acc[8];
      ember_q8_tile_rows_u8(xr + (long)r0 * ldr, ldr, panel, k4, acc);
      const __m256i b0 = _mm256_loadu_si256((const __m256i*)(bias + n0));
      const __m256i b1 = _mm256_loadu_si256((const __m256i*)(bias + n0 + 8));
      const __m256 m0 = _mm256_loadu_ps(mult + n0), m1 = _mm256_loadu_ps(mult + n0 + 8);
      for (int i = 0; i < rws; ++i)
        ember_q8_store16(_mm256_add_epi32(acc[2 * i], b0), _mm256_add_epi32(acc[2 * i + 1], b1),
                         m0, m1, &e, 0, y + (long)(r0 + i) * N + n0, count);
#else
      int32_t acc[4][16];
      ember_q8_tile_ref(xr + (long)r0 * ldr, ldr, panel, k4, 1, acc);
      for (int i = 0; i < rws; ++i)
        for (int j = 0; j < count; ++j)
          ember_q8_store1(acc[i][j] + bias[n0 + j], mult[n0 + j], &e,
                          y + (long)(r0 + i) * N + n0 + j);
#endif
    }
  }
  return 0;
}
"""
