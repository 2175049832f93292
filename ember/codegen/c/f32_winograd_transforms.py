"""C text of the Winograd kernel's input and output transforms (``ember_f32_winograd``).

The transform tables (B^T and A^T of F(2,3) and F(4,3)) and the C of the phases that
apply them: the fused epilogue's steps (``EMBER_WINO_*``, ``ember_wino_epi``), the table
product ``ember_wino_apply``, the input transform (``ember_wino_in``: ``V = B^T d B`` per
tile) and the output transform (``ember_wino_out``: ``y = A^T M A`` per tile, the epilogue
applied to each vector before it is stored). ember.codegen.c.f32_winograd pastes them,
in order, around its vector layer, job struct, matrix products and driver: the pieces
are only meaningful in that file's concatenation.
"""

from __future__ import annotations


def matrix_c(name: str, rows: list[list[float]], width: int) -> str:
    """A static const float table ``name[len(rows)][width]`` (zero padded)."""
    body = ", ".join(
        "{" + ", ".join(repr(float(v)) + "f" for v in [*r, *[0.0] * (width - len(r))]) + "}"
        for r in rows
    )
    return f"static const float {name}[{len(rows)}][{width}] = {{{body}}};\n"


#: B^T and A^T of F(2,3), F(4,3) and F(4,2) by (m, r) (Lavin & Gray; the points 0, 1, -1;
#: 0, +-1, +-2; 0, +-1, -2; and inf); ember.ir.ops.nn_conv_winograd_form has the same
#: matrices with G for the weight transform (a test checks that they agree). Their C names:
#: ember_wino_bt{m} and ember_wino_at{m} for r = 3, ember_wino_bt{m}{r} and so on else.
TRANSFORMS: dict[tuple[int, int], tuple[list[list[float]], list[list[float]]]] = {
    (2, 3): (
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]],
    ),
    (4, 3): (
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    ),
    (4, 2): (
        [
            [-2, -1, 2, 1, 0],
            [0, 2, 3, 1, 0],
            [0, -2, 1, 1, 0],
            [0, -1, 0, 1, 0],
            [0, -2, -1, 2, 1],
        ],
        [[1, 1, 1, 1, 0], [0, 1, -1, -2, 0], [0, 1, 1, 4, 0], [0, 1, -1, -8, 1]],
    ),
}


def table_suffix(m: int, r: int) -> str:
    """The C tables' suffix of F(m, r): ``m`` for r = 3, ``m`` and ``r`` else."""
    return f"{m}" if r == 3 else f"{m}{r}"


