"""C source of the int8 convolution's real-position packing (AVX-512 VNNI with VBMI:
``EMBER_Q8_REAL_POSITIONS``): the panels of a padded convolution hold only real output
positions, each patch row's 16 bytes picked out of 32 bytes of the padded grid by one
``vpermt2b`` (``ember_q8_pack_real``), so the tiles compute no grid columns past the
output's width (ResNet-50's 7x7 layers: 49 positions instead of 64).

``int8_conv.py``'s driver calls it (this text comes right before that one in
``int8_kernels.py``'s block).
"""

from __future__ import annotations

INT8_REAL_POSITIONS_C = r"""
#if defined(EMBER_Q8_VNNI512) && defined(__AVX512VBMI__)
#define EMBER_Q8_REAL_POSITIONS 1
/* the grid position (mode 2's padded image, rows of Wq) of output position p */
static inline long ember_q8_grid(int p, int OW, int Wq) { return (long)(p / OW) * Wq + p % OW; }

/* the widest grid span (last minus first) of a panel's 16 consecutive output positions */
static inline int ember_q8_real_span(int P, int OW, int Wq) {
  int span = 0;
  for (int p = 0; p < P; p += 16) {
    const int last = p + 15 < P ? p + 15 : P - 1;
    const int s = (int)(ember_q8_grid(last, OW, Wq) - ember_q8_grid(p, OW, Wq));
    span = s > span ? s : span;
  }
  return span;
}

/* panels [np][k4][16][4] of output positions p0, p0 + 1, ... only (no grid columns past OW;
   positions from P on repeat P - 1): row k's 16 bytes picked by one vpermt2b from the 32
   at base + offs[k] + the panel's first grid position (the span is below 32); from k = K on
   row K - 1 (the weights there are zero, so any value does), top bit flipped by `flip` */
static void ember_q8_pack_real(const uint8_t* base, const long* offs, int K, int k4, int p0,
                               int np, int P, int OW, int Wq, uint8_t flip, uint8_t* out) {
  const __m512i f = _mm512_set1_epi8((char)flip);
  for (int b0 = 0; b0 < np; b0 += 32) {
    const int nb = np - b0 < 32 ? np - b0 : 32;
    long at[32];
    __m512i idx[32];
    for (int pp = 0; pp < nb; ++pp) {
      const int first = p0 + 16 * (b0 + pp);
      uint8_t ix[64];
      at[pp] = ember_q8_grid(first, OW, Wq);
      /* grid offsets from the panel's first position: + 1 a column, + Wq - OW + 1 at a row's
         end; positions from P on repeat the last */
      for (int jj = 0, ow = first % OW, rel = 0; jj < 16; ++jj) {
        for (int t = 0; t < 4; ++t) ix[4 * jj + t] = (uint8_t)((t >> 1) * 64 + (t & 1) * 32 + rel);
        if (first + jj + 1 < P) {
          rel += ++ow == OW ? Wq - OW + 1 : 1;
          ow = ow == OW ? 0 : ow;
        }
      }
      idx[pp] = _mm512_loadu_si512((const void*)ix);
    }
    for (int q = 0; q < k4; ++q) {
      const uint8_t* r[4];
      for (int t = 0; t < 4; ++t) r[t] = base + offs[4 * q + t < K ? 4 * q + t : K - 1];
      uint8_t* o = out + ((long)b0 * k4 + q) * 64;
      for (int pp = 0; pp < nb; ++pp, o += (long)k4 * 64) {
        const __m512i a = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(r[0] + at[pp]))),
            _mm256_loadu_si256((const __m256i*)(r[1] + at[pp])), 1);
        const __m512i b = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(r[2] + at[pp]))),
            _mm256_loadu_si256((const __m256i*)(r[3] + at[pp])), 1);
        const __m512i x = _mm512_permutex2var_epi8(a, idx[pp], b);
        _mm512_storeu_si512((void*)o, _mm512_xor_si512(x, f));
      }
    }
  }
}
#endif
"""
