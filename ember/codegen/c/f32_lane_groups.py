"""C source of ``ember_f32_conv_tile_lg``: the register tiles of a grouped convolution whose
block of 16 output channels holds several groups of g = 2, 4 or 8 channels
(ember.ops.nn_conv_lane_groups).

A call adds to ``ncols`` positions x 16 accumulators (``acc[j * 16 + lane]``) the products
over the kernel taps ``(i0, i1)`` and a group's channels ``c < g``: lane ``l`` of position
``j`` adds ``x[base_j + (l / g) * g + c] * w[c * ws2 + l]``, where ``base_j = xoff +
(j / tcols) * cr + (j % tcols) * cx + i0 * xs0 + i1 * xs1`` is the block's first input
channel at that tap and the weights of channel ``c`` are at ``w + woff + i0 * ws0 + i1 *
ws1 + c * ws2``. With AVX-512 a position's 16 input channels are loaded once per tap and
channel ``c`` of each group is spread over the group's lanes by an in-lane shuffle
(``vpermilps``; groups of 8 first copy their 128-bit halves with ``vshuff32x4``): per
position and tap, g shuffles and g fused multiply-adds, the g weight vectors held in
registers. Measured in a C harness (one thread, CPU time, Zen 5, L1-resident): groups of 4
in tiles of 12 positions at 84% of the FMA limit, groups of 8 in tiles of 8 at 66%.
Every accumulator receives the fused multiply-adds in the loop IR's order (taps, then the
group's channels), so the results are bitwise equal to it; without AVX-512 plain C loops
with ``fmaf`` do the same arithmetic.
"""

from __future__ import annotations

#: the call_extern name (ember.ops.nn_conv_lane_groups.LANE_GROUP_KERNEL).
LANE_GROUP_KERNEL_NAME = "ember_f32_conv_tile_lg"

#: the call_extern names this file defines.
LANE_GROUP_KERNEL_NAMES: frozenset[str] = frozenset({LANE_GROUP_KERNEL_NAME})

#: key of the helper block in a FileContext.
LANE_GROUP_HELPER_KEY = "0f_ember_f32_lane_groups"

#: the most positions of a register tile, per group width: 12 zmm accumulators for groups
#: of 2 and 4; 8 for groups of 8, whose 8 weight vectors take registers too (tiles of 12
#: spilled: 59% of the FMA limit against 66%).
MAX_TILE = {2: 12, 4: 12, 8: 8}

#: the shuffle giving lanes ``(l / g) * g + c`` of zmm ``v``, by group width.
_PICKS = {
    2: ("_mm512_permute_ps(v, 0xA0)", "_mm512_permute_ps(v, 0xF5)"),
    4: tuple(f"_mm512_permute_ps(v, 0x{0x55 * c:02X})" for c in range(4)),
    8: tuple(
        f"_mm512_permute_ps({'lo' if c < 4 else 'hi'}, 0x{0x55 * (c % 4):02X})" for c in range(8)
    ),
}

_TILE = r"""static __attribute__((noinline, unused)) void ember_lg_tile_@G@_@N@(
    float* acc, const float* x, const float* w, const int64_t* off, int64_t e0, int64_t xs0,
    int64_t ws0, int64_t e1, int64_t xs1, int64_t ws1, int64_t ws2) {
  __m512 a[@N@];
  _Pragma("GCC unroll 16") for (int j = 0; j < @N@; ++j) a[j] = _mm512_loadu_ps(acc + 16 * j);
  for (int64_t i0 = 0; i0 < e0; ++i0) {
    for (int64_t i1 = 0; i1 < e1; ++i1) {
      const float* wk = w + i0 * ws0 + i1 * ws1;
      const int64_t xk = i0 * xs0 + i1 * xs1;
@WEIGHTS@
      _Pragma("GCC unroll 16") for (int j = 0; j < @N@; ++j) {
        const __m512 v = _mm512_loadu_ps(x + off[j] + xk);
@FMAS@
      }
    }
  }
  _Pragma("GCC unroll 16") for (int j = 0; j < @N@; ++j) _mm512_storeu_ps(acc + 16 * j, a[j]);
}
"""


def _tile(g: int, n: int) -> str:
    """The register tile of ``n`` positions for groups of ``g`` channels."""
    weights = "".join(
        f"      const __m512 w{c} = _mm512_loadu_ps(wk + {c} * ws2);\n" for c in range(g)
    )
    fmas = ""
    if g == 8:  # each group's first four channels in both halves of its 256 bits, then the last
        fmas += "        const __m512 lo = _mm512_shuffle_f32x4(v, v, 0xA0);\n"
        fmas += "        const __m512 hi = _mm512_shuffle_f32x4(v, v, 0xF5);\n"
    for c, pick in enumerate(_PICKS[g]):
        fmas += f"        a[j] = _mm512_fmadd_ps({pick}, w{c}, a[j]);\n"
    text = _TILE.replace("@WEIGHTS@\n", weights).replace("@FMAS@\n", fmas)
    return text.replace("@G@", str(g)).replace("@N@", str(n))


