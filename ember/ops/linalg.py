"""Compute of linalg.det: Gaussian elimination with partial pivoting, written as loop IR
(``te.extern``: row swaps and the running product are sequential). Each matrix is copied
into a float64 scratch matrix; the determinant is the signed product of the pivots."""

from __future__ import annotations

from ember import tir
from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape, unflatten
from ember.ops.nn_common import product
from ember.ops.registry import register_compute
from ember.tir import te

F64 = "float64"
#: scratch matrices up to this many elements live on the stack, larger ones on the heap.
STACK_ELEMENTS = 4096


@register_compute("linalg.det")
def det(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Determinants of the trailing square matrices (see the module docstring)."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    shape = static_shape(x)
    m = shape[-1]
    batch = product(shape[:-2])

    def build(ins: list[tir.Buffer], outs: list[tir.Buffer]) -> tir.Stmt:
        return _det_body(ins[0], outs[0], shape, batch, m)

    result = te.extern(ty.shape, [x], build, name="det", dtype=x.dtype)
    assert isinstance(result, te.Tensor)
    return result


def _det_body(
    x: tir.Buffer, out: tir.Buffer, shape: tuple[int, ...], batch: int, m: int
) -> tir.Stmt:
    lead = shape[:-2]
    ib = tir.IRBuilder()
    y = ib.buffer(out)
    zero, one = tir.const(0.0, F64), tir.const(1.0, F64)
    kind = tir.StorageKind.STACK if m * m <= STACK_ELEMENTS else tir.StorageKind.HEAP
    with ib.for_range(0, batch, "b", kind=tir.ForKind.PARALLEL) as b:
        idx = unflatten(b, lead)
        a = ib.allocate(F64, (m * m,), "a", storage=kind)
        state = ib.allocate(F64, (2,), "state")  # running determinant, best pivot magnitude
        piv = ib.allocate("int32", (1,), "piv")
        with ib.for_range(0, m, "i") as i, ib.for_range(0, m, "j") as j:
            a[i * m + j] = x[(*idx, i, j)].astype(F64)
        state[0] = one
        with ib.for_range(0, m, "k") as k:
            piv[0] = k
            state[1] = tir.abs(a[k * m + k])
            with ib.for_range(k + 1, m, "i") as i:
                bigger = tir.abs(a[i * m + k]) > state[1]
                with ib.if_scope(bigger):
                    state[1] = tir.abs(a[i * m + k])
                    piv[0] = i
            p = piv[0]
            with ib.if_scope(tir.ne(p, k)):
                with ib.for_range(0, m, "j") as j:
                    t = ib.let("t", a[k * m + j])
                    a[k * m + j] = a[p * m + j]
                    a[p * m + j] = t
                state[0] = zero - state[0]
            pivot = a[k * m + k]
            state[0] = state[0] * pivot
            with ib.if_scope(tir.ne(pivot, zero)), ib.for_range(k + 1, m, "i") as i:
                f = ib.let("f", a[i * m + k] / a[k * m + k])
                with ib.for_range(k + 1, m, "j") as j:
                    a[i * m + j] = a[i * m + j] - f * a[k * m + j]
        y[tuple(idx)] = state[0].astype(out.dtype)
    return ib.get()
