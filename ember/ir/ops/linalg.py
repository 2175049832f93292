"""Linear algebra ops: linalg.det, the determinant of the trailing (M, M) matrices."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import OpDef, OpPattern, register_op
from ember.ir.ops.common import tensor_arg
from ember.ir.types import TensorType, Type
from ember.support.dtypes import is_float


def _det_type(types: Sequence[Type], attrs: object) -> Type:
    x = tensor_arg(types, 0, "X")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or not is_float(x.dtype):
        raise IRError(f"det needs float square matrices (..., M, M), got {x}")
    return TensorType(x.shape[:-2], x.dtype)


def _det_ref(xs: Sequence[np.ndarray], attrs: object) -> np.ndarray:
    x = xs[0]
    return np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)


register_op(
    OpDef(
        name="linalg.det",
        num_inputs=1,
        infer_type=_det_type,
        reference=_det_ref,
        pattern=OpPattern.OPAQUE,
        doc="Determinant of each trailing (M, M) matrix (ONNX Det).",
    )
)
