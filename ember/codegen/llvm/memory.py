"""Loads and stores of the loop IR in LLVM IR: scalar, contiguous vector, gather/scatter.

Bool buffers hold one byte per element (``i8``), values are ``i1``. A vector access has
one Ramp index (``flat_access``, shared with the C back end): stride 1 is one vector
load or store, other strides go lane by lane. Inside vectorized loops every access is
tagged with the loops' access groups (``llvm.loop.parallel_accesses``).
"""

from __future__ import annotations

from ember.codegen.c.vector import flat_access
from ember.codegen.llvm.ir_text import FunctionWriter, Val, memory_type
from ember.errors import CompileError
from ember.support.dtypes import sub_bits
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from ember.tir.simplify import simplify


class MemoryLowering:
    """Buffer addressing, loads and stores (the expression half provides ``expr``)."""

    w: FunctionWriter
    env: dict[Var, Val]
    where: str
    #: access-group metadata of the enclosing vectorized loops (tags every load/store)
    groups: list[str]

    def expr(self, e: PrimExpr) -> Val:  # pragma: no cover - in ExprLowering
        """The LLVM value of ``e`` (provided by ExprLowering)."""
        raise NotImplementedError

    def compare(self, pred: str, a: Val, b: Val) -> Val:  # pragma: no cover - in ExprLowering
        """A comparison (provided by ExprLowering)."""
        raise NotImplementedError

    def const(self, dtype: str, value: int | float) -> Val:  # pragma: no cover - in ExprLowering
        """A constant (provided by ExprLowering)."""
        raise NotImplementedError

    def access_tag(self) -> str:
        """The metadata suffix of a load/store inside vectorized loops."""
        if not self.groups:
            return ""
        if len(self.groups) == 1:
            return f", !llvm.access.group {self.groups[0]}"
        node = self.w.ctx.node("!{" + ", ".join(self.groups) + "}")
        return f", !llvm.access.group {node}"

    def pointer(self, buf: Buffer) -> Val:
        """The data pointer of ``buf``."""
        ptr = self.env.get(buf.data)
        if ptr is None:
            raise CompileError(f"LLVM codegen{self.where}: buffer '{buf.name}' is not in scope")
        return ptr

    def address(self, buf: Buffer, offset: PrimExpr) -> Val:
        """A pointer to element ``offset`` of ``buf``."""
        off = self.expr(offset)
        if isinstance(offset, IntImm):  # a literal index needs no extension
            off = Val("i64", str(offset.value))
        elif off.ty != "i64":
            ext = "zext" if dt.is_uint(offset.dtype) else "sext"
            off = self.w.inst("i64", f"{ext} {off.typed()} to i64")
        mty = memory_type(buf.dtype, self.where)
        base = self.pointer(buf)
        return self.w.inst("ptr", f"getelementptr inbounds {mty}, ptr {base.ref}, {off.typed()}")

    # -- memory ---------------------------------------------------------------------------
    def vector_base(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, int]:
        """(flat offset of lane 0, flat stride between lanes) of a vector access."""
        return flat_access(buf, indices, self.where)

    def load(self, e: BufferLoad) -> Val:
        """A scalar load, a contiguous vector load, or a gather lane by lane."""
        buf = e.buffer
        lanes = dt.lanes_of(e.dtype)
        elem = dt.element_of(buf.dtype)
        mty = memory_type(elem, self.where)
        align = dt.bytes_of(elem) if elem != "bool" else 1
        tag = self.access_tag()
        if lanes == 1:
            ptr = self.address(buf, buf.offset_of(e.indices))
            raw = self.w.inst(mty, f"load {mty}, ptr {ptr.ref}, align {align}{tag}")
        else:
            base, stride = self.vector_base(buf, e.indices)
            vty = f"<{lanes} x {mty}>"
            if stride == 1:
                ptr = self.address(buf, base)
                raw = self.w.inst(vty, f"load {vty}, ptr {ptr.ref}, align {align}{tag}")
            else:
                raw = Val(vty, "poison")
                for k in range(lanes):
                    ptr = self.address(buf, simplify(base + k * stride))
                    one = self.w.inst(mty, f"load {mty}, ptr {ptr.ref}, align {align}{tag}")
                    raw = self.w.inst(vty, f"insertelement {raw.typed()}, {one.typed()}, i32 {k}")
        if elem == "bool":
            return self.compare("icmp ne", raw, self.const(dt.with_lanes("uint8", lanes), 0))
        sub_int = sub_bits(elem) and dt.is_integral(elem)  # float4: its bits (narrow.py)
        return self.sub_byte_value(raw, e.dtype) if sub_int else raw

    def sub_byte_value(self, v: Val, dtype: str) -> Val:
        """The int4/uint4/int2/uint2 value of the low bits of the byte(s) ``v`` (sign- or
        zero-extended, as ember.codegen.c.subbyte: ml_dtypes' layout)."""
        lanes, shift = dt.lanes_of(dtype), 8 - sub_bits(dt.element_of(dtype))
        if dt.is_uint(dtype):
            mask = self.const(dt.with_lanes("uint8", lanes), (1 << (8 - shift)) - 1)
            return self.w.inst(v.ty, f"and {v.typed()}, {mask.ref}")
        amount = self.const(dt.with_lanes("int8", lanes), shift)
        up = self.w.inst(v.ty, f"shl {v.typed()}, {amount.ref}")
        return self.w.inst(v.ty, f"ashr {up.typed()}, {amount.ref}")

    def store_value(
        self, buf: Buffer, value: Val, indices: tuple[PrimExpr, ...], dtype: str
    ) -> None:
        """Store ``value`` (scalar or vector of ``dtype``) at ``buf[indices]``."""
        lanes = dt.lanes_of(dtype)
        elem = dt.element_of(buf.dtype)
        mty = memory_type(elem, self.where)
        align = dt.bytes_of(elem) if elem != "bool" else 1
        if elem == "bool":
            wide = mty if lanes == 1 else f"<{lanes} x {mty}>"
            value = self.w.inst(wide, f"zext {value.typed()} to {wide}")
        elif sub_bits(elem) and dt.is_integral(elem):  # the low bits, ml_dtypes' layout
            mask = self.const(dt.with_lanes("uint8", lanes), (1 << sub_bits(elem)) - 1)
            value = self.w.inst(value.ty, f"and {value.typed()}, {mask.ref}")
        tag = self.access_tag()
        if lanes == 1:
            ptr = self.address(buf, buf.offset_of(indices))
            self.w.op(f"store {value.typed()}, ptr {ptr.ref}, align {align}{tag}")
            return
        base, stride = self.vector_base(buf, indices)
        if stride == 1:
            ptr = self.address(buf, base)
            self.w.op(f"store {value.typed()}, ptr {ptr.ref}, align {align}{tag}")
            return
        for k in range(lanes):
            one = self.w.inst(mty, f"extractelement {value.typed()}, i32 {k}")
            ptr = self.address(buf, simplify(base + k * stride))
            self.w.op(f"store {one.typed()}, ptr {ptr.ref}, align {align}{tag}")
