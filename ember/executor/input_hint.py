"""What to do when an input's shape or dtype does not match the compiled model's.

Both executors refuse such an input with the same advice, which never proposes an
impossible ``reshape`` (only when the element counts agree) and speaks of the CLI's flags
inside an ``ember`` command::

    mismatch_advice("x", (1, 3, 224, 224), "float32", (3, 224, 224), "float64")
    # "convert it with np.asarray(x, dtype='float32').reshape((1, 3, 224, 224))"
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ember.support.advice import advice


def mismatch_advice(
    name: str, shape: Sequence[int], dtype: str, given_shape: Sequence[int], given_dtype: str
) -> str:
    """Advice for input ``name`` given ``given_shape``/``given_dtype`` instead of its own."""
    shape, given_shape = tuple(shape), tuple(given_shape)
    same_size = math.prod(shape) == math.prod(given_shape)
    if shape == given_shape:
        return advice(
            python=f"convert it with np.asarray(x, dtype='{dtype}')",
            cli=f"save {name!r} as {dtype} in the --inputs file",
        )
    if same_size:
        cast = f"dtype='{dtype}'" if given_dtype != dtype else ""
        return advice(
            python=f"convert it with np.asarray(x{', ' + cast if cast else ''}).reshape({shape})",
            cli=f"save {name!r} reshaped to {shape}{' as ' + dtype if cast else ''} in the "
            "--inputs file",
        )
    dims = ",".join(str(d) for d in given_shape)
    return advice(
        python=f"pass an array of shape {shape}, or compile the model for shape "
        f"{given_shape} (from_onnx(..., shape={{{name!r}: {given_shape}}}))",
        cli=f"pass an array of shape {shape}, or compile the model for this shape "
        f"(ember compile --input-shape {name}:{dims})",
    )
