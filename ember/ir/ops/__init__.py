"""Built-in operator definitions, one file per op family; importing this package registers
them through the public ``register_op``.

An op's family name is the same in every layer: ``ember/frontend/onnx/<family>.py`` (its
ONNX handlers), ``ember/ir/ops/<family>.py`` (its definition), ``ember/ops/<family>.py``
(its compute, schedule, legalizer) and ``tests/.../test_<family>*.py``; the list of
families and their ops is in docs/ir.md. A new family adds its module to FAMILIES and one
import line here.
"""

from ember.ir.ops import (
    attention,  # noqa: F401
    binary,  # noqa: F401
    bitcast,  # noqa: F401
    control,  # noqa: F401
    einsum,  # noqa: F401
    elemwise,  # noqa: F401
    index,  # noqa: F401
    linalg,  # noqa: F401
    ml,  # noqa: F401
    nn_conv,  # noqa: F401
    nn_image,  # noqa: F401
    nn_norm,  # noqa: F401
    nn_pool,  # noqa: F401
    nn_rnn,  # noqa: F401
    nn_sample,  # noqa: F401
    quant,  # noqa: F401
    random,  # noqa: F401
    reduce,  # noqa: F401
    scan,  # noqa: F401
    strings,  # noqa: F401
    transform,  # noqa: F401
)

#: The op families, in the order above; each is a module name in every layer.
FAMILIES: tuple[str, ...] = (
    "attention",
    "binary",
    "bitcast",
    "control",
    "einsum",
    "elemwise",
    "index",
    "linalg",
    "ml",
    "nn_conv",
    "nn_image",
    "nn_norm",
    "nn_pool",
    "nn_rnn",
    "nn_sample",
    "quant",
    "random",
    "reduce",
    "scan",
    "strings",
    "transform",
)
