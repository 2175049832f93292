"""C source of the int8 depthwise convolution and QLinearAdd kernels (``call_extern`` from
``ember.ops.quant``); they use the requantizing stores of ``int8_kernels.py``.

* ``ember_q8_dwconv``: depthwise 2-D convolution on int16 planes (the image minus its zero
  point), taps in pairs (``vpmaddwd``: int16 x int16, never saturates); with AVX2 every
  stride runs over the flattened stride phases of the padded plane (16 lanes across rows),
  the portable loops over column phases; with AVX-512, 3x3 stride-1 'same' maps up to 16
  wide and 3x3 stride-2 maps run the kernels of ``int8_dw_same3.py`` (taps read from the
  image, no planes); its int16 widening and tap helpers are in ``int8_dw_common.py``;
* ``ember_q8_qlinear_add`` (``int8_add.py``): onnxruntime's QLinearAdd of two same-shape
  tensors;
* ``ember_q8_qlinear_mul`` (``int8_mul.py``): onnxruntime's QLinearMul, one operand
  whole or per row;
* ``ember_q8_table`` (``int8_table.py``): a 256-entry byte table.
"""

from __future__ import annotations

from ember.codegen.c.int8_add import QLINEAR_ADD_C
from ember.codegen.c.int8_dw_common import DW_COMMON_C
from ember.codegen.c.int8_dw_same3 import DW_SAME3_C
from ember.codegen.c.int8_dw_vnni import DW_VNNI_C
from ember.codegen.c.int8_mul import QLINEAR_MUL_C
from ember.codegen.c.int8_pool import POOL_C
from ember.codegen.c.int8_table import TABLE_C

#: the call_extern names this block defines (the pools of int8_pool.py appended).
DW_ADD_KERNEL_NAMES: frozenset[str] = frozenset(
    {
        "ember_q8_dwconv",
        "ember_q8_qlinear_add",
        "ember_q8_qlinear_mul",
        "ember_q8_table",
        "ember_q8_max_pool",
        "ember_q8_global_avg_pool",
    }
)

#: key of the helper block in a FileContext (sorted after int8_kernels.HELPER_KEY).
HELPER_KEY = "0e_ember_q8_dw_add"

