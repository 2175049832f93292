"""C source of the position-lane tile kernel that ``ember.ops.nn_conv_lanes`` calls.

``ember_f32_lanes_tile`` takes ``ember_f32_conv_tile``'s arguments (ember.codegen.c.f32_kernels)
plus a flag ``zero``: the tile's accumulators start from zero instead of being read. In a
position-lane tile the kernel's "positions" are 16 output channels (their weights are
broadcast) and its 16 lanes are output positions of a row (the input, loaded as two
vectors). ``ember_f32_conv_tile`` splits wide tiles in register tiles and runs all of them
per kernel tap and chunk of input channels (to keep a big weight block in L1), which for
these tiles means 27 calls of 3-16 steps each with their accumulators loaded and stored
around every call (a 3x3 3->16 stem: 3 steps per call). Here each register tile of up to 6
channels (ember_f32_tile_n) runs the whole reduction in registers (its input, 16 floats
per step, stays in L1); with ``zero`` set the kernel zeroes the accumulators itself (the
loop IR's zeroing nest is then dropped: nn_conv_lanes.lanes_kernel_rewrite). Every
accumulator receives the same fused multiply-adds in the same order, so results are
bitwise equal to the loop IR's. Without AVX2 the function calls ember_f32_conv_tile.
"""

from __future__ import annotations

#: the call_extern names this file defines.
LANES_KERNEL_NAMES: frozenset[str] = frozenset({"ember_f32_lanes_tile"})

#: key of the helper block in a FileContext (after ember_f32_conv_tile's, which it uses).
LANES_HELPER_KEY = "0f_ember_f32_lanes"

LANES_KERNEL_C = r"""#ifndef EMBER_F32_API /* exported by the runtime: src/f32_tiles.h */
#define EMBER_F32_API static __attribute__((unused))
#endif
/* ember_f32_conv_tile's tile, each register tile (ember_f32_tile_n) over the
   whole reduction, zeroed first when `zero` is set (ember/codegen/c/f32_lanes.py) */
EMBER_F32_API int32_t ember_f32_lanes_tile(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t tcols, int32_t cx, int32_t cr, int32_t zero, int32_t e0, int32_t xs0,
    int32_t ws0, int32_t e1, int32_t xs1, int32_t ws1, int32_t e2, int32_t xs2, int32_t ws2) {
  if (ncols < 1) return 0;
  if (zero) memset(acc, 0, sizeof(float) * 16 * (size_t)ncols);
#if defined(__AVX2__) && defined(__FMA__)
  const int32_t ntiles = (ncols + 5) / 6, small = ncols / ntiles, big = ncols % ntiles;
  int32_t j0 = 0;
  for (int32_t t = 0; t < ntiles; ++t) {
    const int32_t nc = small + (t < big);
    int64_t off[6];
    for (int32_t j = 0; j < nc; ++j)
      off[j] = xoff + (int64_t)((j0 + j) / tcols) * cr + (int64_t)((j0 + j) % tcols) * cx;
    ember_f32_tile_n(nc, acc + 16 * (int64_t)j0, x, w + woff, off, e0, xs0, ws0, e1, xs1, ws1,
                     e2, xs2, ws2);
    j0 += nc;
  }
  return 0;
#else
  return ember_f32_conv_tile(acc, x, w, xoff, woff, ncols, tcols, cx, cr, e0, xs0, ws0, e1,
                             xs1, ws1, e2, xs2, ws2);
#endif
}
"""