#: the fused epilogue's steps, the table product and the input transform (phase 1), after
#: the vector layer and ``ember_wino_job``.
INPUT_TRANSFORM_C = r"""
/* the fused epilogue's steps, applied to each output vector as it is stored (the same
   operations in the same order as the loop IR they replace: ember.ops.nn_conv_winograd_epilogue) */
#define EMBER_WINO_BIAS 1 /* v + bias[o] */
#define EMBER_WINO_RES 2  /* v + res[the output's index] */
#define EMBER_WINO_RELU 3 /* v < 0 ? 0 : v */

static inline __attribute__((always_inline)) ember_wv ember_wino_epi(int32_t epi, ember_wv v,
                                                                     ember_wv b,
                                                                     const float* res,
                                                                     int lanes) {
  for (; epi; epi >>= 4) {
    const int step = epi & 15;
    if (step == EMBER_WINO_BIAS)
      v = EMBER_WV_ADD(v, b);
    else if (step == EMBER_WINO_RES)
      v = EMBER_WV_ADD(v, lanes == 16 ? EMBER_WV_LOAD(res) : EMBER_WV_LOADN(res, lanes));
    else
      v = EMBER_WV_RELU(v);
  }
  return v;
}

/* r = sum_k t[i][k] * d[k] for the rows i < rows of table t (zero coefficients skipped,
   +-1 as additions: the table is a compile-time constant once inlined) */
static inline __attribute__((always_inline)) void ember_wino_apply(const float (*t)[6], int rows,
                                                                   int a, const ember_wv* d,
                                                                   long ds, ember_wv* r,
                                                                   long rs) {
#pragma GCC unroll 6
  for (int i = 0; i < rows; ++i) {
    ember_wv acc = EMBER_WV_ZERO();
    int first = 1;
#pragma GCC unroll 6
    for (int k = 0; k < a; ++k) {
      const float c = t[i][k];
      if (c == 0.0f) continue;
      const ember_wv dk = d[k * ds];
      if (first) {
        acc = c == 1.0f ? dk : (c == -1.0f ? EMBER_WV_SUB(EMBER_WV_ZERO(), dk)
                                           : EMBER_WV_FMA(EMBER_WV_SET1(c), dk, EMBER_WV_ZERO()));
        first = 0;
      } else if (c == 1.0f) {
        acc = EMBER_WV_ADD(acc, dk);
      } else if (c == -1.0f) {
        acc = EMBER_WV_SUB(acc, dk);
      } else {
        acc = EMBER_WV_FMA(EMBER_WV_SET1(c), dk, acc);
      }
    }
    r[i * rs] = acc;
  }
}

/* p has just been moved by a stride: from here on the compiler sees a value it cannot work
   out, so each of a tile's 36 loads and stores takes the previous address plus the stride.
   Without it gcc unrolled the tile's addresses into 36 offsets (runtime strides times
   constants) kept on the stack across the channel blocks: the input transform of one tile
   of 16 channels took 46-49 ns against 19-22 (653 instructions, 223 of them on the stack,
   against 384 and 36) */
#define EMBER_WINO_BUMPED(p) __asm__("" : "+r"(p))

/* F(4,3)'s B^T and A^T with their shared sums (the zero and +-1 coefficients of the tables
   above, regrouped: 14 vector operations for B^T's 6 rows where the table product takes 22,
   10 for A^T's 4 where it takes 14; the same values up to rounding). r = B^T d, r = A^T d
   for the 6 values d[0], d[ds], ..., results rs apart */
static inline __attribute__((always_inline)) void ember_wino_bt4_cse(const ember_wv* d, long ds,
                                                                     ember_wv* r, long rs) {
  const ember_wv d0 = d[0], d1 = d[ds], d2 = d[2 * ds], d3 = d[3 * ds], d4 = d[4 * ds];
  const ember_wv d5 = d[5 * ds];
  const ember_wv s12 = EMBER_WV_ADD(d1, d2), s34 = EMBER_WV_ADD(d3, d4);
  const ember_wv u12 = EMBER_WV_SUB(d1, d2), u43 = EMBER_WV_SUB(d4, d3);
  const ember_wv w31 = EMBER_WV_SUB(d3, d1), w42 = EMBER_WV_SUB(d4, d2);
  r[0] = EMBER_WV_FMA(EMBER_WV_SET1(4.0f), d0, EMBER_WV_FMA(EMBER_WV_SET1(-5.0f), d2, d4));
  r[rs] = EMBER_WV_FMA(EMBER_WV_SET1(-4.0f), s12, s34);
  r[2 * rs] = EMBER_WV_FMA(EMBER_WV_SET1(4.0f), u12, u43);
  r[3 * rs] = EMBER_WV_FMA(EMBER_WV_SET1(2.0f), w31, w42);
  r[4 * rs] = EMBER_WV_FMA(EMBER_WV_SET1(-2.0f), w31, w42);
  r[5 * rs] = EMBER_WV_FMA(EMBER_WV_SET1(4.0f), d1, EMBER_WV_FMA(EMBER_WV_SET1(-5.0f), d3, d5));
}

static inline __attribute__((always_inline)) void ember_wino_at4_cse(const ember_wv* d, long ds,
                                                                     ember_wv* r, long rs) {
  const ember_wv s12 = EMBER_WV_ADD(d[ds], d[2 * ds]), d12 = EMBER_WV_SUB(d[ds], d[2 * ds]);
  const ember_wv s34 = EMBER_WV_ADD(d[3 * ds], d[4 * ds]);
  const ember_wv d34 = EMBER_WV_SUB(d[3 * ds], d[4 * ds]);
  r[0] = EMBER_WV_ADD(EMBER_WV_ADD(d[0], s12), s34);
  r[rs] = EMBER_WV_FMA(EMBER_WV_SET1(2.0f), d34, d12);
  r[2 * rs] = EMBER_WV_FMA(EMBER_WV_SET1(4.0f), s34, s12);
  r[3 * rs] = EMBER_WV_ADD(EMBER_WV_FMA(EMBER_WV_SET1(8.0f), d34, d12), d[5 * ds]);
}

/* B^T (rows = a) or A^T (rows = m) of F(m,3) on d: the shared sums for m = 4, the table's
   product for m = 2 (whose coefficients are all 0 and +-1) */
static inline __attribute__((always_inline)) void ember_wino_rows(const float (*t)[6], int rows,
                                                                  int a, const ember_wv* d,
                                                                  long ds, ember_wv* r, long rs) {
  if (a == 6 && rows == 6)
    ember_wino_bt4_cse(d, ds, r, rs);
  else if (a == 6 && rows == 4)
    ember_wino_at4_cse(d, ds, r, rs);
  else
    ember_wino_apply(t, rows, a, d, ds, r, rs);
}

/* .B of a tile's B^T d (e, a x a vectors), a row at a time, stored pstride floats apart
   from o (the operations of .B in their order) */
static inline __attribute__((always_inline)) void ember_wino_in_rows(const ember_wv* e, float* o,
                                                                     long pstride, int a,
                                                                     const float (*bt)[6]) {
#pragma GCC unroll 6
  for (int i = 0; i < a; ++i) {
    ember_wv r[6];
    ember_wino_rows(bt, a, a, e + i * a, 1, r, 1);
#pragma GCC unroll 6
    for (int q = 0; q < a; ++q) {
      EMBER_WV_STORE(o, r[q]);
      o += pstride;
      EMBER_WINO_BUMPED(o);
    }
  }
}

/* Where channel c of the image the transforms read lies from its pixel: c itself, or, for the
   phases of a stride-2 convolution (c4 = C / 4 channels of x each; rs = W C floats between
   two rows of phases, two of x), phase c / c4 = 2 dr + dc: x[2i + dr, 2j + dc, c % c4] */
static inline __attribute__((always_inline)) long ember_wino_coff(int c, int c4, long rs) {
  return c4 ? (c / c4 / 2) * (rs / 2) + (c / c4 % 2) * c4 + c % c4 : c;
}

/* V of one tile whose patch (at xt, rows rs floats apart, columns cs) lies inside the image,
   for every block of 16 channels: B^T d a column of the patch at a time (its a values loaded
   just before), then .B a row at a time, stored (the operations of B^T d then .B, in their
   order); c4 as ember_wino_coff's */
static inline __attribute__((always_inline)) void ember_wino_in_patch(const float* xt, long rs,
                                                                      long cs, int c4, int C,
                                                                      int R, float* vt,
                                                                      long pstride, int a,
                                                                      const float (*bt)[6]) {
  for (int c = 0; c < C; c += 16) {
    ember_wv e[36];
    const float* pk = xt + ember_wino_coff(c, c4, rs);
#pragma GCC unroll 6
    for (int k = 0; k < a; ++k) {
      ember_wv d[6];
      const float* p = pk;
#pragma GCC unroll 6
      for (int i = 0; i < a; ++i) {
        d[i] = EMBER_WV_LOAD(p);
        p += rs;
        EMBER_WINO_BUMPED(p);
      }
      pk += cs;
      EMBER_WINO_BUMPED(pk);
      ember_wino_rows(bt, a, a, d, 1, e + k, a);
    }
    ember_wino_in_rows(e, vt + (long)c * R, pstride, a, bt);
  }
}

/* V of an edge tile: bit i of rows_in (cols_in) says whether the patch's row (column) i lies
   inside the image; the values outside read as zero, with the same bits as a zero-padded
   patch. A column outside gives B^T d = 0 without loads. A row outside is a masked load with
   an empty mask from a row inside: from its own address, which may lie on an unmapped page
   before or after the image, this CPU (Zen 5) took a fault-suppression assist of ~0.5 us per
   load (resnet8's 8x8x64 input transform 7.6 us against 0.6 with valid addresses, 32x32x16
   11.1 against 4.1). The rows' addresses and masks are worked out once per tile: a mask per
   value, from a table of 36 worked out per tile, made an edge tile take 1.9x an inner one
   (52 against 28 ns, 16 channels) */
static inline __attribute__((always_inline)) void ember_wino_in_edge(
    const float* xt, long rs, long cs, int c4, int C, int R, unsigned rows_in, unsigned cols_in,
    float* vt, long pstride, int a, const float (*bt)[6]) {
  const float* row[6];
  int ok[6];
  const float* inner = xt + (long)__builtin_ctz(rows_in) * rs;
#pragma GCC unroll 6
  for (int i = 0; i < a; ++i) {
    ok[i] = (int)(rows_in >> i) & 1;
    row[i] = ok[i] ? xt + (long)i * rs : inner;
  }
  for (int c = 0; c < C; c += 16) {
    ember_wv e[36];
    const long off = ember_wino_coff(c, c4, rs);
#pragma GCC unroll 6
    for (int k = 0; k < a; ++k) {
      if (!((cols_in >> k) & 1)) {
#pragma GCC unroll 6
        for (int i = 0; i < a; ++i) e[i * a + k] = EMBER_WV_ZERO();
        continue;
      }
      ember_wv d[6];
#pragma GCC unroll 6
      for (int i = 0; i < a; ++i) d[i] = EMBER_WV_LOADIF(row[i] + (long)k * cs + off, ok[i]);
      ember_wino_rows(bt, a, a, d, 1, e + k, a);
    }
    ember_wino_in_rows(e, vt + (long)c * R, pstride, a, bt);
  }
}

/* V of tile t; phased: the image is the phases of x (r = 2), read from x where they lie */
static inline __attribute__((always_inline)) void ember_wino_in_tile(const ember_wino_job* j,
                                                                     long t, int m, int a,
                                                                     int phased,
                                                                     const float (*bt)[6]) {
  const int P = a * a, C = j->C, R = j->R, c4 = phased ? C / 4 : 0;
  const long cs = phased ? 2L * c4 : C, rs = (long)j->W * C;
  const long pstride = j->vps, at = (t / R) * j->vpan + (t % R) * 16;
  if (t >= j->T) { /* a panel's padding rows: zeros */
    for (int c = 0; c < C; c += 16)
      for (int p = 0; p < P; ++p)
        EMBER_WV_STORE(j->v + p * pstride + at + (long)c * R, EMBER_WV_ZERO());
    return;
  }
  const int n = (int)(t / (j->th * j->tw)), rem = (int)(t % (j->th * j->tw));
  const int y0 = (rem / j->tw) * m - j->ph, x0 = (rem % j->tw) * m - j->pw;
  const float* xt = j->x + ((long)n * j->H + y0) * rs + (long)x0 * cs;
  float* vt = j->v + at;
  if (y0 >= 0 && y0 + a <= j->H && x0 >= 0 && x0 + a <= j->W) {
    ember_wino_in_patch(xt, rs, cs, c4, C, R, vt, pstride, a, bt);
    return;
  }
  unsigned rows_in = 0, cols_in = 0;
  for (int i = 0; i < a; ++i) {
    rows_in |= (unsigned)(y0 + i >= 0 && y0 + i < j->H) << i;
    cols_in |= (unsigned)(x0 + i >= 0 && x0 + i < j->W) << i;
  }
  if (rows_in == 0 || cols_in == 0) { /* a patch wholly in the padding (pads of 3 or more) */
    for (int c = 0; c < C; c += 16)
      for (int p = 0; p < P; ++p)
        EMBER_WV_STORE(vt + p * pstride + (long)c * R, EMBER_WV_ZERO());
    return;
  }
  ember_wino_in_edge(xt, rs, cs, c4, C, R, rows_in, cols_in, vt, pstride, a, bt);
}

static int32_t ember_wino_in(int64_t begin, int64_t end, void* cdata) {
  const ember_wino_job* j = (const ember_wino_job*)cdata;
  for (int64_t t = begin; t < end; ++t) {
    if (j->r == 2)
      ember_wino_in_tile(j, (long)t, 4, 5, 1, ember_wino_bt42);
    else if (j->m == 4)
      ember_wino_in_tile(j, (long)t, 4, 6, 0, ember_wino_bt4);
    else
      ember_wino_in_tile(j, (long)t, 2, 4, 0, ember_wino_bt2);
  }
  return 0;
}
"""