_DW_C = r"""/* one channel of a depthwise convolution over flattened phase planes: the padded plane
   split into sh x sw phases (phase (a, b): padded rows a, a + sh, ..., columns b, b + sw,
   ...; Hq x Wq each), so a tap is a contiguous run of one phase and output (oh, ow) sits at
   oh * Wq + ow: 16 lanes run across rows (small maps waste few lanes); the columns
   ow >= OW are computed into a temporary and dropped (with AVX512_VBMI2 at stride 1: the
   kept lanes compressed into the output rows). Inlined always: the k3 callers' constant
   geometry (MobileNetV2 int8 depthwise, 1 thread, interleaved A/B of 9 profiles: 56x56
   0.098 -> 0.089 ms, 112x112 0.080 -> 0.072, 28x28 0.071 -> 0.070; the stride-2 112x112
   layer, unchanged code, 0.096 -> 0.103). The padding of the planes is zeroed
   once per task (`first`); every channel writes the same image positions, rows in
   increasing order (their spills zeroed, or rewritten by the rows after) */
static inline __attribute__((always_inline)) void ember_q8_dw_flat(
    const uint8_t* xc, const int16_t* wc, int32_t bias, float mult, const ember_q8_epi* e,
    uint8_t* yc, int H, int W, int KH, int KW, int OH, int OW, int sh, int sw, int ph, int pw,
    int dh, int dw, int zx, int x_signed, int16_t* plane, const uint8_t* xend, int first) {
  const int T = KH * KW, T2 = (T + 1) / 2 * 2;
  const int Hq = OH + (KH - 1) * dh / sh, Wq = OW + (KW - 1) * dw / sw, F = OH * Wq;
  const long pq = (long)Hq * Wq;
  uint8_t* tmp = (uint8_t*)(plane + sh * sw * pq + Wq + 32);
  if (first) memset(plane, 0, 2 * (size_t)(sh * sw * pq + Wq + 32));
  for (int a = 0; a < sh; ++a) {
    for (int b = 0; b < sw; ++b) {
      /* columns j in [j0, j1) of phase (a, b) read the image at j * sw + b - pw */
      int j0 = pw - b > 0 ? (pw - b + sw - 1) / sw : 0;
      int j1 = W + pw - b > 0 ? (W + pw - b + sw - 1) / sw : 0;
      j1 = j1 < Wq ? j1 : Wq;
      if (j1 <= j0) continue;
      int16_t* q = plane + (long)(a * sw + b) * pq;
      for (int i = 0; i < Hq; ++i) {
        const int ih = i * sh + a - ph;
        if (ih < 0 || ih >= H) continue;
        ember_q8_widen_row(xc + (long)ih * W + (long)j0 * sw + b - pw, q + (long)i * Wq + j0,
                           j1 - j0, sw, zx, x_signed, xend);
      }
    }
  }
  const __m256i bv = _mm256_set1_epi32(bias);
  const __m256 m = _mm256_set1_ps(mult);
  const __m256i zy = _mm256_set1_epi16(e->zy16), lo16 = _mm256_set1_epi16(e->lo16);
  const int is_signed = e->is_signed, cap = e->cap;
  int f = 0;
#if defined(__AVX512BW__)
  /* 32 lanes per zmm (the planes and tmp leave room for the 32-lane spill) */
  const __m512i zy32 = _mm512_set1_epi16(e->zy16), lo32 = _mm512_set1_epi16(e->lo16);
  const __m512i hi32 = _mm512_set1_epi16(is_signed ? 127 : 255), bv32 = _mm512_set1_epi32(bias);
  const __m512 m32 = _mm512_set1_ps(mult);
#if defined(__AVX512VBMI2__)
  /* stride 1: the outputs stored straight into the channel's rows (the lanes of grid
     positions with ow < OW are consecutive outputs: one vpcompressb in registers and one
     masked store where a vector crosses a row), no row copies from the byte buffer; per
     vector v its kept lanes and first output, found once per task in that buffer */
  const int direct = sw == 1;
  uint32_t* tab = (uint32_t*)(((uintptr_t)tmp + 7u) & ~(uintptr_t)7u);
  if (first && direct) { /* vector v starts at grid row r, column c */
    for (int v = 0, r = 0, c = 0; 32 * v < F; ++v) {
      uint64_t k = 0;
      for (int s = -c; s < 32; s += Wq) { /* the row whose column 0 is lane s */
        const int a = s < 0 ? 0 : s, b = s + OW < 32 ? s + OW : 32;
        if (b > a) k |= ((1ull << (b - a)) - 1) << a;
      }
      if (F - 32 * v < 32) k &= (1ull << (F - 32 * v)) - 1;
      tab[2 * v] = (uint32_t)k, tab[2 * v + 1] = (uint32_t)(r * OW + (c < OW ? c : OW));
      for (c += 32; c >= Wq; c -= Wq) ++r;
    }
  }
#endif
  /* each pair of taps: its two offsets into the planes and its two weights as one int32,
     found once per channel without a division by the kernel's width (the odd tap count's
     last pair: the last tap twice, its second weight 0); two vectors of 32 outputs a
     step share the weights' broadcasts (EfficientNet-B0 int8's 5x5 layers, 1 thread:
     28x28x240 0.37 -> 0.17 ms, 14x14x672 0.32 -> 0.21) */
  int off[T2];
  int32_t wpair[T2 / 2];
  for (int kh = 0, t = 0; kh < KH; ++kh) {
    const int ra = kh * dh;
    for (int kw = 0; kw < KW; ++kw, ++t) {
      const int ca = kw * dw;
      off[t] = (int)(((ra % sh) * sw + ca % sw) * pq) + (ra / sh) * Wq + ca / sw;
    }
  }
  if (T2 > T) off[T] = off[T - 1];
  for (int t = 0; t < T2; t += 2)
    wpair[t / 2] = (int32_t)((uint32_t)(uint16_t)wc[t] | ((uint32_t)(uint16_t)wc[t + 1] << 16));
  for (; f < F; f += 64) {
    const int two = f + 32 < F;
    __m512i lo0 = _mm512_setzero_si512(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
    for (int t = 0; t < T2; t += 2) {
      const int16_t* pa = plane + off[t] + f;
      const int16_t* pb = plane + off[t + 1] + f;
      const __m512i wp = _mm512_set1_epi32(wpair[t / 2]);
      ember_q8_dw_taps512(pa, pb, wp, &lo0, &hi0);
      if (two) ember_q8_dw_taps512(pa + 32, pb + 32, wp, &lo1, &hi1);
    }
    for (int h = 0; h <= two; ++h) {
      const int g = f + 32 * h;
      const __m256i out = ember_q8_requant32_dw(_mm512_add_epi32(h ? lo1 : lo0, bv32),
                                                _mm512_add_epi32(h ? hi1 : hi0, bv32), m32,
                                                zy32, lo32, hi32, cap);
#if defined(__AVX512VBMI2__)
      if (direct) {
        const uint32_t k = tab[g / 16], n = (uint32_t)__builtin_popcount(k);
        if (k == ~0u) /* wide rows: most vectors */
          _mm256_storeu_si256((__m256i*)(yc + tab[g / 16 + 1]), out);
        else
          _mm256_mask_storeu_epi8(yc + tab[g / 16 + 1], (__mmask32)((1u << n) - 1u),
                                  _mm256_maskz_compress_epi8((__mmask32)k, out));
        continue;
      }
#endif
      _mm256_storeu_si256((__m256i*)(tmp + g), out);
    }
  }
#if defined(__AVX512VBMI2__)
  if (direct) return;
#endif
#endif
  for (; f < F; f += 16) {
    __m256i lo = _mm256_setzero_si256(), hi = lo;
    for (int t = 0; t < T2; t += 2) { /* constant offsets once inlined with the geometry */
      const int ta = t, tb = t + 1 < T ? t + 1 : t;
      const int ra = (ta / KW) * dh, ca = (ta % KW) * dw, rb = (tb / KW) * dh, cb = (tb % KW) * dw;
      const int16_t* pa = plane + ((ra % sh) * sw + ca % sw) * pq + (ra / sh) * Wq + ca / sw + f;
      const int16_t* pb = plane + ((rb % sh) * sw + cb % sw) * pq + (rb / sh) * Wq + cb / sw + f;
      ember_q8_dw_taps(pa, pb, wc + t, &lo, &hi);
    }
    ember_q8_store16c(_mm256_add_epi32(lo, bv), _mm256_add_epi32(hi, bv), m, zy, lo16, is_signed,
                      cap, 1, tmp + f);
  }
  for (int oh = 0; oh < OH; ++oh) { /* 16 bytes at a time; a row's tail may spill into the
                                        rows after it (written later), never past the channel:
                                        those bytes are the next channel's, another task's
                                        (a spill of 16 - 2 OW bytes when OW < 8 clobbered the
                                        first outputs of a channel written before) */
    const uint8_t* src = tmp + (long)oh * Wq;
    uint8_t* dst = yc + (long)oh * OW;
    int k = 0;
    for (; k + 16 <= OW; k += 16)
      _mm_storeu_si128((__m128i*)(dst + k), _mm_loadu_si128((const __m128i*)(src + k)));
    if (k < OW) {
      if ((long)oh * OW + k + 16 <= (long)OH * OW)
        _mm_storeu_si128((__m128i*)(dst + k), _mm_loadu_si128((const __m128i*)(src + k)));
      else
        memcpy(dst + k, src + k, (size_t)(OW - k));
    }
  }
}
#endif

typedef struct {
  const uint8_t* x;
  const int16_t* w;
  const int32_t* bias;
  const float* mult;
  const ember_q8_epi* e;
  uint8_t* y;
  const uint8_t* xend; /* one past the input: a row's vector loads stop before it */
  int C, H, W, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, zx, x_signed;
  int taps8; /* every weight in int8's range (vpdpbusd's signed side) */
  size_t plane_bytes;
  int16_t* own; /* the planned scratch: the plane of a serial run (no allocation) */
} ember_q8_dw_job;

/* depthwise: per channel, the image minus its zero point as int16 planes split by column
   phase (iw % sw), so every tap of a row of outputs is a contiguous load; taps in pairs */
static inline void ember_q8_dw_channel(const ember_q8_dw_job* jb, long nc, int16_t* plane,
                                       int KH, int KW, int sh, int sw, int dh, int dw,
                                       int first) {
  const int C = jb->C, H = jb->H, W = jb->W, OH = jb->OH, OW = jb->OW, ph = jb->ph, pw = jb->pw;
  const int zx = jb->zx, x_signed = jb->x_signed, c = (int)(nc % C);
  const int T = KH * KW, T2 = (T + 1) / 2 * 2;
  const int Hp = (OH - 1) * sh + (KH - 1) * dh + 1;
  const int Wp = (OW - 1) * sw + (KW - 1) * dw + 1;
  const int Wq = (Wp + sw - 1) / sw + 16;
  const uint8_t* xc = jb->x + nc * H * W;
  uint8_t* yc = jb->y + nc * OH * OW;
  const int16_t* wc = jb->w + (long)c * T2;
  const int32_t* bias = jb->bias;
  const float* mult = jb->mult;
#if defined(__AVX512BW__)
#if defined(__AVX512VNNI__)
  if (KH == 3 && KW == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && ph == 1 && pw == 1 &&
      OH == H && OW == W && jb->taps8) { /* the masks in the plane's scratch, found once
                                             per task */
    if (first) ember_q8_s1flat_masks(H, W, (uint64_t*)plane);
    ember_q8_dw_s1flat(xc, wc, bias[c], mult[c], jb->e, yc, H, W, zx, x_signed,
                       (const uint64_t*)plane);
    return;
  }
#endif
  if (KH == 3 && KW == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && ph == 1 && pw == 1 &&
      OH == H && OW == W && W <= EMBER_Q8_SAME3_MAX_W) { /* the masks in the plane's scratch,
                                                            found once per task */
    if (first) ember_q8_same3_masks(H, W, (uint32_t*)plane);
    ember_q8_dw_same3(xc, wc, bias[c], mult[c], jb->e, yc, H, W, zx, x_signed,
                      (const uint32_t*)plane);
    return;
  }
#if defined(__AVX512VNNI__)
  if (KH == 3 && KW == 3 && sh == 2 && sw == 2 && dh == 1 && dw == 1 && ph == 1 && pw == 1 &&
      jb->taps8) {
#if defined(__AVX512VBMI__)
    if (W <= EMBER_Q8_S2SMALL_MAX_W && OW <= 8) { /* (more padding after: wider rows) its
                                                     indexes in the plane's scratch, once
                                                     per task */
      if (first) ember_q8_s2small_tab(W, OW, (uint8_t*)plane);
      ember_q8_dw_s2small(xc, wc, bias[c], mult[c], jb->e, yc, H, W, OH, OW, zx, x_signed,
                          (const uint8_t*)plane);
      return;
    }
#endif
    ember_q8_dw_s2vnni(xc, wc, bias[c], mult[c], jb->e, yc, H, W, OH, OW, zx, x_signed);
    return;
  }
#endif
  if (KH == 3 && KW == 3 && sh == 2 && sw == 2 && dh == 1 && dw == 1 && ph == 1 && pw == 1) {
    ember_q8_dw_s2rows(xc, wc, bias[c], mult[c], jb->e, yc, H, W, OH, OW, zx, x_signed);
    return;
  }
#endif
#if defined(__AVX2__)
  ember_q8_dw_flat(xc, wc, bias[c], mult[c], jb->e, yc, H, W, KH, KW, OH, OW, sh, sw, ph, pw,
                   dh, dw, zx, x_signed, plane, jb->xend, first);
  return;
#endif
  (void)first;
  for (int i = 0; i < Hp; ++i) {
    const int ih = i - ph;
    for (int s = 0; s < sw; ++s) memset(plane + ((long)s * Hp + i) * Wq, 0, 2 * (size_t)Wq);
    if (ih < 0 || ih >= H) continue;
    const uint8_t* src = xc + (long)ih * W;
    const int end = W < Wp - pw ? W : Wp - pw; /* columns the taps reach */
    if (sw == 1) {
      ember_q8_widen(src, plane + (long)i * Wq + pw, end, 1, zx, x_signed);
    } else { /* phase s holds padded columns j * sw + s */
      for (int s = 0; s < sw; ++s) {
        const int jlo = pw - s > 0 ? (pw - s + sw - 1) / sw : 0;
        const int jhi = (end + pw - s + sw - 1) / sw;
        if (jhi > jlo)
          ember_q8_widen(src + jlo * sw + s - pw, plane + ((long)s * Hp + i) * Wq + jlo,
                         jhi - jlo, sw, zx, x_signed);
      }
    }
  }
  for (int oh = 0; oh < OH; ++oh) {
    for (int ow = 0; ow < OW; ow += 16) {
      const int count = OW - ow < 16 ? OW - ow : 16;
#if defined(__AVX2__)
      __m256i lo = _mm256_setzero_si256(), hi = lo;
      for (int t = 0; t < T2; t += 2) {
        const int ta = t, tb = t + 1 < T ? t + 1 : t;
        const int ra = oh * sh + (ta / KW) * dh, ca = (ta % KW) * dw;
        const int rb = oh * sh + (tb / KW) * dh, cb = (tb % KW) * dw;
        const int16_t* pa = plane + ((long)(ca % sw) * Hp + ra) * Wq + ow + ca / sw;
        const int16_t* pb = plane + ((long)(cb % sw) * Hp + rb) * Wq + ow + cb / sw;
        ember_q8_dw_taps(pa, pb, wc + t, &lo, &hi);
      }
      const __m256i b = _mm256_set1_epi32(bias[c]);
      const __m256 m = _mm256_set1_ps(mult[c]);
      ember_q8_store16(_mm256_add_epi32(lo, b), _mm256_add_epi32(hi, b), m, m, jb->e, 1,
                       yc + (long)oh * OW + ow, count);
#else
      for (int j = 0; j < count; ++j) {
        int32_t s = bias[c];
        for (int t = 0; t < T; ++t) {
          const int r = oh * sh + (t / KW) * dh, cc = (ow + j) * sw + (t % KW) * dw;
          s += (int32_t)plane[((long)(cc % sw) * Hp + r) * Wq + cc / sw] * wc[t];
        }
        ember_q8_store1(s, mult[c], jb->e, yc + (long)oh * OW + ow + j);
      }
#endif
    }
  }
}

/* channels [begin, end) of all images, each parallel task with its own int16 plane (a serial
   run uses the planned scratch, so AOT and standalone builds allocate nothing) */
static int32_t ember_q8_dw_range(int64_t begin, int64_t end, void* cdata) {
  const ember_q8_dw_job* j = (const ember_q8_dw_job*)cdata;
  int16_t* plane =
      j->own != NULL ? j->own
                     : (int16_t*)EmberBackendAllocWorkspace(1, 0, (uint64_t)j->plane_bytes, 0, 16);
  if (plane == NULL) return -1;
  const int KH = j->KH, KW = j->KW, sh = j->sh, sw = j->sw, dh = j->dh, dw = j->dw;
  /* 3x3 at stride 1 or 2 (MobileNets) inlined with constant geometry: unrolled taps */
  const int k3 = KH == 3 && KW == 3 && dh == 1 && dw == 1 && sh == sw;
  if (k3 && sh == 1) {
    for (long nc = (long)begin; nc < (long)end; ++nc)
      ember_q8_dw_channel(j, nc, plane, 3, 3, 1, 1, 1, 1, nc == begin);
  } else if (k3 && sh == 2) {
    for (long nc = (long)begin; nc < (long)end; ++nc)
      ember_q8_dw_channel(j, nc, plane, 3, 3, 2, 2, 1, 1, nc == begin);
  } else if (KH == 5 && KW == 5 && dh == 1 && dw == 1 && sh == sw && sh <= 2) {
    /* 5x5 (EfficientNets, MnasNets) and 7x7 with constant geometry: the taps' offsets
       fold and the loop over taps unrolls (1 thread, against the same kernel with the
       geometry at run time: 28x28x240 0.19-0.25 -> 0.17 ms, 14x14x672 stride 2 0.13-0.18
       -> 0.09, 7x7x1152 0.18 -> 0.12-0.15, 7x7 taps on 14x14x384 0.20 -> 0.15-0.20) */
    for (long nc = (long)begin; nc < (long)end; ++nc) {
      if (sh == 1)
        ember_q8_dw_channel(j, nc, plane, 5, 5, 1, 1, 1, 1, nc == begin);
      else
        ember_q8_dw_channel(j, nc, plane, 5, 5, 2, 2, 1, 1, nc == begin);
    }
  } else if (KH == 7 && KW == 7 && dh == 1 && dw == 1 && sh == 1 && sw == 1) {
    for (long nc = (long)begin; nc < (long)end; ++nc) /* 7x7 stride 1 (ConvNeXts) */
      ember_q8_dw_channel(j, nc, plane, 7, 7, 1, 1, 1, 1, nc == begin);
  } else {
    for (long nc = (long)begin; nc < (long)end; ++nc)
      ember_q8_dw_channel(j, nc, plane, KH, KW, sh, sw, dh, dw, nc == begin);
  }
  if (j->own == NULL) EmberBackendFreeWorkspace(1, 0, plane);
  return 0;
}

static inline int32_t ember_q8_dwconv(const void* x_, const int16_t* w, const int32_t* bias,
                        const float* mult,
                        void* y_, void* scratch, int32_t N, int32_t C, int32_t H, int32_t W,
                        int32_t KH, int32_t KW, int32_t OH, int32_t OW, int32_t sh, int32_t sw,
                        int32_t ph, int32_t pw, int32_t dh, int32_t dw, int32_t zx,
                        int32_t x_signed, int32_t zy, int32_t relu, int32_t is_signed,
                        int32_t plane_bytes) {
  ember_q8_epi e = ember_q8_epilogue(zy, relu, is_signed);
  const long units = (long)N * C, macs = units * OH * OW * KH * KW;
  const int T2 = (KH * KW + 1) / 2 * 2;
  /* the store's 2^30 cap always: a min that changes nothing where the sums stay below it
     (finding where they could not reach it, per channel in double, took 2.2 of 18.9 us of
     MobileNetV2's 7x7x960 layer) */
  e.cap = 1;
  int taps8 = 1;
  for (long i = 0; i < (long)C * T2; ++i) taps8 &= w[i] >= -128 && w[i] <= 127;
  const int par = EmberBackendGetNumThreads() > 1 && macs >= EMBER_Q8_PAR_MACS / 4;
  ember_q8_dw_job job = {(const uint8_t*)x_, w, bias, mult, &e, (uint8_t*)y_,
                         (const uint8_t*)x_ + units * H * W, C, H, W, KH, KW,
                         OH, OW, sh, sw, ph, pw, dh, dw, zx, x_signed, taps8, (size_t)plane_bytes,
                         par ? NULL : (int16_t*)scratch};
  return EmberBackendParallelFor(ember_q8_dw_range, &job, units, par ? 1 : units, 0) == 0 ? 0
                                                                                          : -1;
}

"""

#: the whole block: depthwise convolution, QLinearAdd and QLinearMul, the byte table, then
#: the 8-bit pools.
DW_ADD_KERNELS_C = (
    DW_SAME3_C + DW_VNNI_C + DW_COMMON_C + _DW_C + QLINEAR_ADD_C + QLINEAR_MUL_C + TABLE_C + POOL_C
)
