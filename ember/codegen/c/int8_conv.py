"""C source of the int8 convolution driver (``ember_q8_conv``), split across the runtime's
threads with ``EmberBackendParallelFor`` (the dense driver: ``int8_dense.py``).

They sit on the tiles, packing and requantizing stores of ``int8_kernels.py`` (this text is
appended to that block):

* ``ember_q8_conv``: the output positions in chunks of 16-position panels, one work unit
  per chunk (each unit packs its patches into its own workspace, then runs every 4-row
  block of the weight over them). Two ways to get the patch rows: a 1x1 convolution
  without padding reads them from the image (subsampled once if strided; the row tails of
  the last partial panel copied to 16-byte rows first); any other convolution reads
  contiguous runs of the zero-point-padded image split into ``sh x sw`` phase planes of
  ``Hq x Wq`` laid out flat (phase ``(a, b)`` holds padded rows ``a, a + sh, ...`` and
  columns ``b, b + sw, ...``, so tap ``(kh, kw)`` is phase ``(kh*dh % sh, kw*dw % sw)`` shifted by
  ``(kh*dh / sh) * Wq + kw*dw / sw``; output ``(oh, ow)`` at grid position
  ``oh * Wq + ow``, the columns ``ow >= OW`` computed and dropped): no im2col. With the
  AVX-512 VNNI tiles and VBMI, the panels hold the real positions only instead
  (``ember_q8_pack_real`` of ``int8_real_positions.py``: each row's 16 bytes picked out of
  32 grid bytes by a vpermt2b),
  stored straight into y; a chunk's last panel of 1-4 positions then runs as dot products
  of its patch columns (``ember_q8_conv_dots512``), in either way of packing.
  With more than one thread and enough work the chunk shrinks so that every thread gets
  one (``EMBER_Q8_PAR_MACS`` multiply-adds at least, else one thread runs it all).
"""

from __future__ import annotations

