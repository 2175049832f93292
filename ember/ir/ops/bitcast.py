"""Bit reinterpretation: ``bitcast`` (pattern ELEMWISE, ONNX BitCast) reads each element's
bits as another dtype of the same width (bool counts as 8 bits); the shape is unchanged
and no value is converted (float32 1.0 becomes int32 1065353216). Bytes are little
endian, as ONNX specifies.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import ALL_DTYPES, check_dtype, np_dtype
from ember.ir.types import TensorType, Type
from ember.support import dtypes


def storage_bits(dtype: str) -> int:
    """Bits one element of ``dtype`` occupies in memory (bool: 8)."""
    return dtypes.dtype_info(dtype).itemsize * 8


def _bitcast_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], ALL_DTYPES, "input of 'bitcast'")
    to = attrs["dtype"]
    if storage_bits(x.dtype) != storage_bits(to):
        raise IRError(
            f"bitcast {x.dtype} -> {to}: the dtypes differ in width ({storage_bits(x.dtype)} "
            f"and {storage_bits(to)} bits); BitCast needs dtypes of one width"
        )
    return TensorType(x.shape, to)


def _bitcast_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = np.ascontiguousarray(xs[0])
    return x.view(np_dtype(attrs["dtype"])).reshape(x.shape)


register_op(
    OpDef(
        "bitcast",
        1,
        _bitcast_type,
        _bitcast_ref,
        OpPattern.ELEMWISE,
        {"dtype": Attr("dtype", doc="target dtype of the same width, canonical name")},
        doc="each element's bits read as another dtype of the same width (ONNX BitCast)",
    )
)
