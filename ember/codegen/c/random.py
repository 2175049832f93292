"""C source of the seeded random kernels that ``ember.ops.random`` calls through
``call_extern``: numpy's legacy generator (``RandomState``), bit for bit.

The generator is MT19937 seeded by ``init_genrand(seed)`` (what ``RandomState(seed)`` does
for an integer seed); a double is ``((a >> 5) * 2**26 + (b >> 6)) / 2**53`` from two
32-bit outputs ``a`` then ``b``. On top of it, as numpy's legacy distributions:

* ``ember_rng_uniform``: ``low + (high - low) * u``;
* ``ember_rng_normal``: ``mean + scale * g``, ``g`` from the polar Box-Muller method
  (``x1, x2 = 2u - 1`` until ``0 < r2 = x1*x1 + x2*x2 < 1``, ``f = sqrt(-2 log(r2) /
  r2)``, return ``f * x2`` and keep ``f * x1`` for the next element);
* ``ember_rng_bernoulli``: numpy's binomial inversion with ``n = 1`` (on ``1 - p`` when
  ``p > 0.5``); a ``p`` outside [0, 1] (or NaN) makes the kernel return 1 (an error);
* ``ember_rng_multinomial``: per row, the cdf of ``exp(x - max)`` normalised by its last
  value, searched (``side="right"``) with one uniform double per sample.

Each call seeds its own state (``state``: caller scratch of ``ember.ops.random.STATE_BYTES``), so
every run gives the same numbers. The arithmetic is plain C doubles with the libm ``log``,
``exp`` and ``sqrt`` numpy calls; ember compiles with ``-std=c11``, which never contracts
``a * b + c`` into a fused multiply-add, so no rounding step differs from numpy's.
"""

from __future__ import annotations

import functools
from pathlib import Path

#: the call_extern names this file defines.
RANDOM_KERNEL_NAMES: frozenset[str] = frozenset(
    {"ember_rng_uniform", "ember_rng_normal", "ember_rng_bernoulli", "ember_rng_multinomial"}
)

#: key of the helper block in a FileContext.
HELPER_KEY = "0e_ember_rng"


@functools.cache
def random_kernels_c() -> str:
    """The kernels' C text (ember/runtime/src/random_kernels.h; the runtime library exports
    the same kernels for the llvm kinds, generated C includes them static). Read once, when
    a kernel first calls one, by path: the code generator sits below the runtime."""
    path = Path(__file__).resolve().parents[2] / "runtime" / "src" / "random_kernels.h"
    return path.read_text(encoding="utf-8")
