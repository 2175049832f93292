"""The bitcast compute (ONNX BitCast): each element's bits read as another dtype.

Contract: matches the numpy reference of ember/ir/ops/bitcast.py. Between integer types
(and bool) of one width the bits are the value modulo 2**bits, so a cast is exact; a
float on either side goes through ``tir.reinterpret`` (a memcpy of the scalar in C; the
llvm back end refuses it with a clear error). 16-bit and 8-bit floats are refused: their
C kernels compute in float32 and do not hold the stored bits as a value.
"""

from __future__ import annotations

from ember import tir
from ember.errors import OpNotSupportedError
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type
from ember.ops.registry import register_compute
from ember.support import dtypes
from ember.tir import te


@register_compute("bitcast")
def bitcast(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The input's bits read as attrs['dtype'] (same shape)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    src, dst = x.dtype, ty.dtype
    if src == dst:
        return te.compute(ty.shape, lambda *i: x[i], "bitcast")
    floats = [d for d in (src, dst) if dtypes.is_float(d)]
    if any(dtypes.dtype_info(d).bits < 32 for d in floats):
        raise OpNotSupportedError(
            f"bitcast {src} -> {dst}: 16-bit and 8-bit floats are not supported by the "
            "compiled kernels; bitcast float32/float64 or integer tensors"
        )
    if floats:
        return te.compute(ty.shape, lambda *i: tir.reinterpret(dst, x[i]), "bitcast")
    return te.compute(ty.shape, lambda *i: tir.cast(dst, x[i]), "bitcast")