#: the output transform (phase 3), after the matrix products.
OUTPUT_TRANSFORM_C = r"""
/* the last block of an output tile's channels when O is not a multiple of 16: its first
   O - o lanes; r the tile's m x m vectors, yo its first output at channel o */
static void ember_wino_out_part(const ember_wino_job* j, const ember_wv* r, int m, int hm,
                                int wm, float* yo, int o, int32_t epi) {
  const int lanes = j->O - o;
  const ember_wv b = EMBER_WV_LOADN(j->bias + o, lanes);
  for (int i = 0; i < hm; ++i)
    for (int k = 0; k < wm; ++k) {
      float* at = yo + ((long)i * j->OW + k) * j->O;
      ember_wv v = r[i * m + k];
      if (epi) v = ember_wino_epi(epi, v, b, j->res + (at - j->y), lanes);
      EMBER_WV_STOREN(at, v, lanes);
    }
}

static inline __attribute__((always_inline)) void ember_wino_out_tile(const ember_wino_job* j,
                                                                      long t, int m, int a,
                                                                      const float (*at)[6],
                                                                      int32_t epi) {
  const int O = j->O, Op = j->Op;
  const int n = (int)(t / (j->th * j->tw)), rem = (int)(t % (j->th * j->tw));
  const int y0 = (rem / j->tw) * m, x0 = (rem % j->tw) * m;
  const int hm = j->OH - y0 < m ? j->OH - y0 : m, wm = j->OW - x0 < m ? j->OW - x0 : m;
  float* yn = j->y + (long)n * j->OH * j->OW * O;
  const long mps = j->mps, ldy = (long)j->OW * O;
  for (int o = 0; o < Op; o += 16) {
    ember_wv d[36], e[24], r[16];
    const float* q = j->mm + (t / j->R) * j->mpan + (t % j->R) * Op + o;
#pragma GCC unroll 36
    for (int p = 0; p < a * a; ++p) {
      d[p] = EMBER_WV_LOAD(q);
      q += mps;
      EMBER_WINO_BUMPED(q);
    }
    for (int k = 0; k < a; ++k) ember_wino_rows(at, m, a, d + k, a, e + k, a); /* A^T M */
    for (int i = 0; i < m; ++i) ember_wino_rows(at, m, a, e + i * a, 1, r + i * m, 1); /* .A */
    float* yr = yn + ((long)y0 * j->OW + x0) * O + o;
    if (O - o < 16) { /* the last block of O not a multiple of 16: its first O - o lanes */
      ember_wino_out_part(j, r, m, hm, wm, yr, o, epi);
      continue;
    }
    const float* rr = j->res + (yr - j->y);
    const ember_wv b = epi ? EMBER_WV_LOAD(j->bias + o) : EMBER_WV_ZERO();
    if (hm == m && wm == m) { /* a whole tile: straight code */
#pragma GCC unroll 4
      for (int i = 0; i < m; ++i) {
        float* yo = yr;
        const float* ro = rr;
#pragma GCC unroll 4
        for (int k = 0; k < m; ++k) {
          EMBER_WV_STORE(yo, epi ? ember_wino_epi(epi, r[i * m + k], b, ro, 16) : r[i * m + k]);
          yo += O, ro += O;
          EMBER_WINO_BUMPED(yo);
          EMBER_WINO_BUMPED(ro);
        }
        yr += ldy, rr += ldy;
        EMBER_WINO_BUMPED(yr);
        EMBER_WINO_BUMPED(rr);
      }
      continue;
    }
    for (int i = 0; i < hm; ++i, yr += ldy, rr += ldy)
      for (int k = 0; k < wm; ++k)
        EMBER_WV_STORE(yr + (long)k * O,
                       epi ? ember_wino_epi(epi, r[i * m + k], b, rr + (long)k * O, 16)
                           : r[i * m + k]);
  }
}

/* the output tiles begin..end with the epilogue steps EPI (a constant in the zoo's cases:
   the steps then compile to straight code) */
#define EMBER_WINO_OUT(EPI)                                                                  \
  do {                                                                                       \
    for (int64_t t = begin; t < end; ++t) {                                                  \
      if (j->r == 2)                                                                         \
        ember_wino_out_tile(j, (long)t, 4, 5, ember_wino_at42, (EPI));                       \
      else if (j->m == 4)                                                                    \
        ember_wino_out_tile(j, (long)t, 4, 6, ember_wino_at4, (EPI));                        \
      else                                                                                   \
        ember_wino_out_tile(j, (long)t, 2, 4, ember_wino_at2, (EPI));                        \
    }                                                                                        \
  } while (0)

static int32_t ember_wino_out(int64_t begin, int64_t end, void* cdata) {
  const ember_wino_job* j = (const ember_wino_job*)cdata;
  switch (j->epi) {
    case 0:
      EMBER_WINO_OUT(0);
      break;
    case EMBER_WINO_BIAS | EMBER_WINO_RELU << 4: /* ResNet-50, CRNN */
      EMBER_WINO_OUT(EMBER_WINO_BIAS | EMBER_WINO_RELU << 4);
      break;
    case EMBER_WINO_BIAS | EMBER_WINO_RES << 4 | EMBER_WINO_RELU << 8: /* resnet8 */
      EMBER_WINO_OUT(EMBER_WINO_BIAS | EMBER_WINO_RES << 4 | EMBER_WINO_RELU << 8);
      break;
    default:
      EMBER_WINO_OUT(j->epi);
  }
  return 0;
}
#undef EMBER_WINO_OUT
"""
