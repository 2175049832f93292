"""openblas relay_to_tir: a matmul/dense region (plus an optional bias add) -> one PrimFunc
that calls ``scipy_cblas_sgemm``/``_batch_strided`` through a small C shim.

The shim (a native artifact) finds the BLAS symbols at the first call with
``dlsym(RTLD_DEFAULT, ...)``; the ``openblas`` loader puts the library into the process
(``RTLD_GLOBAL``) when the model is loaded, so the host library links without it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.codegen.c.abi import RUNTIME_HEADER
from ember.errors import CompileError
from ember.ir.expr import Call, Function, Var, post_order
from ember.ir.op import OpDef
from ember.ir.types import TensorType
from ember.runtime.artifact import NATIVE_LOADER, Artifact
from ember.target import Target
from ember.tir import (
    AssertStmt,
    Buffer,
    PrimFunc,
    Stmt,
    call_extern,
    const,
    decl_buffer,
    eq,
    for_range,
    seq,
    store,
)
from ember.tir import Var as TVar
from ember.tir.simplify import const_int

SHIM_SYMBOL = "ember_openblas_sgemm"
LOADER = "openblas"


def matmul_ok(calls: Sequence[Call]) -> bool:
    """The pattern check: float32 matmul/dense of >= 2-D operands that one strided batched
    sgemm covers (equal batch dims, or a 2-D right operand), and a bias of length N."""
    mm = calls[0]
    a, b, out = mm.args[0].type, mm.args[1].type, mm.type
    if not all(isinstance(t, TensorType) and t.dtype == "float32" for t in (a, b, out)):
        return False
    assert isinstance(a, TensorType) and isinstance(b, TensorType) and isinstance(out, TensorType)
    dense = isinstance(mm.op, OpDef) and mm.op.name == "nn.dense"
    if a.ndim < 2 or b.ndim < 2 or (dense and (a.ndim, b.ndim) != (2, 2)):
        return False
    if b.ndim > 2 and tuple(a.shape[:-2]) != tuple(b.shape[:-2]):
        return False
    if len(calls) == 2:
        add = calls[1]
        bias = add.args[1] if add.args[0] is mm else add.args[0]
        bt = bias.type
        return (
            isinstance(bt, TensorType)
            and tuple(bt.shape) == (out.shape[-1],)
            and bt.dtype == "float32"
            and add.type == out
            and out.shape[-1] > 1
        )
    return True


def lower(group: Function, name: str, target: Target) -> tuple[PrimFunc, list[Artifact]]:
    """relay_to_tir: the region as loop IR calling the shim, plus the shim and loader marker."""
    calls = [n for n in post_order(group.body) if isinstance(n, Call)]
    mm = calls[0]
    assert isinstance(mm.op, OpDef)
    bufs = {}
    for i, p in enumerate(group.params):
        if not isinstance(p.type, TensorType):
            raise CompileError(f"openblas region '{name}': parameter {p.name} is not a tensor")
        bufs[id(p)] = decl_buffer(p.type.shape, p.type.dtype, f"in{i}")
    out_ty = group.ret_type
    if not isinstance(out_ty, TensorType):
        raise CompileError(f"openblas region '{name}' must produce one tensor, got {out_ty}")
    out = decl_buffer(out_ty.shape, out_ty.dtype, "out")
    a, b = (_buf(bufs, x, name) for x in mm.args[:2])
    stmts = []
    beta = 0.0
    if len(calls) == 2:
        bias = calls[1].args[1] if calls[1].args[0] is mm else calls[1].args[0]
        stmts.append(_fill_bias(out, _buf(bufs, bias, name)))
        beta = 1.0
    stmts.append(_gemm(a, b, out, mm.op.name == "nn.dense", beta))
    params = tuple(bufs[id(p)] for p in group.params) + (out,)
    return PrimFunc(name, params, seq(*stmts)), support_artifacts(int(target["num-threads"]))


def _buf(bufs: dict[int, Buffer], expr: object, name: str) -> Buffer:
    if not isinstance(expr, Var) or id(expr) not in bufs:
        raise CompileError(f"openblas region '{name}': operand {expr!r} is not a parameter")
    return bufs[id(expr)]


def _fill_bias(out: Buffer, bias: Buffer) -> Stmt:
    """out[..., j] = bias[j]: the gemm then adds A @ B onto it (beta = 1)."""
    idx = [TVar(f"i{k}") for k in range(len(out.shape))]
    body: Stmt = store(out, bias[idx[-1]], *idx)
    for k in reversed(range(len(idx))):
        body = for_range(idx[k], out.shape[k], body)
    return body


def _dims(buf: Buffer) -> list[int]:
    return [int(const_int(d) or 0) for d in buf.shape]


def _gemm(a: Buffer, b: Buffer, out: Buffer, trans_b: bool, beta: float) -> AssertStmt:
    m, k = _dims(a)[-2:]
    n = _dims(out)[-1]
    batch = 1
    for d in _dims(out)[:-2]:
        batch *= d
    stride_b = 0 if len(b.shape) == 2 else k * n
    if stride_b == 0 and batch > 1:  # a 2-D weight: fold the batch into the rows
        m, batch = m * batch, 1
    args = [
        const(1 if trans_b else 0, "int32"),
        const(m, "int32"), const(n, "int32"), const(k, "int32"),
        const(1.0, "float32"), a.data, const(m * k, "int32"),
        b.data, const(stride_b, "int32"),
        const(beta, "float32"), out.data, const(m * n, "int32"), const(batch, "int32"),
    ]  # fmt: skip
    return AssertStmt(eq(call_extern("int32", SHIM_SYMBOL, *args), 0), "", seq())


def support_artifacts(threads: int = 1) -> list[Artifact]:
    """The shim (native C) and the marker whose loader brings the library into the process
    (and sets OpenBLAS's thread count: ``threads``)."""
    shim = Artifact("openblas", NATIVE_LOADER, "openblas_shim.c", SHIM_C.encode())
    text = f"scipy_openblas32 threads={threads}\n".encode()
    marker = Artifact("openblas", LOADER, "openblas.requires", text)
    return [shim, marker]


SHIM_C = f"""#include <dlfcn.h>
#include <stdint.h>
#include <{RUNTIME_HEADER}>
/* C = A @ op(B) for `batch` row-major float32 matrices through OpenBLAS (scipy-openblas32) */
typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float*, int,
                        const float*, int, float, float*, int);
typedef void (*sgemm_strided_t)(int, int, int, int, int, int, float, const float*, int, int,
                                const float*, int, int, float, float*, int, int, int);
static sgemm_t g_sgemm;
static sgemm_strided_t g_strided;
int32_t {SHIM_SYMBOL}(int32_t trans_b, int32_t m, int32_t n, int32_t k, float alpha,
                          float* a, int32_t stride_a, float* b, int32_t stride_b, float beta,
                          float* c, int32_t stride_c, int32_t batch) {{
  if (g_sgemm == NULL || g_strided == NULL) {{
    g_sgemm = (sgemm_t)dlsym(RTLD_DEFAULT, "scipy_cblas_sgemm");
    g_strided = (sgemm_strided_t)dlsym(RTLD_DEFAULT, "scipy_cblas_sgemm_batch_strided");
    if (g_sgemm == NULL || g_strided == NULL) {{
      EmberAPISetLastError("openblas: scipy_cblas_sgemm is not in the process; load the model "
                           "with ember.load_module after importing ember.backends.openblas "
                           "(pip install scipy-openblas32)");
      return -1;
    }}
  }}
  int tb = trans_b ? 112 : 111, ldb = trans_b ? k : n;
  if (batch == 1) {{
    g_sgemm(101, 111, tb, m, n, k, alpha, a, k, b, ldb, beta, c, n);
  }} else {{
    g_strided(101, 111, tb, m, n, k, alpha, a, k, stride_a, b, ldb, stride_b, beta, c, n,
              stride_c, batch);
  }}
  return 0;
}}
"""
