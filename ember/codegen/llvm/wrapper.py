"""The packed entry point of a kernel in LLVM IR: the same checks and messages as C's.

``<sym>(args, type_codes, num_args, out_ret_value, out_ret_tcode, resource_handle)``
checks the argument count, each type code and, through ``ember_check_tensor`` (the C
back end's helper, written here in IR), every tensor's rank, dtype, device, extents
and strides, binds symbolic extents, then calls ``<sym>_unpacked``. Messages are the C
back end's word for word, so tests and users see one ABI whichever back end built it.
"""

from __future__ import annotations

from ember.codegen.c.abi import pool_too_small, symbol_name, symbolic_extents
from ember.codegen.llvm.check_helper import (
    CHECK,
    DLTENSOR,
    SET_ERROR,
    TYPE_DLTENSOR,
    TYPE_FLOAT,
    TYPE_HANDLE,
    TYPE_INT,
    TYPE_NDARRAY,
    TYPE_NULL,
    TYPE_UINT,
    check_helper,
)
from ember.codegen.llvm.ir_text import FunctionWriter, ModuleContext, Val, value_type
from ember.errors import CompileError
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer, decl_buffer
from ember.tir.expr import IntImm, Var
from ember.tir.pools import pool_param_bytes
from ember.tir.stmt import PrimFunc


