"""C source of the int8 tiles for the tails of a layer's work (appended to the tile block of
``int8_kernels.py``, whose macros they use; AVX2 only, the portable loops compute the
whole tile):

* ``ember_q8_tile_pairs8``: the conv's pair-step tile on the first 8 positions of a panel,
  for a last panel of at most 8 positions (49 positions, the 7x7 maps, are 3 panels and 1;
  196, the 14x14 maps, 12 and 4): half the products of the 16-position tile;
* ``ember_q8_tile1_rows_u8``: the dense tile for one row (a classifier at batch 1 computed
  4 rows for 1).
"""

from __future__ import annotations

INT8_TAIL_TILES_C = r"""#if defined(__AVX2__)
/* the conv tile on the first 8 positions of a panel (a tail of at most 8 positions: the 7x7
   and 14x14 maps' last panels), pair steps as ember_q8_tile_pairs and the odd last step:
   acc[2i] gets row i, acc[2i + 1] zero (the columns 8-15 are dropped) */
static __attribute__((noinline, unused)) void ember_q8_tile_pairs8(const uint8_t* rows, int ldr,
                                                                   const uint8_t* panel, int k4,
                                                                   const int32_t* b4,
                                                                   __m256i acc[8]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c0 = _mm256_set1_epi32(b4[0]), c1 = _mm256_set1_epi32(b4[1]);
  __m256i c2 = _mm256_set1_epi32(b4[2]), c3 = _mm256_set1_epi32(b4[3]);
  const uint8_t *r0 = rows, *r1 = rows + ldr, *r2 = rows + 2 * ldr, *r3 = rows + 3 * ldr;
  int q = 0;
  for (; q + 2 <= k4; q += 2) {
    const __m256i p0 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q));
    const __m256i p2 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 64));
    int32_t t;
    __m256i b, b2;
#define EMBER_Q8_PAIR8(C, R) EMBER_Q8_BCAST2(R) EMBER_Q8_PAIR_ACC(C, p0, p2)
    EMBER_Q8_PAIR8(c0, r0)
    EMBER_Q8_PAIR8(c1, r1)
    EMBER_Q8_PAIR8(c2, r2)
    EMBER_Q8_PAIR8(c3, r3)
#undef EMBER_Q8_PAIR8
  }
  if (q < k4) { /* an odd last step */
    const __m256i p0 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q));
    int32_t t;
#define EMBER_Q8_STEP8(C, R)                                                             \
  memcpy(&t, R + 4 * q, 4);                                                              \
  C = _mm256_add_epi32(C, _mm256_madd_epi16(_mm256_maddubs_epi16(p0, _mm256_set1_epi32(t)), \
                                            ones));
    EMBER_Q8_STEP8(c0, r0)
    EMBER_Q8_STEP8(c1, r1)
    EMBER_Q8_STEP8(c2, r2)
    EMBER_Q8_STEP8(c3, r3)
#undef EMBER_Q8_STEP8
  }
  const __m256i z = _mm256_setzero_si256();
  acc[0] = c0; acc[1] = z; acc[2] = c1; acc[3] = z;
  acc[4] = c2; acc[5] = z; acc[6] = c3; acc[7] = z;
}

/* one unsigned row x 16 panel columns (the dense's last row block of one row: a classifier
   at batch 1 would compute 4 rows for 1) */
static __attribute__((noinline, unused)) void ember_q8_tile1_rows_u8(const uint8_t* row,
                                                                     const uint8_t* panel, int k4,
                                                                     __m256i acc[2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c0 = _mm256_setzero_si256(), c1 = c0;
  for (int q = 0; q < k4; ++q) {
    int32_t t;
    memcpy(&t, row + 4 * q, 4);
    const __m256i b = _mm256_set1_epi32(t);
    const __m256i p0 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q));
    const __m256i p1 = _mm256_loadu_si256((const __m256i*)(panel + 64 * q + 32));
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_maddubs_epi16(b, p0), ones));
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_maddubs_epi16(b, p1), ones));
  }
  acc[0] = c0;
  acc[1] = c1;
}
#endif
"""