INT8_CONV_C = r"""
/* weight rows per block: the AVX-512 tiles take 8 (the ybuf of a chunk holds 8 rows) */
#if defined(EMBER_Q8_VNNI512)
#define EMBER_Q8_ROW_BLOCK 8
#else
#define EMBER_Q8_ROW_BLOCK 4
#endif
/* work below this many multiply-adds runs on one thread (some 20 us) */
#define EMBER_Q8_PAR_MACS 400000L

/* 4 weight rows (then their nfix fix slots) x one 16-position panel of a convolution,
   requantized into y rows */
static inline void ember_q8_conv_tile(const uint8_t* wrows, int ldw, const uint8_t* panel, int k4,
                                      int nfix, const int32_t* bias, const float* mult, int rows,
                                      const ember_q8_epi* e, uint8_t* y, int32_t* y32, long P,
                                      int count) {
#if defined(__AVX2__)
  __m256i acc[8];
  const int32_t b4[4] = {bias[0], rows > 1 ? bias[1] : 0, rows > 2 ? bias[2] : 0,
                        rows > 3 ? bias[3] : 0}; /* bias is not padded to the 4 rows */
  if (count <= 8) { /* a tail: half the products (the fix slots add garbage to 8-15) */
    ember_q8_tile_pairs8(wrows, ldw, panel, k4, b4, acc);
  } else {
    ember_q8_tile_pairs(wrows, ldw, panel, k4, b4, acc);
    if (k4 & 1) ember_q8_tile_step(wrows, ldw, panel, k4 - 1, acc);
  }
  if (nfix > 0) ember_q8_add_fixes(wrows, ldw, panel, k4, nfix, rows, acc);
  if (y32 != NULL) { /* ConvInteger: acc + bias as int32 */
    for (int i = 0; i < rows; ++i)
      ember_q8_store16_i32(acc[2 * i], acc[2 * i + 1], y32 + i * P, count);
    return;
  }
  int i = 0;
  if (count == 16) { /* full rows two at a time */
    const __m256i zy = _mm256_set1_epi16(e->zy16), lo = _mm256_set1_epi16(e->lo16);
    const int is_signed = e->is_signed;
#define EMBER_Q8_ROW_PAIRS(CAP)                                                              \
  for (; i + 2 <= rows; i += 2)                                                              \
    ember_q8_store2x16(acc[2 * i], acc[2 * i + 1], acc[2 * i + 2], acc[2 * i + 3],            \
                       _mm256_set1_ps(mult[i]), _mm256_set1_ps(mult[i + 1]), zy, lo, is_signed, \
                       CAP, y + i * P, y + (i + 1) * P);
    if (e->cap) { EMBER_Q8_ROW_PAIRS(1) } else { EMBER_Q8_ROW_PAIRS(0) }
#undef EMBER_Q8_ROW_PAIRS
  }
  for (; i < rows; ++i) {
    const __m256 m = _mm256_set1_ps(mult[i]);
    ember_q8_store16(acc[2 * i], acc[2 * i + 1], m, m, e, 0, y + i * P, count);
  }
#else
  int32_t acc[4][16];
  ember_q8_tile_ref(wrows, ldw, panel, k4, 0, acc);
  ember_q8_add_fixes_ref(wrows, ldw, panel, k4, nfix, rows, acc);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < count; ++j) {
      if (y32 != NULL)
        y32[i * P + j] = acc[i][j] + bias[i];
      else
        ember_q8_store1(acc[i][j] + bias[i], mult[i], e, y + i * P + j);
    }
#endif
}

/* one image of a convolution; mode 1: 1x1 stride 1, 2: flat padded image */
typedef struct {
  const uint8_t* xn;
  const uint8_t* w;
  const int32_t* bias;
  const float* mult;
  const ember_q8_epi* e;
  uint8_t* yn;
  int32_t* yn32; /* ConvInteger: int32 output (then yn is NULL) */
  const long* offs;  /* patch row k: mode 1 k * P, mode 2 its offset in the padded image */
  const long* offs2; /* k * ld: rows of the last, partial 1x1 panel */
  const uint8_t* zrow;
  const uint8_t* padded;
  int C, H, W, M, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, xpad, flip, chunk, mode, Wp, F, nfix;
  size_t task_bytes;
  uint8_t* own; /* the planned scratch of a serial run (no allocation), else NULL */
  int real;     /* mode 2 packing the real positions only (ember_q8_pack_real) */
} ember_q8_conv_job;

#if defined(EMBER_Q8_VNNI512)
/* a chunk of cp packed panels holding `valid` positions: the count of its last panel's, if
   at most EMBER_Q8_TAIL_COLS and K is long enough for them (EMBER_Q8_TAIL_K4 steps per
   column; their columns gathered into cols), else 0 */
static inline int ember_q8_chunk_tail(const uint8_t* panels, int k4, int cp, int valid,
                                      uint8_t* cols) {
  const int n = valid - 16 * (cp - 1);
  if (n < 1 || n > EMBER_Q8_TAIL_COLS || k4 < EMBER_Q8_TAIL_K4 * n) return 0;
  ember_q8_tail_cols(panels + (long)(cp - 1) * k4 * 64, k4, n, cols);
  return n;
}
#endif

static void ember_q8_conv_chunk(const ember_q8_conv_job* j, int pc, uint8_t* panels,
                                uint8_t* ybuf, uint8_t* rows, uint8_t* cols) {
  const int K = j->C * j->KH * j->KW, k4 = (K + 3) / 4, ldw = 4 * (k4 + j->nfix);
  const int P = j->OH * j->OW;
  const int ld = 16 * j->chunk, extent = j->mode == 2 && !j->real ? j->F : P;
  const int npan = (extent + 15) / 16, cp = npan - pc < j->chunk ? npan - pc : j->chunk;
  const int p0 = 16 * pc;
#if defined(EMBER_Q8_REAL_POSITIONS)
  if (j->real) { /* the real positions' panels, the tiles' rows stored straight into y */
    const int valid = P - p0 < 16 * cp ? P - p0 : 16 * cp;
    ember_q8_pack_real(j->padded, j->offs, K, k4, p0, cp, P, j->OW, j->Wp, (uint8_t)j->flip,
                       panels);
    const int ncol = ember_q8_chunk_tail(panels, k4, cp, valid, cols);
    for (int o0 = 0; o0 < j->M; o0 += EMBER_Q8_ROW_BLOCK) {
      const int rws = j->M - o0 < EMBER_Q8_ROW_BLOCK ? j->M - o0 : EMBER_Q8_ROW_BLOCK;
      const long at = (long)o0 * P + p0;
      ember_q8_conv_block512(j->w + (long)o0 * ldw, ldw, panels, cp, k4, j->nfix, j->bias + o0,
                             j->mult + o0, rws, j->e, j->yn != NULL ? j->yn + at : NULL,
                             j->yn32 != NULL ? j->yn32 + at : NULL, P, valid, cols, ncol);
    }
    return;
  }
#endif
  if (j->mode == 2) {
    const int f1 = p0 + 16 * cp < j->F ? p0 + 16 * cp : j->F;
    /* the output runs of the chunk's positions (the same for every row): grid position
       p0 + run_from -> output run_to, run_n bytes; nrun -1: more than fit, found per row */
    int run_from[64], run_to[64], run_n[64], nrun = 0;
    for (int f = p0; f < f1 && nrun >= 0;) {
      const int oh = f / j->Wp, ow = f % j->Wp;
      const int run = j->Wp - ow < f1 - f ? j->Wp - ow : f1 - f;
      if (ow < j->OW) {
        if (nrun == 64) {
          nrun = -1;
          break;
        }
        run_from[nrun] = f - p0, run_to[nrun] = oh * j->OW + ow;
        run_n[nrun++] = j->OW - ow < run ? j->OW - ow : run;
      }
      f += run;
    }
    ember_q8_pack(j->padded + p0, j->offs, K, j->zrow, k4, cp, (uint8_t)j->flip, panels);
#if defined(EMBER_Q8_VNNI512)
    const int ncol = ember_q8_chunk_tail(panels, k4, cp, f1 - p0, cols);
#endif
    for (int o0 = 0; o0 < j->M; o0 += EMBER_Q8_ROW_BLOCK) {
      const int rws = j->M - o0 < EMBER_Q8_ROW_BLOCK ? j->M - o0 : EMBER_Q8_ROW_BLOCK;
      int32_t* ybuf32 = j->yn32 != NULL ? (int32_t*)ybuf : NULL;
#if defined(EMBER_Q8_VNNI512)
      ember_q8_conv_block512(j->w + (long)o0 * ldw, ldw, panels, cp, k4, j->nfix, j->bias + o0,
                             j->mult + o0, rws, j->e, ybuf, ybuf32, ld, 16 * cp, cols, ncol);
#else
      for (int pp = 0; pp < cp; ++pp)
        ember_q8_conv_tile(j->w + (long)o0 * ldw, ldw, panels + (long)pp * k4 * 64, k4, j->nfix,
                           j->bias + o0, j->mult + o0, rws, j->e, ybuf + 16 * pp,
                           ybuf32 != NULL ? ybuf32 + 16 * pp : NULL, ld, 16);
#endif
      if (nrun >= 0) { /* the runs found once per chunk */
        for (int i = 0; i < rws; ++i) {
          for (int r = 0; r < nrun; ++r) {
            const long at = (long)(o0 + i) * P + run_to[r], from = (long)i * ld + run_from[r];
            if (ybuf32 != NULL)
              memcpy(j->yn32 + at, ybuf32 + from, (size_t)run_n[r] * 4);
            else
              ember_q8_copy(j->yn + at, ybuf + from, run_n[r]);
          }
        }
        continue;
      }
      for (int i = 0; i < rws; ++i) {
        for (int f = p0; f < f1;) {
          const int oh = f / j->Wp, ow = f % j->Wp;
          const int run = j->Wp - ow < f1 - f ? j->Wp - ow : f1 - f;
          if (ow < j->OW) {
            const int n = j->OW - ow < run ? j->OW - ow : run;
            const long at = (long)(o0 + i) * P + oh * j->OW + ow, from = (long)i * ld + f - p0;
            if (ybuf32 != NULL)
              memcpy(j->yn32 + at, ybuf32 + from, (size_t)n * 4);
            else
              ember_q8_copy(j->yn + at, ybuf + from, n);
          }
          f += run;
        }
      }
    }
    return;
  }
  /* mode 1, 1x1: the image rows are the patch rows */
  const int full = p0 + 16 * cp <= P ? cp : (P - p0) / 16;
  ember_q8_pack(j->xn + p0, j->offs, K, j->zrow, k4, full, (uint8_t)j->flip, panels);
  if (full < cp) { /* the last, partial panel: its row tails copied to 16-byte rows */
    const int p1 = p0 + 16 * full, rem = P - p1;
    for (int k = 0; k < K; ++k) {
      memcpy(rows + j->offs2[k], j->xn + j->offs[k] + p1, (size_t)rem);
      memset(rows + j->offs2[k] + rem, j->xpad, (size_t)(16 - rem));
    }
    ember_q8_pack(rows, j->offs2, K, j->zrow, k4, 1, (uint8_t)j->flip,
                  panels + (long)full * k4 * 64);
  }
#if defined(EMBER_Q8_VNNI512)
  const int valid = P - p0 < 16 * cp ? P - p0 : 16 * cp;
  const int ncol = ember_q8_chunk_tail(panels, k4, cp, valid, cols);
#endif
  for (int o0 = 0; o0 < j->M; o0 += EMBER_Q8_ROW_BLOCK) {
    const int rws = j->M - o0 < EMBER_Q8_ROW_BLOCK ? j->M - o0 : EMBER_Q8_ROW_BLOCK;
#if defined(EMBER_Q8_VNNI512)
    const long at = (long)o0 * P + p0;
    ember_q8_conv_block512(j->w + (long)o0 * ldw, ldw, panels, cp, k4, j->nfix, j->bias + o0,
                           j->mult + o0, rws, j->e, j->yn + at,
                           j->yn32 != NULL ? j->yn32 + at : NULL, P, valid, cols, ncol);
    continue;
#endif
    for (int pp = 0; pp < cp; ++pp) {
      const int p = p0 + 16 * pp, count = P - p < 16 ? P - p : 16;
      const long at = (long)o0 * P + p;
      ember_q8_conv_tile(j->w + (long)o0 * ldw, ldw, panels + (long)pp * k4 * 64, k4, j->nfix,
                         j->bias + o0, j->mult + o0, rws, j->e, j->yn + at,
                         j->yn32 != NULL ? j->yn32 + at : NULL, P, count);
    }
  }
}

/* chunks [begin, end) with this task's own workspace: panels | ybuf | partial-panel rows |
   tail columns */
static int32_t ember_q8_conv_range(int64_t begin, int64_t end, void* cdata) {
  const ember_q8_conv_job* j = (const ember_q8_conv_job*)cdata;
  const int K = j->C * j->KH * j->KW, k4 = (K + 3) / 4, ld = 16 * j->chunk;
  uint8_t* panels = j->own != NULL
                        ? j->own
                        : (uint8_t*)EmberBackendAllocWorkspace(1, 0, (uint64_t)j->task_bytes, 1, 8);
  if (panels == NULL) return -1;
  uint8_t* ybuf = panels + (long)j->chunk * k4 * 64;
  uint8_t* rows = ybuf + (j->yn32 != NULL ? 32 : 8) * ld; /* ybuf: 8 rows of bytes or int32 */
  uint8_t* cols = rows + (j->mode == 2 ? 0 : (long)K * ld);
  for (int64_t u = begin; u < end; ++u)
    ember_q8_conv_chunk(j, (int)u * j->chunk, panels, ybuf, rows, cols);
  if (j->own == NULL) EmberBackendFreeWorkspace(1, 0, panels);
  return 0;
}

/* the convolution into bytes (requantized) or, with y32, int32 (acc + bias) */
static int32_t ember_q8_conv_impl(const void* x_, const void* w_, const int32_t* bias,
                                  const float* mult, void* y_, int32_t* y32, void* scratch,
                                  int32_t N, int32_t C, int32_t H, int32_t W, int32_t M,
                                  int32_t KH, int32_t KW, int32_t OH, int32_t OW, int32_t sh,
                                  int32_t sw, int32_t ph, int32_t pw, int32_t dh, int32_t dw,
                                  int32_t xpad, int32_t flip, int32_t zy, int32_t relu,
                                  int32_t is_signed, int32_t chunk, int32_t nfix) {
  const uint8_t* x = (const uint8_t*)x_;
  uint8_t* y = (uint8_t*)y_;
  const int ybytes = y32 != NULL ? 32 : 8; /* ybuf bytes per position of 8 rows */
  const int K = C * KH * KW, k4 = (K + 3) / 4, P = OH * OW, ld = 16 * chunk;
  const int pointwise = KH == 1 && KW == 1 && ph == 0 && pw == 0;
  const int subsample = pointwise && (sh > 1 || sw > 1); /* 1x1 strided: pick the pixels */
  const int mode = pointwise ? 1 : 2;
  /* mode 2: the zero-point-padded image split into sh x sw phase planes (phase (a, b) holds
     padded rows a, a + sh, ... and columns b, b + sw, ...), so every tap of every stride is
     a contiguous run of one plane; Hq x Wq each, output (oh, ow) at grid oh * Wq + ow */
  const int Hq = OH + (KH - 1) * dh / sh, Wq = OW + (KW - 1) * dw / sw, F = OH * Wq;
  const long plane = (long)Hq * Wq, cplane = plane * sh * sw;
  ember_q8_epi e = ember_q8_epilogue(zy, relu, is_signed);
  /* the store's cap only where |acc| <= |bias| + 255 * 128 * K (|w| <= 128, the fix slots
     add back what they took) times |m| can reach 2^30, or m is NaN; no m: ConvInteger */
  e.cap = 0;
  for (int m = 0; mult != NULL && m < M; ++m)
    if (!((fabs((double)bias[m]) + 32640.0 * K) * fabs((double)mult[m]) < 1073741824.0)) e.cap = 1;
  /* scratch: offs[4 * k4] | offs2[4 * k4] | zrow[ld] | the padded (mode 2) or subsampled image */
  long* offs = (long*)scratch;
  long* offs2 = offs + 4 * k4;
  uint8_t* zrow = (uint8_t*)(offs2 + 4 * k4);
  uint8_t* padded = zrow + ld;
  memset(zrow, 0, (size_t)ld);
  int real = 0;
#if defined(EMBER_Q8_REAL_POSITIONS)
  real = mode == 2 && ember_q8_real_span(P, OW, Wq) < 32;
#endif
  const int npan = ((mode == 2 && !real ? F : P) + 15) / 16;
  const int threads = EmberBackendGetNumThreads();
  int ch = chunk;
  const int par = threads > 1 && (long)M * K * P >= EMBER_Q8_PAR_MACS && npan > 1;
  if (par) {
    const int share = (npan + threads - 1) / threads;
    ch = share < ch ? share : ch;
  }
  /* the taps of channel 0 by their divisions, every later channel's a plane further (4-5
     divisions per K row were some 2% of ResNet-50 int8) */
  for (int k = 0; k < K; ++k) {
    if (mode != 2) {
      offs[k] = (long)k * P;
    } else if (k >= KH * KW) {
      offs[k] = offs[k - KH * KW] + cplane;
    } else {
      const int kh = k / KW, kw = k % KW;
      const long phase = (long)(kh * dh % sh) * sw + kw * dw % sw;
      offs[k] = phase * plane + (long)(kh * dh / sh) * Wq + kw * dw / sw;
    }
    offs2[k] = (long)k * 16 * ch; /* the rows of a task */
  }
  const int units = (npan + ch - 1) / ch;
  ember_q8_conv_job job = {NULL, (const uint8_t*)w_, bias, mult, &e, NULL, NULL, offs, offs2, zrow,
                           padded, C, H, W, M, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, xpad,
                           flip, ch, mode, Wq, F, nfix, 0, NULL};
  job.real = real;
  job.task_bytes = (size_t)ch * k4 * 64 + (size_t)ybytes * ld;
  job.task_bytes += (mode == 2 ? 0 : (size_t)K * ld) + 16 * (size_t)k4 + 64;
  if (!par) { /* one task on the caller: its buffers follow the image in the planned scratch */
    const size_t image = mode == 2 ? (size_t)C * cplane + Wq + 64 : (subsample ? (size_t)C * P : 0);
    job.own = (uint8_t*)(((uintptr_t)(padded + image) + 63u) & ~(uintptr_t)63u);
  }
  if (subsample) { /* then a 1x1 stride-1 convolution of the OH x OW image */
    job.H = OH, job.W = OW, job.sh = 1, job.sw = 1;
  }
  for (int n = 0; n < N; ++n) {
    job.xn = x + (long)n * C * H * W;
    if (y32 != NULL)
      job.yn32 = y32 + (long)n * M * P;
    else
      job.yn = y + (long)n * M * P;
    if (subsample) {
      ember_q8_subsample(job.xn, C, H, W, OH, OW, sh, sw, padded);
      job.xn = padded;
    }
    if (mode == 2) {
      ember_q8_phase_planes(job.xn, C, H, W, sh, sw, ph, pw, Hq, Wq, (uint8_t)xpad, padded);
      memset(padded + C * cplane, xpad, (size_t)Wq + 64);
    }
    if (EmberBackendParallelFor(ember_q8_conv_range, &job, units, par ? 1 : units, 0) != 0)
      return -1;
  }
  return 0;
}

static inline int32_t ember_q8_conv(const void* x_, const void* w_, const int32_t* bias,
                                    const float* mult, void* y_, void* scratch, int32_t N,
                                    int32_t C, int32_t H, int32_t W, int32_t M, int32_t KH,
                                    int32_t KW, int32_t OH, int32_t OW, int32_t sh, int32_t sw,
                                    int32_t ph, int32_t pw, int32_t dh, int32_t dw, int32_t xpad,
                                    int32_t flip, int32_t zy, int32_t relu, int32_t is_signed,
                                    int32_t chunk, int32_t nfix) {
  return ember_q8_conv_impl(x_, w_, bias, mult, y_, NULL, scratch, N, C, H, W, M, KH, KW, OH,
                            OW, sh, sw, ph, pw, dh, dw, xpad, flip, zy, relu, is_signed, chunk,
                            nfix);
}
"""