def _dispatch(g: int) -> str:
    """``ember_lg_tiles_<g>``: the register tiles of a call, as even as possible."""
    most = MAX_TILE[g]
    cases = "".join(
        f"      case {n}: ember_lg_tile_{g}_{n}(acc + 16 * j0, x, w, off, EMBER_LG_LOOPS); break;\n"
        for n in range(1, most)
    )
    cases += f"      default: ember_lg_tile_{g}_{most}(acc + 16 * j0, x, w, off, "
    cases += "EMBER_LG_LOOPS); break;\n"
    return f"""static void ember_lg_tiles_{g}(float* acc, const float* x, const float* w,
                              int64_t xoff, int32_t ncols, int32_t tcols, int32_t cx, int32_t cr,
                              int64_t e0, int64_t xs0, int64_t ws0, int64_t e1, int64_t xs1,
                              int64_t ws1, int64_t ws2) {{
  const int32_t ntiles = (ncols + {most} - 1) / {most};
  const int32_t small = ncols / ntiles, big = ncols % ntiles;
  int32_t j0 = 0;
  for (int32_t t = 0; t < ntiles; ++t) {{
    const int32_t nc = small + (t < big);
    int64_t off[{most}];
    for (int32_t j = 0; j < nc; ++j) {{
      const int32_t p = j0 + j;
      off[j] = xoff + (int64_t)(p / tcols) * cr + (int64_t)(p % tcols) * cx;
    }}
    switch (nc) {{
{cases}    }}
    j0 += nc;
  }}
}}
"""


def _avx512_text() -> str:
    tiles = "".join(_tile(g, n) for g in MAX_TILE for n in range(1, MAX_TILE[g] + 1))
    return tiles + "".join(_dispatch(g) for g in MAX_TILE)


#: the C text of ember_f32_conv_tile_lg (and its static helpers).
LANE_GROUP_KERNEL_C = (
    r"""#ifndef EMBER_F32_API /* exported by the runtime: src/f32_tiles.h */
#define EMBER_F32_API static __attribute__((unused))
#endif
#if defined(__AVX512F__)
#include <immintrin.h>
#define EMBER_LG_LOOPS e0, xs0, ws0, e1, xs1, ws1, ws2
"""
    + _avx512_text()
    + r"""#endif

/* acc[j][0:16] += over the taps (i0, i1) and c < g: x at position j, channel (lane / g) * g
   + c of the block, times w[c][lane] (see ember/codegen/c/f32_lane_groups.py); returns 0 */
EMBER_F32_API int32_t ember_f32_conv_tile_lg(
    float* acc, const float* x, const float* w, int64_t xoff, int64_t woff, int32_t ncols,
    int32_t tcols, int32_t cx, int32_t cr, int32_t e0, int32_t xs0, int32_t ws0, int32_t e1,
    int32_t xs1, int32_t ws1, int32_t ws2, int32_t g) {
  if (ncols < 1) return 0;
  w += woff;
#if defined(__AVX512F__)
  switch (g) {
    case 2:
      ember_lg_tiles_2(acc, x, w, xoff, ncols, tcols, cx, cr, EMBER_LG_LOOPS);
      return 0;
    case 4:
      ember_lg_tiles_4(acc, x, w, xoff, ncols, tcols, cx, cr, EMBER_LG_LOOPS);
      return 0;
    case 8:
      ember_lg_tiles_8(acc, x, w, xoff, ncols, tcols, cx, cr, EMBER_LG_LOOPS);
      return 0;
    default:
      break;
  }
#endif
  for (int64_t i0 = 0; i0 < e0; ++i0)
    for (int64_t i1 = 0; i1 < e1; ++i1)
      for (int64_t c = 0; c < g; ++c) {
        const float* wk = w + i0 * ws0 + i1 * ws1 + c * ws2;
        const int64_t xk = xoff + i0 * xs0 + i1 * xs1 + c;
        for (int32_t j = 0; j < ncols; ++j) {
          const float* xj = x + xk + (int64_t)(j / tcols) * cr + (int64_t)(j % tcols) * cx;
          for (int l = 0; l < 16; ++l)
            acc[16 * j + l] = fmaf(xj[l / g * g], wk[l], acc[16 * j + l]);
        }
      }
  return 0;
}
"""
)
