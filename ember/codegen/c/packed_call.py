"""``call_cpacked`` and ``call_packed`` in C: calls of packed functions from generated code.

``call_cpacked`` calls another kernel's packed entry, linked into the same library.
``call_packed`` finds the function at run time through the runtime, once per call site:
``EmberBackendGetFuncFromEnv(__ember_module_ctx, name, &handle)``, where the library's
weak symbol ``__ember_module_ctx`` holds the lookup function its loader installed (the
module and its imports, e.g. a ``relay_to_runtime`` artifact), then ``EmberFuncCall``.

Each distinct call shape gets one static helper in the file's prelude that wraps its
pointer arguments into DLTensors (static shapes, compact, on the CPU) and opaque handles,
and calls the packed symbol directly: no lookup, no allocation. The call site is then a
plain call of the helper, so it works anywhere an expression does::

    static int32_t ember_cpacked_0(float* a0, float* a1) {
      static int64_t s0[4] = {1, 8, 12, 12};
      DLTensor t0 = {a0, {kDLCPU, 0}, 4, {2, 32, 1}, s0, NULL, 0};
      ...
      return ember_net_fused_conv_relu(v, c, 2, &rv, &rc, NULL);
    }
"""

from __future__ import annotations

from ember.codegen.c.abi import c_type
from ember.codegen.c.file_context import FileContext
from ember.errors import CompileError
from ember.support.dtypes import dtype_info
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import Call, PrimExpr, Var
from ember.tir.simplify import const_int

PACKED_SIGNATURE = "(EmberValue*, int32_t*, int32_t, EmberValue*, int32_t*, void*)"
#: the library's module context: set by the loader to its lookup function (see runtime.c).
MODULE_CTX = "__ember_module_ctx"


class PackedCallMixin:
    """C text of ``call_cpacked`` and ``call_packed`` for ExprCodegen."""

    ctx: FileContext
    where: str

    def expr(self, e: PrimExpr, prec: int = 0) -> str:  # pragma: no cover - in CodeGenC
        """C text of an expression (provided by ExprCodegen)."""
        raise NotImplementedError

    def _buffers(self) -> list[Buffer]:  # pragma: no cover - in ExprCodegen
        raise NotImplementedError

    def call_cpacked(self, e: Call) -> str:
        """The call of the helper that packs ``e``'s arguments for ``e.op``'s packed entry."""
        params, body, n = self._pack_arguments(e, "call_cpacked")
        body.append(f"  return {e.op}(v, c, {n}, &rv, &rc, NULL);")
        extern = f"extern int32_t {e.op}{PACKED_SIGNATURE};"
        return self._helper_call(e, "cpacked", params, body, {e.op: extern})

    def call_packed(self, e: Call) -> str:
        """The call of the helper that looks ``e.op`` up once through the runtime
        (``EmberBackendGetFuncFromEnv`` with this library's ``__ember_module_ctx``, which
        the loader sets) and calls it with ``e``'s arguments packed."""
        params, body, n = self._pack_arguments(e, "call_packed")
        body += [
            "  static EmberFunctionHandle f = NULL;",
            "  EmberFunctionHandle h = __atomic_load_n(&f, __ATOMIC_ACQUIRE);",
            "  if (h == NULL) {",
            f'    if (EmberBackendGetFuncFromEnv({MODULE_CTX}, "{e.op}", &h) != 0) return -1;',
            "    __atomic_store_n(&f, h, __ATOMIC_RELEASE);",
            "  }",
            f"  return EmberFuncCall(h, v, c, {n}, &rv, &rc);",
        ]
        ctx_decl = f"EMBER_DLL __attribute__((weak)) void* {MODULE_CTX} = NULL;"
        return self._helper_call(e, "packed", params, body, {MODULE_CTX: ctx_decl})

    def _helper_call(
        self, e: Call, kind: str, params: list[str], body: list[str], externs: dict[str, str]
    ) -> str:
        """The call of the (shared, static) helper with ``body``, declared once per file."""
        signature = f"({', '.join(params) or 'void'})"
        key = f"{kind}:{e.op}{signature}" + "".join(body)
        name = self.ctx.cpacked.get(key)
        if name is None:
            name = f"ember_{kind}_{len(self.ctx.cpacked)}"
            self.ctx.cpacked[key] = name
            self.ctx.externs.update(externs)
            text = "\n".join([f"static int32_t {name}{signature} {{", *body, "}"])
            self.ctx.helpers.setdefault(f"1_{name}", text)
        return f"{name}({', '.join(self.expr(a) for a in e.args)})"

    def _pack_arguments(self, e: Call, what: str) -> tuple[list[str], list[str], int]:
        """The helper's parameters and the C lines packing them into ``v``/``c``."""
        owners = {id(b.data): b for b in self._buffers()}
        params, body, values = [], [], []
        for k, arg in enumerate(e.args):
            buf = owners.get(id(arg)) if isinstance(arg, Var) else None
            if buf is not None:
                params.append(f"{c_type(buf.dtype, self.where)}* a{k}")
                dims = [const_int(d) for d in buf.shape]
                if any(d is None for d in dims) or buf.strides:
                    raise CompileError(
                        f"C codegen{self.where}: {what} of '{e.op}' needs buffers of static"
                        f" shape and compact layout; '{buf.name}' is not"
                    )
                info = dtype_info(buf.dtype)
                shape = ", ".join(str(d) for d in dims) or "0"
                body.append(f"  static int64_t s{k}[{max(len(dims), 1)}] = {{{shape}}};")
                body.append(
                    f"  DLTensor t{k} = {{a{k}, {{kDLCPU, 0}}, {len(dims)}, "
                    f"{{{info.dl_code}, {info.dl_type[1]}, 1}}, s{k}, NULL, 0}};"
                )
                values.append((f"&t{k}", "EMBER_DLTENSOR_HANDLE"))
            elif dt.is_handle(arg.dtype):
                params.append(f"void* a{k}")
                values.append((f"a{k}", "EMBER_OPAQUE_HANDLE"))
            else:
                raise CompileError(
                    f"C codegen{self.where}: {what} of '{e.op}' takes buffers and "
                    f"handles, got {arg.dtype}"
                )
        n = len(e.args)
        body.append(f"  EmberValue v[{max(n, 1)}];")
        body.append(f"  int32_t c[{max(n, 1)}];")
        for k, (value, code) in enumerate(values):
            body.append(f"  v[{k}].v_handle = (void*){value};")
            body.append(f"  c[{k}] = {code};")
        body.append("  EmberValue rv;")
        body.append("  int32_t rc;")
        return params, body, n
