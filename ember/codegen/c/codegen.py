"""CodeGenC: one PrimFunc -> the C99 text of its unpacked function.

The generator walks the loop IR once. Statements live here (loops and their pragmas,
stores, lets, branches, allocations on the stack, in the runtime workspace or at a static
pool offset, error exits); expressions come from ``ExprCodegen`` (``expr_gen``) and vector
code from ``VectorMixin`` (``vector``). It keeps the ranges of enclosing loops so that
index arithmetic of provably non-negative operands prints as plain C.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.codegen.c import half, subbyte
from ember.codegen.c.abi import (
    C_KEYWORDS,
    UNPACKED_SUFFIX,
    c_string,
    c_type,
    symbol_name,
    symbolic_extents,
)
from ember.codegen.c.contract import fma_macro, reduction_product
from ember.codegen.c.expr_gen import ExprCodegen, FileContext
from ember.codegen.c.parallel import ParallelMixin
from ember.errors import CompileError
from ember.tir import dtype as dt
from ember.tir.buffer import Buffer
from ember.tir.expr import BufferLoad, Call, Cast, IntImm, PrimExpr, Select, Var
from ember.tir.functor import post_order_visit
from ember.tir.printer import NameTable
from ember.tir.simplify import NON_NEGATIVE_MAX, Simplifier, simplify
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

__all__ = ["CodeGenC", "FileContext", "Options", "extern_names"]


def extern_names(func: PrimFunc) -> list[str]:
    """The C functions ``func`` reaches through call_extern (no local may take their names)."""
    found: dict[str, None] = {}

    def visit(node: object) -> None:
        if isinstance(node, Call) and node.kind == "extern":
            found.setdefault(node.op)

    post_order_visit(func.body, visit)
    return list(found)


@dataclass
class Options:
    """Code generation options (from the target)."""

    openmp: bool = True
    num_threads: int = 0
    export_unpacked: bool = False


class CodeGenC(ParallelMixin, ExprCodegen):
    """Generates the unpacked C function of one PrimFunc."""

    def __init__(self, func: PrimFunc, ctx: FileContext, opts: Options) -> None:
        self.func = func
        self.ctx = ctx
        self.opts = opts
        self.names = NameTable((*C_KEYWORDS, *extern_names(func)))
        self.lines: list[str] = []
        self.indent = 1
        self.bounds = Simplifier()
        self.scopes: list[set[str]] = [set()]
        self.heap: list[str] = []
        self.in_parallel = False
        self.in_simd = False
        self.bound_vars: set[int] = set()
        self.where = f" of '{func.name}'"
        # error exits inside a parallel loop set this flag instead of returning
        self.perr: str | None = None
        self.perr_messages: list[str] = []
        self.perr_kind = "parallel"
        self.perr_count = 0
        self.kernel_messages: list[str] = []  # index checks outside parallel loops
        self.formatted: set[str] = set()
        # parallel loops become range lambdas (``parallel``): the C names in scope with
        # their declared types (the captures), the lambdas' text, and whether we are in one
        self.live: list[tuple[str, str]] = []
        self.outlined: list[str] = []
        self.in_lambda = False

    # -- names --------------------------------------------------------------------------
    def var(self, v: Var) -> str:
        """The C name of a variable."""
        return self.names.get(v, v.name)

    def buf(self, b: Buffer) -> str:
        """The C name of a buffer (its data pointer prints the same)."""
        name = self.names.get(b, b.name)
        self.names.alias(b.data, b)
        return name

    def emit(self, text: str) -> None:
        """Append one line at the current indentation."""
        self.lines.append("  " * self.indent + text)

    # -- function -----------------------------------------------------------------------
    def generate(self) -> tuple[str, dict[int, str]]:
        """The C text of the unpacked function and the C names of the parameters."""
        func = self.func
        params: list[str] = []
        pnames: dict[int, str] = {}
        for p in func.params:
            if isinstance(p, Buffer):
                name = self.buf(p)
                params.append(f"{c_type(p.dtype, self.where)}* restrict {name}")
            else:
                name = self.var(p)
                params.append(f"{c_type(p.dtype, self.where)} {name}")
            pnames[id(p)] = name
        for v in symbolic_extents(func):
            params.append(f"{c_type(v.dtype, self.where)} {self.var(v)}")
        for decl in params:
            ctype, _, name = decl.rpartition(" ")
            self.live.append((name, ctype if "*" in ctype else f"const {ctype}"))
        for p in func.params:  # tensor extents are never negative
            if isinstance(p, Buffer):
                for e in p.shape:
                    if isinstance(e, Var):
                        self.bounds.ranges[e] = (0, NON_NEGATIVE_MAX)
        self.stmt(func.body)
        storage = "EMBER_DLL " if self.opts.export_unpacked else "static "
        signature = ", ".join(params) or "void"
        head = f"{storage}int32_t {symbol_name(func)}{UNPACKED_SUFFIX}({signature}) {{"
        lines = [*self.kernel_error_prologue(), *self.lines, *self.kernel_error_epilogue()]
        body = "\n".join(lines)
        text = f"{head}\n{body}\n  return 0;\n}}\n" if body else f"{head}\n  return 0;\n}}\n"
        return "\n".join([*self.outlined, text]), pnames

    # -- statements ---------------------------------------------------------------------
    def declare(self, name: str) -> bool:
        """Record a declaration in the current C block; False if the name is already there."""
        if name in self.scopes[-1]:
            return False
        self.scopes[-1].add(name)
        return True

    def block(self, s: Stmt) -> None:
        """Emit ``s`` one level deeper, in a new C block scope."""
        self.indent += 1
        self.scopes.append(set())
        self.stmt(s)
        self.scopes.pop()
        self.indent -= 1

    def fail(self, message: str) -> None:
        """Emit an error return that frees the live heap workspaces first.

        Inside a vectorized loop (where C cannot return) it sets the loop's error flag; the
        code after the loop reports the error and returns. Inside a parallel loop's lambda
        it returns from the lambda, the message marked "(in a parallel loop)". An empty
        message keeps the last error already set (by a failed callee).
        """
        if self.perr is not None:
            self.perr_messages.append(message)
            self.emit(f"{self.perr} = {len(self.perr_messages)};")
            return
        if message and self.in_lambda:
            message += " (in a parallel loop)"
        if message:
            self.emit(f"EmberAPISetLastError({c_string(message)});")
        for name in reversed(self.heap):
            self.emit(f"EmberBackendFreeWorkspace(1, 0, {name});")
        self.emit("return -1;")

    def stmt(self, s: Stmt) -> None:
        """Emit one statement."""
        if isinstance(s, SeqStmt):
            for x in s.seq:
                self.stmt(x)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, BufferStore) and dt.lanes_of(s.value.dtype) != 1:
            self.vector_store(s.buffer, s.value, s.indices)
        elif isinstance(s, BufferStore):
            off = self.expr(s.buffer.offset_of(s.indices))
            fused = reduction_product(s)
            if half.is_half(s.buffer.dtype):
                value = self.half_bits(s.value)
            elif subbyte.is_sub_byte(s.buffer.dtype):
                subbyte.use(self.ctx.helpers, s.buffer.dtype)
                value = subbyte.store(s.buffer.dtype, self.expr(s.value))
            elif (
                fused is not None and self.expr(fused[2].buffer.offset_of(fused[2].indices)) == off
            ):
                a, b, acc = (self.expr(x) for x in fused)
                value = f"{fma_macro(self.ctx, s.value.dtype)}({a}, {b}, {acc})"
            else:
                value = self.expr(s.value, 2)
            self.emit(f"{self.buf(s.buffer)}[{off}] = {value};")
        elif isinstance(s, LetStmt):
            self.let(s)
        elif isinstance(s, IfThenElse):
            self.emit(f"if ({self.expr(s.condition)}) {{")
            self.block(s.then_case)
            if s.else_case is not None:
                self.emit("} else {")
                self.block(s.else_case)
            self.emit("}")
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Evaluate):
            if isinstance(s.value, IntImm):
                return
            self.emit(f"(void){self.expr(s.value, 15)};")
        elif isinstance(s, AssertStmt):
            self.emit(f"if (!{self.expr(s.condition, 15)}) {{")
            self.indent += 1
            self.fail(f"{self.func.name}: {s.message}" if s.message else "")
            self.indent -= 1
            if self.perr is not None:  # no early return: the body becomes the else branch
                self.emit("} else {")
                self.block(s.body)
                self.emit("}")
            else:
                self.emit("}")
                self.stmt(s.body)
        else:
            raise CompileError(f"C codegen{self.where}: unsupported statement {type(s).__name__}")

    def loop(self, s: For) -> None:
        """Emit a for loop with the pragma its kind asks for.

        A parallel loop worth a thread becomes a range lambda run by the runtime's pool
        (``parallel``); one inside a lambda or a vectorized loop, or too small, runs as a
        plain loop. Vectorized regions do not nest; inside the outermost one, error exits
        set a flag instead of returning (``fail``).
        """
        v = self.var(s.loop_var)
        ct = c_type(s.loop_var.dtype, self.where)
        if s.kind is ForKind.VECTORIZED and ct == "int32_t" and _guarded_load(s.body):
            ct = "int64_t"  # 64-bit indices: gcc turns guarded loads into masked vector loads
        lo = self.expr(s.min)
        end = self.expr(simplify(s.min + s.extent), 11)
        was_parallel, was_simd = self.in_parallel, self.in_simd
        pragma = ""
        omp = self.opts.openmp
        outline = self.parallel_kind(s)
        if s.kind is ForKind.PARALLEL:
            self.in_parallel = True
        elif s.kind is ForKind.VECTORIZED:
            if omp and not self.in_simd:
                pragma = "#pragma omp simd"
                self.in_simd = True
            elif not omp:
                pragma = "#pragma GCC ivdep"
        elif s.kind is ForKind.UNROLLED:
            n = s.extent.value if isinstance(s.extent, IntImm) else 4
            pragma = f"#pragma GCC unroll {max(1, min(n, 64))}"
        flag_at = -1
        if pragma.startswith("#pragma omp") and self.perr is None:
            flag_at = len(self.lines)
            self.perr = f"ember_perr{self.perr_count}"
            self.perr_count += 1
            self.perr_messages = []
            self.perr_kind = "vectorized"
        saved = self.bounds.ranges.get(s.loop_var)
        lo_b = self.bounds.bound(s.min)[0]
        hi_b = self.bounds.bound(s.min)[1] + self.bounds.bound(s.extent)[1] - 1
        self.bounds.ranges[s.loop_var] = (lo_b, hi_b)
        if outline:
            self.outline(s, ct, symbol_name(self.func))
        else:
            if pragma:
                self.emit(pragma)
            self.emit(f"for ({ct} {v} = {lo}; {v} < {end}; ++{v}) {{")
            self.live.append((v, f"const {ct}"))
            self.block(s.body)
            self.live.pop()
            self.emit("}")
        if saved is None:
            del self.bounds.ranges[s.loop_var]
        else:
            self.bounds.ranges[s.loop_var] = saved
        self.in_parallel, self.in_simd = was_parallel, was_simd
        if flag_at >= 0:
            self.close_parallel(flag_at)

    def let(self, s: LetStmt) -> None:
        """Emit a const binding (in its own block if the name is taken here)."""
        name = self.var(s.var)
        ct = self.value_type(s.var.dtype)
        self.bound_vars.add(id(s.var))
        fresh = self.declare(name)
        if not fresh:
            self.emit("{")
            self.indent += 1
            self.scopes.append({name})
        self.emit(f"const {ct} {name} = {self.expr(s.value)};")
        if dt.is_integral(s.var.dtype):
            self.bounds.ranges[s.var] = self.bounds.bound(s.value)
        self.live.append((name, f"const {ct}"))
        self.stmt(s.body)
        self.live.pop()
        self.bounds.ranges.pop(s.var, None)
        if not fresh:
            self.scopes.pop()
            self.indent -= 1
            self.emit("}")

    def allocate(self, s: Allocate) -> None:
        """Emit an allocation (stack array, runtime workspace or static pool slice)."""
        b = s.buffer
        name = self.buf(b)
        ct = c_type(b.dtype, self.where)
        fresh = self.declare(name)
        if not fresh:
            self.emit("{")
            self.indent += 1
            self.scopes.append({name})
        count = b.num_elements()
        wide = count if isinstance(count, IntImm) else Cast("int64", count)
        nbytes = simplify(wide * dt.bytes_of(b.dtype))
        if s.storage is StorageKind.STACK:
            if not isinstance(count, IntImm):
                raise CompileError(
                    f"C codegen{self.where}: stack allocation of '{b.name}' needs a constant "
                    f"size, got {count}; use StorageKind.HEAP"
                )
            self.emit(f"{ct} {name}[{count.value}] __attribute__((aligned({b.align})));")
            self.live.append((name, f"{ct}*"))
            self.stmt(s.body)
            self.live.pop()
        elif s.storage is StorageKind.HEAP:
            code, bits, _ = dt.dlpack_code(b.dtype)
            size = self.expr(nbytes, 15)
            self.emit(
                f"{ct}* {name} = ({ct}*)EmberBackendAllocWorkspace(1, 0, (uint64_t){size}, "
                f"{code}, {bits});"
            )
            self.emit(f"if ({name} == NULL) {{")
            self.indent += 1
            self.fail(f"{self.func.name}: could not allocate workspace '{b.name}'")
            self.indent -= 1
            if self.perr is not None:  # no early return: the rest runs only on success
                self.emit("} else {")
                self.indent += 1
                self.scopes.append(set())
            else:
                self.emit("}")
            self.heap.append(name)
            self.live.append((name, f"{ct}*"))
            self.stmt(s.body)
            self.live.pop()
            self.heap.pop()
            self.emit(f"if (EmberBackendFreeWorkspace(1, 0, {name}) != 0) {{")
            self.indent += 1
            self.fail(f"{self.func.name}: could not free workspace '{b.name}'")
            self.indent -= 1
            self.emit("}")
            if self.perr is not None:
                self.scopes.pop()
                self.indent -= 1
                self.emit("}")
        else:
            self.static_alloc(s, name, ct, nbytes)
        if not fresh:
            self.scopes.pop()
            self.indent -= 1
            self.emit("}")

    def static_alloc(self, s: Allocate, name: str, ct: str, nbytes: PrimExpr) -> None:
        """Emit a pointer into a static workspace pool at the planned offset."""
        pool = s.pool or "workspace"
        if self.in_parallel:
            raise CompileError(
                f"C codegen{self.where}: static allocation of '{s.buffer.name}' inside a "
                "parallel loop would be shared by all threads; allocate it on the stack or "
                "the heap, or make the loop serial"
            )
        if not isinstance(nbytes, IntImm):
            raise CompileError(
                f"C codegen{self.where}: static allocation of '{s.buffer.name}' needs a "
                "constant size"
            )
        if s.offset % 4:
            raise CompileError(
                f"C codegen{self.where}: offset {s.offset} of '{s.buffer.name}' is misaligned"
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
            base = f"(uint8_t*){self.var(param)}"
        else:
            declared = int(self.func.attrs.get("workspace_pools", {}).get(pool, 0))
            need = max(declared, s.offset + nbytes.value, self.ctx.pools.get(pool, 0))
            self.ctx.pools[pool] = need
            base = f"ember_pool_{pool}"
        self.emit(f"{ct}* restrict {name} = ({ct}*)({base} + {s.offset});")
        self.live.append((name, f"{ct}* restrict"))
        self.stmt(s.body)
        self.live.pop()


def _guarded_load(body: Stmt) -> bool:
    """Whether ``body`` loads under a condition (``c ? buf[i] : 0``, a padded copy): gcc
    vectorises those as masked loads only with 64-bit indices, else as gathers (a padded
    copy of 32x112x112 floats: 1.1 ms with an int32 loop variable, 0.16 ms with int64)."""
    loads: list[bool] = []

    def visit(node: object) -> None:
        if isinstance(node, Select) and not loads:
            post_order_visit(
                node, lambda n: loads.append(True) if isinstance(n, BufferLoad) else None
            )

    post_order_visit(body, visit)
    return bool(loads)
