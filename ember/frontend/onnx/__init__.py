"""ONNX frontend: ``from_onnx(model) -> (IRModule, params)``.

Importing this package imports every handler module (one op family per file, named like
the family in ember/ir/ops; constants.py holds the handlers that make no op of their own),
which registers the handlers through the public ``onnx_op`` decorator.
"""

from ember.frontend.onnx import (
    attention,  # noqa: F401  (registers handlers)
    binary,  # noqa: F401  (registers handlers)
    bitcast,  # noqa: F401  (registers handlers)
    constants,  # noqa: F401  (registers handlers)
    control,  # noqa: F401  (registers handlers)
    dynamic,  # noqa: F401  (registers handlers)
    einsum,  # noqa: F401  (registers handlers)
    elemwise,  # noqa: F401  (registers handlers)
    index,  # noqa: F401  (registers handlers)
    linalg,  # noqa: F401  (registers handlers)
    loss,  # noqa: F401  (registers handlers)
    ml,  # noqa: F401  (registers handlers)
    nn_conv,  # noqa: F401  (registers handlers)
    nn_image,  # noqa: F401  (registers handlers)
    nn_norm,  # noqa: F401  (registers handlers)
    nn_pool,  # noqa: F401  (registers handlers)
    nn_rnn,  # noqa: F401  (registers handlers)
    nn_sample,  # noqa: F401  (registers handlers)
    optimizer,  # noqa: F401  (registers handlers)
    quant,  # noqa: F401  (registers handlers)
    quant_contrib,  # noqa: F401  (registers handlers)
    random,  # noqa: F401  (registers handlers)
    reduce,  # noqa: F401  (registers handlers)
    scan,  # noqa: F401  (registers handlers)
    sequence,  # noqa: F401  (registers handlers)
    signal,  # noqa: F401  (registers handlers)
    strings,  # noqa: F401  (registers handlers)
    transform,  # noqa: F401  (registers handlers)
)
from ember.frontend.onnx.context import REQUIRED, ConvertContext, NodeView
from ember.frontend.onnx.importer import from_onnx
from ember.frontend.onnx.registry import find_handler, onnx_op, supported_ops

__all__ = [
    "REQUIRED",
    "ConvertContext",
    "NodeView",
    "find_handler",
    "from_onnx",
    "onnx_op",
    "supported_ops",
]
