"""Statements of the loop IR -> LLVM IR: the unpacked function of one PrimFunc.

``<symbol>_unpacked(ptr noalias A, ..., i32 n)`` takes raw pointers and scalars, returns 0
or -1 after ``EmberAPISetLastError`` (the runtime ABI). Loops are canonical (phi in the
header) with metadata (``loop_hints``); reduction updates are contracted (``contract``).
A parallel loop becomes a lambda ``int32_t (int32_t task_id, EmberParallelGroupEnv* penv,
void* cdata)`` running one static chunk, the variables in scope packed into ``cdata``,
launched by ``EmberBackendParallelLaunch`` (no OpenMP); an error in it sets the message
and returns -1, and the caller frees its workspaces and returns -1. Stack allocations
live in the entry block, so loops never grow the stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.codegen.llvm import loop_hints
from ember.codegen.llvm.checks import CheckLowering
from ember.codegen.llvm.expr import ExprLowering
from ember.codegen.llvm.ir_text import FunctionWriter, ModuleContext, Val, memory_type, value_type
from ember.codegen.llvm.narrow import is_narrow
from ember.codegen.llvm.select_store import stored_value
from ember.errors import CompileError
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import Cast, IntImm, PrimExpr, Var
from ember.tir.simplify import Simplifier, simplify
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    PrimFunc,
    SeqStmt,
    Stmt,
    StorageKind,
)

RUNTIME_DECLS = {
    "EmberAPISetLastError": "declare void @EmberAPISetLastError(ptr)",
    "EmberBackendAllocWorkspace": (
        "declare ptr @EmberBackendAllocWorkspace(i32, i32, i64, i32, i32)"
    ),
    "EmberBackendFreeWorkspace": "declare i32 @EmberBackendFreeWorkspace(i32, i32, ptr)",
    "EmberBackendParallelLaunch": "declare i32 @EmberBackendParallelLaunch(ptr, ptr, i32)",
}


@dataclass
class Options:
    """Code generation options read from the target."""

    num_threads: int = 0
    export_unpacked: bool = False
    #: allocate a stack buffer on each side of the if/else that is its scope
    #: (branch_allocs.split_branch_allocs; on CPUs with BRANCH_ALLOC_REGISTERS registers)
    split_branch_allocs: bool = False
    #: call the AVX-512 copies of the runtime's float32 tile kernels (tiles.tile_symbol;
    #: on CPUs with AVX-512: ``x86-avx512``)
    avx512_tiles: bool = False


@dataclass
class Scope:
    """What one LLVM function being generated keeps: lambdas go to ``functions``."""

    functions: list[str] = field(default_factory=list)


class FuncGen(ExprLowering, CheckLowering):
    """Emits the statements of one LLVM function (an unpacked kernel or a lambda)."""

    def __init__(
        self,
        ctx: ModuleContext,
        func: PrimFunc,
        opts: Options,
        scope: Scope,
        remainders: bool | None = None,
    ) -> None:
        self.ctx = ctx
        self.func = func
        self.opts = opts
        self.avx512_tiles = opts.avx512_tiles
        self.scope = scope
        self.w = FunctionWriter(ctx)
        self.w.lines.append("entry:")
        self.env: dict[Var, Val] = {}
        self.bounds = Simplifier()
        self.where = f" of '{func.name}'"
        self.groups: list[str] = []
        self.heap: list[Val] = []
        self.in_parallel = False
        self.in_simd = False
        self.lambda_suffix = ""
        #: the references of values that are noalias pointers (the kernel's buffers)
        self.noalias: set[str] = set()
        self.local_buffers: dict[int, Buffer] = {}
        #: whether the function takes a power-of-two remainder (``loop_hints``)
        self.remainders = loop_hints.has_remainder(func.body) if remainders is None else remainders

    def runtime(self, name: str) -> str:
        """Declare a runtime API function and return its name."""
        self.ctx.declare(name, RUNTIME_DECLS[name])
        return name

    # -- errors ---------------------------------------------------------------------------
    def fail(self, message: str, text: Val | None = None) -> None:
        """Report ``message`` (or the string at ``text``), free workspaces, return -1."""
        if message:
            text = Val("ptr", self.ctx.string(message + self.lambda_suffix))
        if text is not None:
            self.w.op(f"call void @{self.runtime('EmberAPISetLastError')}(ptr {text.ref})")
        free = self.runtime("EmberBackendFreeWorkspace")
        for ptr in reversed(self.heap):
            self.w.op(f"call i32 @{free}(i32 1, i32 0, {ptr.typed()})")
        self.w.op("ret i32 -1")

    def guard(self, ok: Val, message: str) -> None:
        """Continue when ``ok`` holds, else fail with ``message``."""
        bad, cont = self.w.label("fail"), self.w.label("ok")
        self.w.cond_br(ok, cont, bad)
        self.w.start(bad)
        self.fail(message)
        self.w.start(cont)

    # -- statements -----------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        """Emit one statement."""
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, BufferStore):
            if is_narrow(s.buffer.dtype):  # the bits (narrow_lower)
                value = self.narrow_bits(s.value)
            else:
                value = stored_value(self, s)
            self.store_value(s.buffer, value, s.indices, s.value.dtype)
        elif isinstance(s, LetStmt):
            value = self.expr(s.value)
            if dt.is_integral(s.var.dtype) and dt.lanes_of(s.var.dtype) == 1:
                self.bounds.ranges[s.var] = self.bounds.bound(s.value)
            self.scoped(s.var, value, s.body)
            self.bounds.ranges.pop(s.var, None)
        elif isinstance(s, IfThenElse):
            self.branch(s)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Evaluate):
            if not isinstance(s.value, IntImm):
                self.expr(s.value)
        elif isinstance(s, AssertStmt):
            cond = self.expr(s.condition)
            self.guard(cond, f"{self.func.name}: {s.message}" if s.message else "")
            self.stmt(s.body)
        else:
            raise CompileError(
                f"LLVM codegen{self.where}: unsupported statement {type(s).__name__}"
            )

    def scoped(self, var: Var, value: Val, body: Stmt) -> None:
        """Emit ``body`` with ``var`` bound to ``value``; the binding ends with it (so a
        later parallel loop never captures a value that does not dominate it)."""
        saved = self.env.get(var)
        self.env[var] = value
        self.stmt(body)
        if saved is None:
            del self.env[var]
        else:
            self.env[var] = saved

    def branch(self, s: IfThenElse) -> None:
        """if / else."""
        w = self.w
        cond = self.expr(s.condition)
        yes, no, done = w.label("then"), w.label("else"), w.label("endif")
        w.cond_br(cond, yes, no if s.else_case is not None else done)
        w.start(yes)
        self.stmt(s.then_case)
        w.br(done)
        if s.else_case is not None:
            w.start(no)
            self.stmt(s.else_case)
            w.br(done)
        w.start(done)

    def loop(self, s: For) -> None:
        """A loop; parallel ones become a lambda on the runtime's thread pool."""
        if s.kind is ForKind.PARALLEL and not self.in_parallel and not self.in_simd:
            self.parallel(s)
            return
        was_parallel, was_simd = self.in_parallel, self.in_simd
        self.in_parallel |= s.kind is ForKind.PARALLEL
        self.in_simd |= s.kind is ForKind.VECTORIZED
        hints, group = loop_hints.loop_metadata(self.ctx, s, self.remainders)
        if group:
            self.groups.append(group)
        self.emit_loop(
            s.loop_var, self.expr(s.min), self.expr(simplify(s.min + s.extent)), s, hints
        )
        if group:
            self.groups.pop()
        self.in_parallel, self.in_simd = was_parallel, was_simd

    def emit_loop(self, var: Var, lo: Val, end: Val, s: For, hints: list[str]) -> None:
        """``for (var = lo; var < end; ++var) s.body`` with loop metadata ``hints``."""
        w = self.w
        ty = value_type(var.dtype, self.where)
        head, body, latch, done = (w.label(x) for x in ("loop", "body", "latch", "done"))
        pre = w.block
        w.br(head)
        w.start(head)
        iv, nxt = w.fresh("i"), w.fresh("inext")
        w.op(f"{iv} = phi {ty} [ {lo.ref}, %{pre} ], [ {nxt}, %{latch} ]")
        lt = "ult" if dt.is_uint(var.dtype) else "slt"
        cond = w.inst("i1", f"icmp {lt} {ty} {iv}, {end.ref}")
        w.cond_br(cond, body, done)
        w.start(body)
        first = len(w.lines)
        saved = self.bounds.ranges.get(var)
        lo_b = self.bounds.bound(s.min)[0]
        hi_b = self.bounds.bound(s.min)[1] + self.bounds.bound(s.extent)[1] - 1
        self.bounds.ranges[var] = (lo_b, hi_b)
        self.scoped(var, Val(ty, iv), s.body)
        if saved is None:
            del self.bounds.ranges[var]
        else:
            self.bounds.ranges[var] = saved
        w.br(latch)
        w.start(latch)
        nsw = "nuw" if dt.is_uint(var.dtype) else "nsw"
        w.op(f"{nxt} = add {nsw} {ty} {iv}, 1")
        md = ""
        hints = loop_hints.without_force_if_exits(self.ctx, hints, w.lines[first:])
        if hints:
            loop_id = self.ctx.node("!{$self, " + ", ".join(hints) + "}", distinct=True)
            md = f", !llvm.loop {loop_id}"
        w.op(f"br label %{head}{md}")
        w.start(done)

    def parallel(self, s: For) -> None:
        """Outline the loop into a lambda over static chunks and launch it on the pool."""
        captured = [(v, val) for v, val in self.env.items()]
        fields = ", ".join(val.ty for _, val in captured) or "i8"
        sty = f"{{ {fields} }}"
        w = self.w
        cdata = w.alloca(sty, 8)
        for k, (_, val) in enumerate(captured):
            slot = w.inst("ptr", f"getelementptr inbounds {sty}, ptr {cdata.ref}, i32 0, i32 {k}")
            w.op(f"store {val.typed()}, ptr {slot.ref}")
        name = f"{self.func_symbol}_par{len(self.scope.functions)}"
        self.scope.functions.append("")  # reserve the name's number
        slot_index = len(self.scope.functions) - 1
        self.scope.functions[slot_index] = self.lambda_text(name, s, captured, sty)
        launch = self.runtime("EmberBackendParallelLaunch")
        rc = w.inst(
            "i32", f"call i32 @{launch}(ptr @{name}, ptr {cdata.ref}, i32 {self.opts.num_threads})"
        )
        ok = w.inst("i1", f"icmp eq i32 {rc.ref}, 0")
        self.guard(ok, "")

    def lambda_text(self, name: str, s: For, captured: list[tuple[Var, Val]], sty: str) -> str:
        """The lambda computing chunk ``task_id`` of ``num_task`` of loop ``s``, and the
        body function it calls: its pointer parameters are ``noalias`` where the kernel's
        are, so the loop keeps the alias facts the outlining would lose (the inliner
        turns them into scoped alias metadata)."""
        w = FunctionWriter(self.ctx)
        w.lines.append("entry:")
        loaded = []
        for k, (_, val) in enumerate(captured):
            slot = w.inst("ptr", f"getelementptr inbounds {sty}, ptr %cdata, i32 0, i32 {k}")
            loaded.append(w.inst(val.ty, f"load {val.ty}, ptr {slot.ref}"))
        outer = FuncGen(self.ctx, self.func, self.opts, self.scope, self.remainders)
        outer.w = w
        outer.env = {v: val for (v, _), val in zip(captured, loaded, strict=True)}
        ty = value_type(s.loop_var.dtype, self.where)
        lo = outer.expr(s.min)
        extent = outer.expr(s.extent)
        nptr = w.inst("ptr", "getelementptr inbounds { ptr, i32 }, ptr %penv, i32 0, i32 1")
        ntask = w.inst("i32", f"load i32, ptr {nptr.ref}")
        task, num = Val("i32", "%task_id"), ntask
        if ty != "i32":
            task = w.inst(ty, f"sext i32 %task_id to {ty}")
            num = w.inst(ty, f"sext {ntask.typed()} to {ty}")
        size = w.inst(ty, f"add {ty} {extent.ref}, {num.ref}")
        size = w.inst(ty, f"sub {ty} {size.ref}, 1")
        chunk = w.inst(ty, f"sdiv {ty} {size.ref}, {num.ref}")
        start = w.inst(ty, f"mul {ty} {task.ref}, {chunk.ref}")
        stop = w.inst(ty, f"add {ty} {start.ref}, {chunk.ref}")
        small = w.inst("i1", f"icmp slt {ty} {stop.ref}, {extent.ref}")
        stop = w.inst(ty, f"select i1 {small.ref}, {ty} {stop.ref}, {ty} {extent.ref}")
        begin = w.inst(ty, f"add nsw {ty} {lo.ref}, {start.ref}")
        end = w.inst(ty, f"add nsw {ty} {lo.ref}, {stop.ref}")
        args = ", ".join(v.typed() for v in [*loaded, begin, end])
        rc = w.inst("i32", f"call i32 @{name}_body({args})")
        w.op(f"ret i32 {rc.ref}")
        lam = (
            f"define internal i32 @{name}(i32 %task_id, ptr %penv, ptr %cdata) nounwind {{\n"
            f"{w.body()}\n}}"
        )
        inner = FuncGen(self.ctx, self.func, self.opts, self.scope, self.remainders)
        inner.func_symbol = self.func_symbol
        inner.in_parallel = True
        inner.lambda_suffix = " (in a parallel loop)"
        inner.bounds = Simplifier(dict(self.bounds.ranges))
        params = []
        for k, (v, val) in enumerate(captured):
            attr = " noalias" if val.ref in self.noalias else ""
            params.append(f"{val.ty}{attr} %c{k}")
            inner.env[v] = Val(val.ty, f"%c{k}")
            if attr:
                inner.noalias.add(f"%c{k}")
        params += [f"{ty} %begin", f"{ty} %end"]
        inner.emit_loop(
            s.loop_var,
            Val(ty, "%begin"),
            Val(ty, "%end"),
            s,
            loop_hints.vectorize_hints(self.ctx, s, self.remainders),
        )
        inner.w.op("ret i32 0")
        body = (
            f"define internal i32 @{name}_body({', '.join(params)}) alwaysinline nounwind {{\n"
            f"{inner.w.body()}\n}}"
        )
        return lam + "\n" + body

    func_symbol = ""

    def allocate(self, s: Allocate) -> None:
        """Stack (entry-block alloca), runtime heap workspace or static pool slice."""
        b = s.buffer
        self.local_buffers[id(b.data)] = b
        count = b.num_elements()
        mty = memory_type(b.dtype, self.where)
        elem_bytes = dt.bytes_of(b.dtype)
        if s.storage is StorageKind.STACK:
            if not isinstance(count, IntImm):
                raise CompileError(
                    f"LLVM codegen{self.where}: stack allocation of '{b.name}' needs a constant "
                    f"size, got {count}; use StorageKind.HEAP"
                )
            self.scoped(b.data, self.w.alloca(f"[{count.value} x {mty}]", b.align), s.body)
        elif s.storage is StorageKind.HEAP:
            wide = count if isinstance(count, IntImm) else Cast("int64", count)
            nbytes = self.expr(simplify(Cast("int64", wide) * elem_bytes))
            code, bits, _ = dt.dlpack_code(b.dtype)
            alloc = self.runtime("EmberBackendAllocWorkspace")
            ptr = self.w.inst(
                "ptr", f"call ptr @{alloc}(i32 1, i32 0, {nbytes.typed()}, i32 {code}, i32 {bits})"
            )
            ok = self.w.inst("i1", f"icmp ne ptr {ptr.ref}, null")
            self.guard(ok, f"{self.func.name}: could not allocate workspace '{b.name}'")
            self.heap.append(ptr)
            self.scoped(b.data, ptr, s.body)
            self.heap.pop()
            free = self.runtime("EmberBackendFreeWorkspace")
            rc = self.w.inst("i32", f"call i32 @{free}(i32 1, i32 0, ptr {ptr.ref})")
            ok = self.w.inst("i1", f"icmp eq i32 {rc.ref}, 0")
            self.guard(ok, f"{self.func.name}: could not free workspace '{b.name}'")
        else:
            self.static_alloc(
                s, simplify(count * elem_bytes) if isinstance(count, IntImm) else count
            )

    def static_alloc(self, s: Allocate, nbytes: PrimExpr) -> None:
        """A pointer into a static workspace pool at the planned offset."""
        pool = s.pool or "workspace"
        if self.in_parallel:
            raise CompileError(
                f"LLVM codegen{self.where}: static allocation of '{s.buffer.name}' inside a "
                "parallel loop would be shared by all threads; allocate it on the stack or "
                "the heap, or make the loop serial"
            )
        if not isinstance(nbytes, IntImm):
            raise CompileError(
                f"LLVM codegen{self.where}: static allocation of '{s.buffer.name}' needs a "
                f"constant size, got {nbytes}"
            )
        param = next(
            (
                p
                for p in self.func.params
                if isinstance(p, Var) and p.name == pool and dt.is_handle(p.dtype)
            ),
            None,
        )
        if param is not None:
            base = self.env[param]
        else:
            declared = int(self.func.attrs.get("workspace_pools", {}).get(pool, 0))
            need = max(declared, s.offset + nbytes.value, self.ctx.pools.get(pool, 0))
            self.ctx.pools[pool] = need
            base = Val("ptr", f"@ember_pool_{pool}")
        ptr = self.w.inst("ptr", f"getelementptr inbounds i8, ptr {base.ref}, i64 {s.offset}")
        self.scoped(s.buffer.data, ptr, s.body)


def buffer_params(func: PrimFunc) -> list[Buffer]:
    """The buffer parameters of ``func``."""
    return [p for p in func.params if isinstance(p, Buffer)]
