"""C source of the Winograd float32 convolution that ``ember.ops.nn_conv_winograd`` calls.

``ember_f32_winograd`` is a whole stride-1, dilation-1 3x3 (or 2x2) convolution of
channels-last (NHWC) float32 data, F(m x m, r x r) with output tiles of m = 2 or 4 for
r = 3 and of m = 4 for r = 2 (the phases of a stride-2 3x3 convolution: a = m + r - 1
transform points per axis; Lavin & Gray's matrices, ember.ir.ops.nn_conv_winograd_form):

1. input transform: every a x a patch of the zero-padded input (tile t, 16 channels at a
   time) becomes ``V[p][t][c] = (B^T d B)[p]`` for the a * a points p;
2. a * a matrix products ``M[p] = V[p] (T x C) @ U[p] (C x O)``, ``U = G g G^T`` the
   weight transformed and packed at build time (``[p][Op/16nb][C][16nb]``, Op = O rounded
   up to a multiple of 16 with zero filters, nb = 4 when Op is a multiple of 64, 2 when of
   32, else 1): register tiles of up to 16, 14 or 7 tiles x 16nb output channels, every V
   value broadcast once per step;
3. output transform: ``y = A^T M A`` per tile and 16 output channels, the image's edge
   tiles cut to the output (odd sizes), the last block of channels to O (masked stores).

Each phase is split across the runtime's threads (``EmberBackendParallelFor``); V and M
live in the call's heap scratch (about ``a * a * T * (C + Op)`` floats), panel by panel (a
panel: R tiles, a thread's share; 1 KiB between panels, ``EMBER_WINO_GAP``; a cache line more
after each point's V or M whose size is a multiple of 1 KiB, ``EMBER_WINO_STRIDE``). With
``__AVX512F__`` the three phases use zmm intrinsics; elsewhere the same arithmetic runs as
plain C loops with ``fmaf`` (the transforms: the same operations in the same order). The
layer's fused
epilogue, where it is a chain of bias add, residual add and ReLU, is applied to each output
vector of the output transform before it is stored (``epi``, matched in the loop IR by
ember.ops.nn_conv_winograd_epilogue); any other epilogue runs after, in loop IR.

The c kind pastes this text into a library (``ember_f32_winograd`` static); the runtime
library exports its AVX-512 copy ``ember_f32_winograd_avx512`` for the llvm kinds
(``ember/runtime/src/f32_tiles.h``, ember.codegen.llvm.tiles), so their calls compute
the same bits.

This file holds the vector layer, the job, the matrix products, the driver and the
emission API; ember.codegen.c.f32_winograd_transforms the transform tables and the C of
the input and output transforms (with the epilogue steps), pasted here in order.
"""

from __future__ import annotations

from ember.codegen.c.f32_winograd_transforms import (
    INPUT_TRANSFORM_C,
    OUTPUT_TRANSFORM_C,
    TRANSFORMS,
    matrix_c,
    table_suffix,
)

__all__ = ["TRANSFORMS", "WINOGRAD_C", "WINOGRAD_HELPER_KEY", "WINOGRAD_KERNEL_NAMES", "winograd_c"]

#: the call_extern names this file defines.
WINOGRAD_KERNEL_NAMES: frozenset[str] = frozenset({"ember_f32_winograd"})

#: key of the helper block in a FileContext.
WINOGRAD_HELPER_KEY = "0f_ember_f32_winograd"


def winograd_c() -> str:
    """The C source (the transform matrices of F(2,3), F(4,3) and F(4,2) as constant
    tables)."""
    tables = ""
    for (m, r), (bt, at) in TRANSFORMS.items():
        tables += matrix_c(f"ember_wino_bt{table_suffix(m, r)}", bt, 6)
        tables += matrix_c(f"ember_wino_at{table_suffix(m, r)}", at, 6)
    return tables + _WINOGRAD_C


