"""C source of the int8 dense driver (``ember_q8_dense``: QLinearMatMul / QGemm and
MatMulInteger through ``int8_dynamic.py``), split across the runtime's threads with
``EmberBackendParallelFor``: the rows of x made unsigned once, then the weight panels (16
output columns each) shared out among the threads.

It sits on the tiles and requantizing stores of ``int8_kernels.py`` and the AVX-512 VNNI
``ember_q8_dense_range512`` of ``int8_avx512.py`` (this text follows ``int8_conv.py``'s in
that block).
"""

from __future__ import annotations

INT8_DENSE_C = r"""
typedef struct {
  const uint8_t* xr;
  const uint8_t* w;
  const int32_t* bias;
  const float* mult;
  const ember_q8_epi* e;
  uint8_t* y;
  int32_t* y32; /* MatMulInteger: acc + bias stored as int32 (no requantization) */
  int R, N, k4;
} ember_q8_dense_job;

/* rows [R, K] of x into rows of ldr bytes (zero past K, and rows R..R4 zero), top bit
   flipped by `flip` */
static inline void ember_q8_unsigned_rows(const uint8_t* x, int R, int R4, int K, int ldr,
                                          uint8_t flip, uint8_t* xr) {
  for (int r = 0; r < R; ++r) {
    const uint8_t* src = x + (long)r * K;
    uint8_t* dst = xr + (long)r * ldr;
    for (int k = 0; k < K; ++k) dst[k] = (uint8_t)(src[k] ^ flip);
    for (int k = K; k < ldr; ++k) dst[k] = 0;
  }
  memset(xr + (long)R * ldr, 0, (size_t)(R4 - R) * ldr);
}

/* weight panels [begin, end) times every row of x */
static int32_t ember_q8_dense_range(int64_t begin, int64_t end, void* cdata) {
  const ember_q8_dense_job* j = (const ember_q8_dense_job*)cdata;
  const int k4 = j->k4, ldr = 4 * k4, R = j->R, N = j->N;
#if defined(EMBER_Q8_VNNI512)
  ember_q8_dense_range512(j->xr, ldr, j->w, k4, j->bias, j->mult, j->e, j->y, j->y32, R, N,
                          (int)begin, (int)end);
  return 0;
#endif
  for (int64_t pn = begin; pn < end; ++pn) {
    const uint8_t* panel = j->w + (long)pn * k4 * 64;
    const int n0 = 16 * (int)pn, count = N - n0 < 16 ? N - n0 : 16;
    for (int r0 = 0; r0 < R; r0 += 4) {
      const int rws = R - r0 < 4 ? R - r0 : 4;
#if defined(__AVX2__)
      __m256i acc[8];
      if (rws == 1) ember_q8_tile1_rows_u8(j->xr + (long)r0 * ldr, panel, k4, acc);
      else ember_q8_tile_rows_u8(j->xr + (long)r0 * ldr, ldr, panel, k4, acc);
      const __m256i b0 = _mm256_loadu_si256((const __m256i*)(j->bias + n0));
      const __m256i b1 = _mm256_loadu_si256((const __m256i*)(j->bias + n0 + 8));
      if (j->y32) {
        for (int i = 0; i < rws; ++i)
          ember_q8_store16_i32(_mm256_add_epi32(acc[2 * i], b0),
                               _mm256_add_epi32(acc[2 * i + 1], b1),
                               j->y32 + (long)(r0 + i) * N + n0, count);
        continue;
      }
      const __m256 m0 = _mm256_loadu_ps(j->mult + n0), m1 = _mm256_loadu_ps(j->mult + n0 + 8);
      for (int i = 0; i < rws; ++i)
        ember_q8_store16(_mm256_add_epi32(acc[2 * i], b0), _mm256_add_epi32(acc[2 * i + 1], b1),
                         m0, m1, j->e, 0, j->y + (long)(r0 + i) * N + n0, count);
#else
      int32_t acc[4][16];
      ember_q8_tile_ref(j->xr + (long)r0 * ldr, ldr, panel, k4, 1, acc);
      for (int i = 0; i < rws; ++i)
        for (int c = 0; c < count; ++c) {
          const int32_t a = acc[i][c] + j->bias[n0 + c];
          const long at = (long)(r0 + i) * N + n0 + c;
          if (j->y32)
            j->y32[at] = a;
          else
            ember_q8_store1(a, j->mult[n0 + c], j->e, j->y + at);
        }
#endif
    }
  }
  return 0;
}

static inline int32_t ember_q8_dense(const void* x_, const void* w_, const int32_t* bias,
                                     const float* mult, void* y_, void* scratch, int32_t R,
                                     int32_t K, int32_t N, int32_t flip, int32_t zy,
                                     int32_t relu, int32_t is_signed) {
  const uint8_t* x = (const uint8_t*)x_;
  const int k4 = (K + 3) / 4, ldr = 4 * k4, R4 = (R + 3) / 4 * 4, npan = (N + 15) / 16;
  const ember_q8_epi e = ember_q8_epilogue(zy, relu, is_signed);
  uint8_t* xr = (uint8_t*)scratch;
  ember_q8_unsigned_rows(x, R, R4, K, ldr, (uint8_t)flip, xr);
  ember_q8_dense_job job = {xr, (const uint8_t*)w_, bias, mult, &e, (uint8_t*)y_, NULL,
                            R, N, k4};
  const int par = EmberBackendGetNumThreads() > 1 && (long)R * K * N >= EMBER_Q8_PAR_MACS;
  return EmberBackendParallelFor(ember_q8_dense_range, &job, npan, par ? 1 : npan, 0) == 0 ? 0
                                                                                          : -1;
}
"""
