"""Run-time index checks and ``call_cpacked`` in LLVM IR (what checks.py and packed_call.py
do for the C back end).

``tir.index_check(i, n, what)``: plain ``i`` where its range is proven inside ``[0, n)``,
``i + n`` where proven inside ``[-n, 0)``, else ``i`` wrapped once if negative and compared
unsigned with ``n``; out of range, the kernel formats ``<kernel>: index <i> out of range
[-<n>, <n>) in <what>; pass indices inside the axis`` (snprintf into a stack buffer), sets
it as the runtime's last error, frees its workspaces and returns -1 (inside a parallel
loop the lambda returns -1 and the runtime hands its error to the caller), so no memory
outside the tensor is read.

``tir.call_cpacked(name, ...)``: each buffer argument becomes a DLTensor on the stack
(static shape from a module global, compact, on the CPU), each handle an opaque handle,
and the packed symbol is called directly (declared when it is not in the module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ember.codegen.llvm.ir_text import FunctionWriter, ModuleContext, Val
from ember.errors import CompileError
from ember.support.dtypes import dtype_info
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import Call, PrimExpr, StringImm, Var
from ember.tir.simplify import Simplifier, const_int, simplify
from ember.tir.stmt import PrimFunc

#: LLVM's spelling of DLPack's DLTensor.
DLTENSOR = "{ ptr, { i32, i32 }, i32, { i8, i8, i16 }, ptr, ptr, i64 }"
#: the runtime's type codes of packed values (runtime_api.h).
OPAQUE_HANDLE, DLTENSOR_HANDLE = 3, 7
#: bytes of the stack buffer an index-check message is formatted into.
MESSAGE_BYTES = 512


class CheckLowering:
    """Index checks and packed calls for FuncGen (which provides the members below)."""

    ctx: ModuleContext
    func: PrimFunc
    w: FunctionWriter
    bounds: Simplifier
    where: str
    lambda_suffix: str
    env: dict[Var, Val]
    #: the allocated buffers in scope, by id of their data variable
    local_buffers: dict[int, Buffer]

    if TYPE_CHECKING:  # provided by ExprLowering and FuncGen

        def expr(self, e: PrimExpr) -> Val:
            """The value of an expression."""

        def fail(self, message: str, text: Val | None = None) -> None:
            """Report an error and return -1."""

    def index_check(self, e: Call) -> Val:
        """The checked (and once wrapped) int64 index of ``tir.index_check``."""
        index, extent, what = e.args
        lo, hi = self.bounds.bound(index)
        n_lo = self.bounds.bound(extent)[0]
        if lo >= 0 and hi < n_lo:
            return self.expr(index)
        if lo >= -n_lo and hi < 0:
            return self.expr(simplify(index + extent))
        i, n = self.expr(index), self.expr(extent)
        if i.ty != "i64" or n.ty != "i64":
            raise CompileError(
                f"LLVM codegen{self.where}: index_check needs scalar int64 operands, got "
                f"{i.ty} and {n.ty}; leave checked indices outside vectorized loops"
            )
        w = self.w
        neg = w.inst("i1", f"icmp slt i64 {i.ref}, 0")
        plus = w.inst("i64", f"add i64 {i.ref}, {n.ref}")
        wrapped = w.inst("i64", f"select i1 {neg.ref}, i64 {plus.ref}, i64 {i.ref}")
        ok = w.inst("i1", f"icmp ult i64 {wrapped.ref}, {n.ref}")
        bad, cont = w.label("bad_index"), w.label("index_ok")
        w.cond_br(ok, cont, bad)
        w.start(bad)
        label = what.value if isinstance(what, StringImm) else "an index"
        fmt = (
            f"{self.func.name}: index %lld out of range [-%lld, %lld) in "
            f"{label.replace('%', '%%')}; pass indices inside the axis{self.lambda_suffix}"
        )
        size_t = self.ctx.size_t
        self.ctx.declare("snprintf", f"declare i32 @snprintf(ptr, {size_t}, ptr, ...)")
        buf = w.alloca(f"[{MESSAGE_BYTES} x i8]", 1)
        w.op(
            f"call i32 (ptr, {size_t}, ptr, ...) @snprintf(ptr {buf.ref}, {size_t} "
            f"{MESSAGE_BYTES}, ptr {self.ctx.string(fmt)}, i64 {i.ref}, i64 {n.ref}, "
            f"i64 {n.ref})"
        )
        self.fail("", buf)
        w.start(cont)
        return wrapped

    def call_cpacked(self, e: Call) -> Val:
        """The int32 status of calling ``e.op``'s packed entry with ``e``'s arguments."""
        owners = {id(b.data): b for b in self.func.params if isinstance(b, Buffer)}
        owners.update(self.local_buffers)
        w = self.w
        n = len(e.args)
        values = w.alloca(f"[{max(n, 1)} x i64]", 8)
        codes = w.alloca(f"[{max(n, 1)} x i32]", 4)
        for k, arg in enumerate(e.args):
            buf = owners.get(id(arg)) if isinstance(arg, Var) else None
            slot = w.inst(
                "ptr",
                f"getelementptr inbounds [{max(n, 1)} x i64], ptr {values.ref}, i32 0, i32 {k}",
            )
            code_slot = w.inst(
                "ptr",
                f"getelementptr inbounds [{max(n, 1)} x i32], ptr {codes.ref}, i32 0, i32 {k}",
            )
            if buf is not None:
                tensor = self._dltensor(e.op, buf, self.expr(arg))
                w.op(f"store ptr {tensor.ref}, ptr {slot.ref}")
                w.op(f"store i32 {DLTENSOR_HANDLE}, ptr {code_slot.ref}")
            elif dt.is_handle(arg.dtype):
                w.op(f"store ptr {self.expr(arg).ref}, ptr {slot.ref}")
                w.op(f"store i32 {OPAQUE_HANDLE}, ptr {code_slot.ref}")
            else:
                raise CompileError(
                    f"LLVM codegen{self.where}: call_cpacked of '{e.op}' takes buffers and "
                    f"handles, got {arg.dtype}"
                )
        signature = "i32 (ptr, ptr, i32, ptr, ptr, ptr)"
        if f"{e.op}_unpacked" not in self.ctx.defined:
            self.ctx.declare(e.op, f"declare i32 @{e.op}(ptr, ptr, i32, ptr, ptr, ptr)")
        rv = w.alloca("i64", 8)
        rc = w.alloca("i32", 4)
        return w.inst(
            "i32",
            f"call {signature} @{e.op}(ptr {values.ref}, ptr {codes.ref}, i32 {n}, "
            f"ptr {rv.ref}, ptr {rc.ref}, ptr null)",
        )

    def _dltensor(self, callee: str, buf: Buffer, data: Val) -> Val:
        """A stack DLTensor describing ``buf`` (static shape, compact) at ``data``."""
        dims = [const_int(d) for d in buf.shape]
        if any(d is None for d in dims) or buf.strides:
            raise CompileError(
                f"LLVM codegen{self.where}: call_cpacked of '{callee}' needs buffers of static "
                f"shape and compact layout; '{buf.name}' is not"
            )
        shape = self._shape_global([int(d) for d in dims if d is not None])
        info = dtype_info(buf.dtype)
        w = self.w
        t = w.alloca(DLTENSOR, 8)
        fields = [
            ("ptr", data.ref, "0"),
            ("i32", "1", "1, i32 0"),  # kDLCPU
            ("i32", "0", "1, i32 1"),
            ("i32", str(len(dims)), "2"),
            ("i8", str(info.dl_code), "3, i32 0"),
            ("i8", str(info.dl_type[1]), "3, i32 1"),
            ("i16", "1", "3, i32 2"),
            ("ptr", shape, "4"),
            ("ptr", "null", "5"),
            ("i64", "0", "6"),
        ]
        for ty, value, path in fields:
            at = w.inst("ptr", f"getelementptr inbounds {DLTENSOR}, ptr {t.ref}, i32 0, i32 {path}")
            w.op(f"store {ty} {value}, ptr {at.ref}")
        return t

    def _shape_global(self, dims: list[int]) -> str:
        """A module global holding ``dims`` as int64 (shared by equal shapes)."""
        body = ", ".join(f"i64 {d}" for d in dims) or "i64 0"
        shapes = [h for h in self.ctx.helpers if h.startswith("0_@ember_shape_")]
        for key in shapes:
            if self.ctx.helpers[key].endswith(f"[{body}], align 8"):
                return key[2:]
        name = f"@ember_shape_{len(shapes)}"
        self.ctx.helpers[f"0_{name}"] = (
            f"{name} = internal global [{max(len(dims), 1)} x i64] [{body}], align 8"
        )
        return name