#: the vector layer (zmm intrinsics or plain C) and the job every phase reads.
_VECTOR_C = r"""
#ifndef EMBER_F32_API /* exported by the runtime: src/f32_tiles.h */
#define EMBER_F32_API static __attribute__((unused))
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 ember_wv;
#define EMBER_WV_ZERO() _mm512_setzero_ps()
#define EMBER_WV_LOAD(p) _mm512_loadu_ps(p)
#define EMBER_WV_STORE(p, v) _mm512_storeu_ps((p), (v))
#define EMBER_WV_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define EMBER_WV_SET1(s) _mm512_set1_ps(s)
#define EMBER_WV_ADD(a, b) _mm512_add_ps((a), (b))
#define EMBER_WV_SUB(a, b) _mm512_sub_ps((a), (b))
/* v < 0 ? 0 : v (the loop IR's ReLU: max_ps returns its second operand, v, for NaN) */
#define EMBER_WV_RELU(v) _mm512_max_ps(_mm512_setzero_ps(), (v))
/* the 16 floats at p when ok, else zeros (a zero mask reads nothing: p may lie outside) */
#define EMBER_WV_LOADIF(p, ok) _mm512_maskz_loadu_ps((__mmask16)(-(ok) & 0xffff), (p))
/* the first n lanes (1..16) of p, the others zero / left alone */
#define EMBER_WV_LOADN(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), (p))
#define EMBER_WV_STOREN(p, v, n) _mm512_mask_storeu_ps((p), (__mmask16)((1u << (n)) - 1u), (v))
#else
typedef struct {
  float f[16];
} ember_wv;
#define EMBER_WV_EACH for (int i = 0; i < 16; ++i)
static inline ember_wv ember_wv_set1(float s) {
  ember_wv r;
  EMBER_WV_EACH r.f[i] = s;
  return r;
}
static inline ember_wv ember_wv_zero(void) { return ember_wv_set1(0.0f); }
static inline ember_wv ember_wv_load(const float* p) {
  ember_wv r;
  EMBER_WV_EACH r.f[i] = p[i];
  return r;
}
static inline void ember_wv_store(float* p, ember_wv v) { EMBER_WV_EACH p[i] = v.f[i]; }
static inline ember_wv ember_wv_fma(ember_wv a, ember_wv b, ember_wv c) {
  EMBER_WV_EACH c.f[i] = fmaf(a.f[i], b.f[i], c.f[i]);
  return c;
}
static inline ember_wv ember_wv_add(ember_wv a, ember_wv b) {
  EMBER_WV_EACH a.f[i] += b.f[i];
  return a;
}
static inline ember_wv ember_wv_sub(ember_wv a, ember_wv b) {
  EMBER_WV_EACH a.f[i] -= b.f[i];
  return a;
}
static inline ember_wv ember_wv_loadn(const float* p, int n) {
  ember_wv r = ember_wv_set1(0.0f);
  for (int i = 0; i < n; ++i) r.f[i] = p[i];
  return r;
}
static inline void ember_wv_storen(float* p, ember_wv v, int n) {
  for (int i = 0; i < n; ++i) p[i] = v.f[i];
}
static inline ember_wv ember_wv_relu(ember_wv v) {
  EMBER_WV_EACH v.f[i] = v.f[i] < 0.0f ? 0.0f : v.f[i];
  return v;
}
#define EMBER_WV_ZERO() ember_wv_zero()
#define EMBER_WV_LOAD(p) ember_wv_load(p)
#define EMBER_WV_STORE(p, v) ember_wv_store((p), (v))
#define EMBER_WV_FMA(a, b, c) ember_wv_fma((a), (b), (c))
#define EMBER_WV_SET1(s) ember_wv_set1(s)
#define EMBER_WV_ADD(a, b) ember_wv_add((a), (b))
#define EMBER_WV_SUB(a, b) ember_wv_sub((a), (b))
#define EMBER_WV_RELU(v) ember_wv_relu(v)
#define EMBER_WV_LOADN(p, n) ember_wv_loadn((p), (n))
#define EMBER_WV_LOADIF(p, ok) ((ok) ? ember_wv_load(p) : ember_wv_zero())
#define EMBER_WV_STOREN(p, v, n) ember_wv_storen((p), (v), (n))
#endif

/* the floats from one transform point's V (M) to the next: n = R C or Tp C (R Op or Tp Op), and
   a cache line (16 floats) more where n is a multiple of 1 KiB (256 floats): see the job's vps */
#define EMBER_WINO_STRIDE(n) ((n) % 256 == 0 ? (n) + 16 : (n))
/* floats between one panel's V (M) and the next's: see the job's vpan */
#define EMBER_WINO_GAP 256

typedef struct {
  const float* x;
  const float* u;
  float* y;
  float* v;  /* [Tp/R][P] or [P][Tp/R], then [C/16][R][16]: panels of R tiles, 16 channels
                contiguous per tile (vps, vpan) */
  float* mm; /* [Tp/R][P] or [P][Tp/R], then [R][Op]: Tp = T rounded up to a multiple of R, Op =
                O up to one of 16 */
  int N, H, W, C, O, Op, OH, OW, ph, pw, m, r, th, tw, T, nb, R, Tp;
  /* the floats from one transform point's V (M) to the next in a panel (EMBER_WINO_STRIDE).
     At a multiple of 4 KiB (resnet8's 32x32x16 layers: Tp C = 64 x 16 floats then) a tile's a * a
     vectors, stored by the input transform and loaded by the output transform, all fell in
     one set of the 12-way L1 and evicted each other: one cache line more made those layers
     0.69-0.74x their time (one thread, CPU time). At an odd multiple of 2 KiB (resnet8's
     16x16x32 layers, 16 x 32 floats; dbnet's 80x80 layers, 400 x 96) they fall in two sets,
     18 lines each: the input transform of one tile then took 3.1x the time of the same tile
     at a stride one line longer (60 against 19 ns, C = 16, stores to L1-resident V). At a
     multiple of 1 KiB (4 sets, 9 lines each: resnet8's panels of 16 x 16, 8 x 32 and 4 x 64
     floats) the line still made its layers 0.94-0.97x their 2-thread time */
  long vps, mps;
  /* the floats from one panel's V (M) to the next. With threads, panel by panel ([Tp/R][P]
     ..., vpan = P vps + EMBER_WINO_GAP): the panels are the threads' shares, each its own
     stretch of memory. Point by point ([P][Tp/R]..., vpan = R C), every point had a
     boundary between panels that two cores wrote, and each core's prefetchers pulled in
     lines of the other's panel, which were then written again: resnet8's 16x16x32 layer at 2
     threads took 7.3-10.6 us (one thread: 6.9) against 4.9-5.0 with 4 KiB between panels (a
     C harness, the runtime's pool, the far placement of stop 32); panel by panel 3.7-3.9 in
     the near placement (point by point 4.9-5.1). One thread keeps the point-by-point layout
     (panel by panel its 32x32x16 layers took 1.02x the time) unless it streams the panels
     through one panel's scratch (vpan = mpan = 0: see ember_f32_winograd) */
  long vpan, mpan;
  int span; /* tiles per task of ember_wino_tiles (a multiple of R) */
  const float* bias; /* [O] of EMBER_WINO_BIAS */
  const float* res;  /* (N, OH, OW, O) of EMBER_WINO_RES */
  int32_t epi;       /* the fused epilogue: steps of 4 bits, the lowest first (0: none) */
} ember_wino_job;
"""