class _Wrapper:
    """Writes the packed entry of one PrimFunc."""

    def __init__(self, ctx: ModuleContext, func: PrimFunc) -> None:
        self.ctx = ctx
        self.func = func
        self.sym = symbol_name(func)
        self.w = FunctionWriter(ctx)
        self.w.lines.append("entry:")
        self.bound: dict[Var, Val] = {}

    def fail_unless(self, ok: Val, message: str | None) -> None:
        """Return -1 (reporting ``message`` if given) unless ``ok``."""
        w = self.w
        bad, cont = w.label("bad"), w.label("ok")
        w.cond_br(ok, cont, bad)
        w.start(bad)
        if message is not None:
            w.op(f"call void @{SET_ERROR}(ptr {self.ctx.string(message)})")
        w.op("ret i32 -1")
        w.start(cont)

    def arg_slot(self, k: int) -> Val:
        """A pointer to ``args[k]``."""
        return self.w.inst("ptr", f"getelementptr inbounds i64, ptr %args, i32 {k}")

    def type_code(self, k: int) -> Val:
        """``type_codes[k]``."""
        p = self.w.inst("ptr", f"getelementptr inbounds i32, ptr %type_codes, i32 {k}")
        return self.w.inst("i32", f"load i32, ptr {p.ref}")

    def tensor(self, k: int, b: Buffer) -> Val:
        """Check tensor argument ``k`` and return its data pointer (plus byte_offset)."""
        w, sym = self.w, self.sym
        code, bits, _ = dt.dlpack_code(b.dtype)
        dims = []
        for e in b.shape:
            if isinstance(e, IntImm):
                dims.append(e.value)
            elif isinstance(e, Var):
                dims.append(-1)
            else:
                raise CompileError(
                    f"LLVM codegen: parameter {b.name} of '{sym}' has extent {e}; extents "
                    "must be constants or plain variables"
                )
        shape = self.int64_array(f"ember_shape.{sym}.{k}", dims or [0])
        strides = "null"
        if b.strides:
            if not all(isinstance(e, IntImm) for e in b.strides):
                raise CompileError(
                    f"LLVM codegen: parameter {b.name} of '{sym}' has symbolic strides; only "
                    "constant strides can be checked at the call boundary"
                )
            values = [e.value for e in b.strides]  # type: ignore[attr-defined]
            strides = self.int64_array(f"ember_strides.{sym}.{k}", values)
        slot = w.alloca("ptr", 8)
        rc = w.inst(
            "i32",
            f"call i32 @{CHECK}(ptr {self.ctx.string(sym)}, i32 {k}, "
            f"ptr {self.ctx.string(b.name)}, ptr %args, ptr %type_codes, "
            f"i32 {len(b.shape)}, i8 {code}, i8 {bits}, "
            f"ptr {self.ctx.string(b.dtype)}, ptr {shape}, ptr {strides}, ptr {slot.ref})",
        )
        self.fail_unless(w.inst("i1", f"icmp eq i32 {rc.ref}, 0"), None)
        t = w.inst("ptr", f"load ptr, ptr {slot.ref}")
        shp = w.inst("ptr", f"getelementptr inbounds {DLTENSOR}, ptr {t.ref}, i32 0, i32 4")
        tshape = w.inst("ptr", f"load ptr, ptr {shp.ref}")
        for d, e in enumerate(b.shape):
            if not isinstance(e, Var):
                continue
            p = w.inst("ptr", f"getelementptr inbounds i64, ptr {tshape.ref}, i32 {d}")
            ext = w.inst("i64", f"load i64, ptr {p.ref}")
            if e in self.bound:
                ok = w.inst("i1", f"icmp eq i64 {ext.ref}, {self.bound[e].ref}")
                self.fail_unless(
                    ok,
                    f"{sym}: dimension {d} of argument {k} ({b.name}) must equal "
                    f"'{e.name}' bound earlier",
                )
            else:
                self.bound[e] = ext
        self.shapes[k] = tshape
        dp = w.inst("ptr", f"getelementptr inbounds {DLTENSOR}, ptr {t.ref}, i32 0, i32 0")
        data = w.inst("ptr", f"load ptr, ptr {dp.ref}")
        op = w.inst("ptr", f"getelementptr inbounds {DLTENSOR}, ptr {t.ref}, i32 0, i32 6")
        off = w.inst("i64", f"load i64, ptr {op.ref}")
        return w.inst("ptr", f"getelementptr inbounds i8, ptr {data.ref}, i64 {off.ref}")

    def int64_array(self, name: str, values: list[int]) -> str:
        """A private constant i64 array; returns its global name."""
        body = ", ".join(f"i64 {v}" for v in values)
        self.ctx.helpers[name] = (
            f"@{name} = private unnamed_addr constant [{len(values)} x i64] [{body}], align 8"
        )
        return f"@{name}"

    def scalar(self, k: int, v: Var) -> Val:
        """Check scalar argument ``k`` and return its value."""
        w, where = self.w, f"{self.sym}: argument {k} ({v.name})"
        tc = self.type_code(k)
        slot = self.arg_slot(k)
        if dt.is_handle(v.dtype):
            a = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_HANDLE}")
            b = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_NULL}")
            c = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_DLTENSOR}")
            d = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_NDARRAY}")
            plain = w.inst("i1", f"or i1 {a.ref}, {b.ref}")
            tens = w.inst("i1", f"or i1 {c.ref}, {d.ref}")
            self.fail_unless(
                w.inst("i1", f"or i1 {plain.ref}, {tens.ref}"), f"{where} must be a handle"
            )
            h = w.inst("ptr", f"load ptr, ptr {slot.ref}")
            hnull = w.inst("i1", f"icmp eq ptr {h.ref}, null")
            use_h = w.inst("i1", f"or i1 {plain.ref}, {hnull.ref}")
            safe = w.inst("ptr", f"select i1 {use_h.ref}, ptr null, ptr {h.ref}")
            # the data pointer of a tensor, read only when it is one (safe is never null then)
            data = w.fresh()
            done = w.label("h")
            read = w.label("hdata")
            pre = w.block
            w.cond_br(use_h, done, read)
            w.start(read)
            w.op(f"{data} = load ptr, ptr {safe.ref}")
            w.br(done)
            w.start(done)
            return w.inst("ptr", f"phi ptr [ {h.ref}, %{pre} ], [ {data}, %{read} ]")
        ty = value_type(v.dtype)
        if dt.is_float(v.dtype):
            is_f = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_FLOAT}")
            is_i = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_INT}")
            self.fail_unless(
                w.inst("i1", f"or i1 {is_f.ref}, {is_i.ref}"), f"{where} must be a float"
            )
            fv = w.inst("double", f"load double, ptr {slot.ref}")
            iv = w.inst("i64", f"load i64, ptr {slot.ref}")
            conv = w.inst("double", f"sitofp i64 {iv.ref} to double")
            val = w.inst("double", f"select i1 {is_f.ref}, double {fv.ref}, double {conv.ref}")
            if ty == "float":
                val = w.inst("float", f"fptrunc double {val.ref} to float")
            return val
        is_i = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_INT}")
        is_u = w.inst("i1", f"icmp eq i32 {tc.ref}, {TYPE_UINT}")
        self.fail_unless(
            w.inst("i1", f"or i1 {is_i.ref}, {is_u.ref}"), f"{where} must be an integer"
        )
        iv = w.inst("i64", f"load i64, ptr {slot.ref}")
        if ty == "i64":
            return iv
        if ty == "i1":
            return w.inst("i1", f"icmp ne i64 {iv.ref}, 0")
        return w.inst(ty, f"trunc i64 {iv.ref} to {ty}")

    def pool(self, k: int, v: Var, need: int) -> Val:
        """Check pool argument ``k`` (planned scratch or workspace of ``need`` bytes): a
        non-NULL raw pointer, or a uint8 tensor at least that long; return its memory."""
        w, where = self.w, f"{self.sym}: argument {k} ({v.name})"
        raw_path, tensor_path, done = w.label("praw"), w.label("ptensor"), w.label("pdone")
        is_raw = w.inst("i1", f"icmp eq i32 {self.type_code(k).ref}, {TYPE_HANDLE}")
        w.cond_br(is_raw, raw_path, tensor_path)
        w.start(raw_path)
        h = w.inst("ptr", f"load ptr, ptr {self.arg_slot(k).ref}")
        self.fail_unless(
            w.inst("i1", f"icmp ne ptr {h.ref}, null"), f"{where} is NULL; it needs {need} bytes"
        )
        raw_end = w.block
        w.br(done)
        w.start(tensor_path)
        data = self.tensor(k, decl_buffer((Var(v.name, "int64"),), "uint8", v.name))
        length = w.inst("i64", f"load i64, ptr {self.shapes.pop(k).ref}")
        self.fail_unless(
            w.inst("i1", f"icmp sge i64 {length.ref}, {need}"), pool_too_small(where, need)
        )
        tensor_end = w.block
        w.br(done)
        w.start(done)
        return w.inst("ptr", f"phi ptr [ {h.ref}, %{raw_end} ], [ {data.ref}, %{tensor_end} ]")

    def text(self) -> str:
        """The wrapper's definition."""
        func, w, sym = self.func, self.w, self.sym
        n = len(func.params)
        self.shapes: dict[int, Val] = {}
        ok = w.inst("i1", f"icmp eq i32 %num_args, {n}")
        bad, cont = w.label("bad"), w.label("ok")
        w.cond_br(ok, cont, bad)
        w.start(bad)
        rc = w.inst(
            "i32", f"call i32 @ember_fail_nargs(ptr {self.ctx.string(sym)}, i32 {n}, i32 %num_args)"
        )
        w.op(f"ret i32 {rc.ref}")
        w.start(cont)
        args: list[Val] = []
        pools = pool_param_bytes(func)
        for k, p in enumerate(func.params):
            if isinstance(p, Buffer):
                args.append(self.tensor(k, p))
            elif p.name in pools:
                args.append(self.pool(k, p, pools[p.name]))
            else:
                val = self.scalar(k, p)
                args.append(val)
                if dt.is_integral(p.dtype) and p not in self.bound:
                    self.bound[p] = self.widen(val, p.dtype)
        for k, p in enumerate(func.params):
            if not (isinstance(p, Var) and dt.is_integral(p.dtype)):
                continue
            for j, q in enumerate(func.params):
                if not isinstance(q, Buffer):
                    continue
                for d, e in enumerate(q.shape):
                    if e is p:
                        pp = w.inst(
                            "ptr", f"getelementptr inbounds i64, ptr {self.shapes[j].ref}, i32 {d}"
                        )
                        ext = w.inst("i64", f"load i64, ptr {pp.ref}")
                        wide = self.widen(args[k], p.dtype)
                        same = w.inst("i1", f"icmp eq i64 {wide.ref}, {ext.ref}")
                        self.fail_unless(
                            same,
                            f"{sym}: argument {k} ({p.name}) does not match dimension {d} of "
                            f"argument {j} ({q.name})",
                        )
        for v in symbolic_extents(func):
            ty = value_type(v.dtype)
            val = self.bound[v]
            args.append(val if ty == "i64" else w.inst(ty, f"trunc i64 {val.ref} to {ty}"))
        listed = ", ".join(a.typed() for a in args)
        rc = w.inst("i32", f"call i32 @{sym}_unpacked({listed})")
        w.op(f"ret i32 {rc.ref}")
        return (
            f"define i32 @{sym}(ptr %args, ptr %type_codes, i32 %num_args, ptr %out_ret_value, "
            f"ptr %out_ret_tcode, ptr %resource_handle) nounwind {{\n{w.body()}\n}}"
        )

    def widen(self, val: Val, dtype: str) -> Val:
        """An integer value as i64 (sign- or zero-extended by its dtype)."""
        if val.ty == "i64":
            return val
        ext = "zext" if dt.is_uint(dtype) else "sext"
        return self.w.inst("i64", f"{ext} {val.typed()} to i64")


def packed_wrapper(ctx: ModuleContext, func: PrimFunc) -> str:
    """The packed entry point of ``func`` (defines the check helpers on first use)."""
    check_helper(ctx)
    return _Wrapper(ctx, func).text()