#: the matrix products (phase 2): register tiles of R tiles x 16nb output channels.
_GEMM_C = r"""
/* M[R x 16nb] = V[R x C] @ U[C x 16nb]: v one panel ([C/16][R][16]), u [C][16nb], M rows
   ldm apart; R x NB accumulators (at most 16 x 1, 14 x 2 or 7 x 4 zmm: with NB weight
   vectors, 32 at most; V's values are broadcast from memory). Each accumulator sums its C
   products in the same order whatever R and NB: the same bits */
static inline __attribute__((always_inline)) void ember_wino_gemm_tile(const float* v,
                                                                       const float* u, int C,
                                                                       float* mo, long ldm,
                                                                       int R, int NB) {
  ember_wv acc[16][4];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b)
      if (r < R && b < NB) acc[r][b] = EMBER_WV_ZERO();
  }
  for (int cb = 0; cb < C; cb += 16, v += 16 * R) {
#pragma GCC unroll 4
    for (int cc = 0; cc < 16; ++cc, u += 16 * NB) {
      ember_wv w[4];
#pragma GCC unroll 4
      for (int b = 0; b < 4; ++b)
        if (b < NB) w[b] = EMBER_WV_LOAD(u + 16 * b);
#pragma GCC unroll 16
      for (int r = 0; r < 16; ++r) {
        if (r < R) {
          const ember_wv x = EMBER_WV_SET1(v[r * 16 + cc]);
#pragma GCC unroll 4
          for (int b = 0; b < 4; ++b)
            if (b < NB) acc[r][b] = EMBER_WV_FMA(x, w[b], acc[r][b]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b)
      if (r < R && b < NB) EMBER_WV_STORE(mo + r * ldm + 16 * b, acc[r][b]);
  }
}

#define EMBER_WINO_R(RR)                                                       \
  case RR:                                                                     \
    if (NB == 2)                                                               \
      ember_wino_gemm_tile(v, u, C, mo, ldm, RR, 2);                           \
    else                                                                       \
      ember_wino_gemm_tile(v, u, C, mo, ldm, RR, 1);                           \
    break;
#define EMBER_WINO_R4(RR)                                                      \
  case RR:                                                                     \
    ember_wino_gemm_tile(v, u, C, mo, ldm, RR, 4);                             \
    break;

static void ember_wino_gemm_rows(const float* v, const float* u, int C, float* mo, long ldm,
                                 int R, int NB) {
  if (NB == 4) { /* four blocks: at most 7 rows (panel_rows) */
    switch (R) {
      EMBER_WINO_R4(7)
      EMBER_WINO_R4(6)
      EMBER_WINO_R4(5)
      EMBER_WINO_R4(4)
      EMBER_WINO_R4(3)
      EMBER_WINO_R4(2)
      default:
        ember_wino_gemm_tile(v, u, C, mo, ldm, 1, 4);
    }
    return;
  }
  switch (R) {
    case 16: /* one block of output channels only (panel_rows) */
      ember_wino_gemm_tile(v, u, C, mo, ldm, 16, 1);
      break;
    case 15:
      ember_wino_gemm_tile(v, u, C, mo, ldm, 15, 1);
      break;
    EMBER_WINO_R(14)
    EMBER_WINO_R(13)
    EMBER_WINO_R(12)
    EMBER_WINO_R(11)
    EMBER_WINO_R(10)
    EMBER_WINO_R(9)
    EMBER_WINO_R(8)
    EMBER_WINO_R(7)
    EMBER_WINO_R(6)
    EMBER_WINO_R(5)
    EMBER_WINO_R(4)
    EMBER_WINO_R(3)
    EMBER_WINO_R(2)
    default:
      if (NB == 2)
        ember_wino_gemm_tile(v, u, C, mo, ldm, 1, 2);
      else
        ember_wino_gemm_tile(v, u, C, mo, ldm, 1, 1);
  }
}

/* task = (point p, block of 16nb output channels): every panel of tiles */
static int32_t ember_wino_gemm(int64_t begin, int64_t end, void* cdata) {
  const ember_wino_job* j = (const ember_wino_job*)cdata;
  const int C = j->C, Op = j->Op, R = j->R, bw = 16 * j->nb, nblk = Op / bw;
  for (int64_t task = begin; task < end; ++task) {
    const int p = (int)(task / nblk), ob = (int)(task % nblk);
    const float* u = j->u + ((long)p * nblk + ob) * (long)C * bw;
    for (int t = 0; t < j->Tp; t += R) {
      const float* v = j->v + p * j->vps + (t / R) * j->vpan;
      float* mo = j->mm + p * j->mps + (t / R) * j->mpan + (long)ob * bw;
      ember_wino_gemm_rows(v, u, C, mo, Op, R, j->nb);
    }
  }
  return 0;
}
"""

#: the tasks of all three phases per span of tiles, and the exported entry point.
_DRIVER_C = r"""
/* task = span tiles (whole panels) through all three phases: the transformed input and the
   products of a tile stay in the cache of the core that made them (ember_wino_in,
   ember_wino_gemm and ember_wino_out split by tiles, points and tiles: at 2 threads every
   phase read what the other core wrote, and the layers ran slower than at one thread:
   resnet8's 32x32x16 0.49x). The same calls on the same panels: the same bits. */
static int32_t ember_wino_tiles(int64_t begin, int64_t end, void* cdata) {
  const ember_wino_job* j = (const ember_wino_job*)cdata;
  const int C = j->C, Op = j->Op, R = j->R, bw = 16 * j->nb, nblk = Op / bw;
  const int P = (j->m + j->r - 1) * (j->m + j->r - 1);
  for (int64_t task = begin; task < end; ++task) {
    const long t0 = task * (long)j->span;
    const long t1 = t0 + j->span < j->Tp ? t0 + j->span : j->Tp;
    ember_wino_in(t0, t1, cdata);
    for (int p = 0; p < P; ++p) {
      for (int ob = 0; ob < nblk; ++ob) {
        const float* u = j->u + ((long)p * nblk + ob) * (long)C * bw;
        for (long t = t0; t < t1; t += R) {
          const float* v = j->v + p * j->vps + (t / R) * j->vpan;
          float* mo = j->mm + p * j->mps + (t / R) * j->mpan + (long)ob * bw;
          ember_wino_gemm_rows(v, u, C, mo, Op, R, j->nb);
        }
      }
    }
    ember_wino_out(t0, t1 < j->T ? t1 : j->T, cdata);
  }
  return 0;
}

/* the whole convolution: y (N, OH, OW, O) of x (N, H, W, C) padded by (ph, pw) at the
   start; u the transformed weight, its output channels zero-padded to Op (O rounded up to
   a multiple of 16); R tiles per panel of the products; scratch for either layout of V and
   M (ember.ops.nn_conv_winograd.scratch_bytes): the larger of Tp / R * (a^2 *
   (EMBER_WINO_STRIDE(R C) + EMBER_WINO_STRIDE(R Op)) + 2 EMBER_WINO_GAP) and a^2 *
   (EMBER_WINO_STRIDE(Tp C) + EMBER_WINO_STRIDE(Tp Op)) floats (Tp: the tiles rounded up to
   a multiple of R; a = m + r - 1); epi the
   fused epilogue's steps (EMBER_WINO_*, 4 bits each, the lowest first; 0: none) with its
   bias [O] and residual (N, OH, OW, O) (either may be y when no step reads it) */
EMBER_F32_API int32_t ember_f32_winograd(const float* x, const float* u, float* y,
                                        void* scratch, int32_t N, int32_t H, int32_t W,
                                        int32_t C, int32_t O, int32_t OH, int32_t OW,
                                        int32_t ph, int32_t pw, int32_t m, int32_t r,
                                        int32_t nb, int32_t R, const float* bias,
                                        const float* res, int32_t epi) {
  ember_wino_job j;
  j.x = x, j.u = u, j.y = y, j.N = N, j.H = H, j.W = W, j.C = C, j.O = O, j.OH = OH;
  j.Op = (O + 15) / 16 * 16;
  j.OW = OW, j.ph = ph, j.pw = pw, j.m = m, j.r = r, j.nb = nb, j.R = R;
  j.bias = bias, j.res = res, j.epi = epi;
  j.th = (OH + m - 1) / m, j.tw = (OW + m - 1) / m, j.T = N * j.th * j.tw;
  j.Tp = (j.T + R - 1) / R * R;
  const int a = m + r - 1, P = a * a, threads = EmberBackendGetNumThreads(), par = threads > 1;
  if (par) { /* panel by panel: each thread's share a stretch of its own */
    j.vps = EMBER_WINO_STRIDE((long)R * C), j.mps = EMBER_WINO_STRIDE((long)R * j.Op);
    j.vpan = P * j.vps + EMBER_WINO_GAP, j.mpan = P * j.mps + EMBER_WINO_GAP;
  } else { /* point by point: one thread reads each point's V and M in one stretch */
    j.vps = EMBER_WINO_STRIDE((long)j.Tp * C), j.mps = EMBER_WINO_STRIDE((long)j.Tp * j.Op);
    j.vpan = (long)R * C, j.mpan = (long)R * j.Op;
  }
  const long panels = j.Tp / R, u_floats = (long)P * C * j.Op;
  j.v = (float*)scratch;
  j.mm = j.v + (par ? panels * j.vpan : P * j.vps);
  /* one block of output channels no wider than the input's: a panel's products can go over
     its V, which they have read before they store. With threads they do (resnet8 at 2
     threads 0.990x in the near placement, 0.957x in the far one: a panel's V and M, 72 KiB
     apart, left the L1) */
  const int in_place = j.Op == 16 * nb && j.Op <= C;
  if (par && in_place) j.mm = j.v, j.mps = j.vps, j.mpan = j.vpan;
  /* one thread: tiles through all three phases a panel at a time, every panel in the same
     scratch (M over V when one block of output channels fits in its place), where reading
     the weight U again for each panel costs no more than the point-by-point layout's V and M
     going through the L2: a layer's V and M then stay in the L1 and leave room in the L2 for
     the next layers' weights (resnet8 0.992x, one thread; its 8x8x64 layer in one panel) */
  if (!par && u_floats * (panels - 1) <= (long)P * j.Tp * (C + j.Op)) {
    j.vps = EMBER_WINO_STRIDE((long)R * C), j.mps = EMBER_WINO_STRIDE((long)R * j.Op);
    j.vpan = j.mpan = 0;
    j.mm = in_place ? j.v : j.v + P * j.vps;
    j.span = R;
    return ember_wino_tiles(0, panels, &j);
  }
  /* threads: tiles through all phases per task where re-reading the weight U once per task
     costs less than moving V and M between cores (U: P C Op floats, V + M: P Tp (C + Op)),
     or up to twice as much where every thread gets a panel of its own: a line of V or M that
     the other core wrote costs more than one of U from this core's L2. resnet8's stride-2
     16x16x32->32 layer (U 1.33x V + M, 2 panels) then took the run from 78.1-78.8 to
     73.9-74.8 us at 2 threads (0.95x; yolo 0.977x, crnn 0.979x, resnet50 1.000x: the AOT run,
     interleaved in one process, load 0.5) */
  const long u_point = (long)C * j.Op, vm_point = (long)j.Tp * (C + j.Op);
  if (par && (u_point <= vm_point || (u_point <= 2 * vm_point && panels >= threads))) {
    const long per = (panels + 2L * threads - 1) / (2L * threads);
    j.span = (int)(per * R);
    return EmberBackendParallelFor(ember_wino_tiles, &j, (j.Tp + j.span - 1) / j.span, 1, 0)
               == 0 ? 0 : -1;
  }
  const long tasks = (long)P * (j.Op / (16 * nb));
  if (EmberBackendParallelFor(ember_wino_in, &j, j.Tp, par ? 4 : j.Tp, 0) != 0) return -1;
  if (EmberBackendParallelFor(ember_wino_gemm, &j, tasks, par ? 1 : tasks, 0) != 0) return -1;
  if (EmberBackendParallelFor(ember_wino_out, &j, j.T, par ? 4 : j.T, 0) != 0) return -1;
  return 0;
}
"""

_WINOGRAD_C = "".join([_VECTOR_C, INPUT_TRANSFORM_C, _GEMM_C, OUTPUT_TRANSFORM_C, _DRIVER_C])


#: the C source added to a file that calls ember_f32_winograd.
WINOGRAD_C = winograd_c()
