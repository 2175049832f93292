"""Parallel loops of the C generator: an outlined range lambda and a cost estimate.

The body of every outermost parallel loop moves into a static function of the runtime's
``FEmberParallelRange`` type, which reads the variables it uses from a closure struct::

    typedef struct { float* A; float* B; } ember_ew_par0_t;
    static int32_t ember_ew_par0(int64_t ember_begin, int64_t ember_end, void* ember_cdata) {
      const ember_ew_par0_t* ember_c = (const ember_ew_par0_t*)ember_cdata;
      float* restrict A = ember_c->A;
      ...
      for (int32_t i = (int32_t)ember_begin; i < (int32_t)ember_end; ++i) { ... }
      return 0;
    }

and the kernel calls ``EmberBackendParallelFor(ember_ew_par0, &closure, extent, grain, n)``:
the runtime's pool takes chunks of at least ``grain`` iterations from an atomic counter
(``thread_pool.h``), runs the loop inline when it is nested, has under two grains of
work (the estimate below) or lately ran slower in parallel than the caller alone would
have (a worker on a core another process keeps busy; it backs off, then tries again), and
reports the first chunk's error. Error exits in the
lambda free its own workspaces and return -1. Small loops are outlined too: printed
inline, loops of small constant extent were unrolled by the C compiler into code that ran
up to 6x slower (1x1 convolutions of MobileNetV2, measured).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ember.tir.expr import BufferLoad, Call, Cast, IntImm, Min, PrimExpr
from ember.tir.functor import post_order_visit
from ember.tir.simplify import simplify
from ember.tir.stmt import (
    Allocate,
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

#: Estimated work of one chunk (operations executed, see :func:`stmt_cost`): some 5-10 us
#: on a current core (measured on MobileNetV2 and MNIST convolutions), many times the
#: cost of handing a chunk to a spinning worker. A loop runs in parallel only when it has
#: at least two chunks of work (the runtime decides), so kernels under about 15 us stay
#: on one thread.
WORK_PER_CHUNK = 131072
#: A loop of constant extent with at least this much work (one chunk's) runs in two halves
#: at two threads, not only from two chunks' worth on: resnet8's stride-2 1x1 shortcut
#: convolutions (19 iterations of grain 12 and 10 of grain 6, 2.1 and 1.8 us at one thread)
#: ran on one thread. A launch costs ~0.4 us over its work when the worker spins (a
#: microbenchmark, 2 threads, 2 chunks of 1 us: 1.37 us against 2.10 inline), so half of
#: ~2 us pays. AOT runs at 2 threads, with/without, interleaved in one process, medians of
#: back-to-back runs, quiet (load < 1): resnet8 0.990-0.991x, yolo 0.963-0.971x, dbnet
#: 0.982-0.990x, mobilenet_v2 0.985x, resnet50 1.005x, pp_lcnet 1.000x; 1 thread 0.995-1.008x
#: (noise: the loops are the same); the same bits.
SPLIT_WORK = WORK_PER_CHUNK
#: A loop of constant extent (at least two iterations) with this much work or more, but
#: under SPLIT_WORK, also runs in two halves: not for its own time but for where its data
#: sits. Between two parallel layers a loop on one thread reads what both cores wrote and
#: leaves all of its output in one core's cache for the next layer to fetch; in halves each
#: core mostly reads and writes its own rows. ds_cnn_kws's 3x3 depthwise layers (100 row
#: calls, 0.78 us at one thread: 45000 by the estimate) took 1.01-1.09 us at two threads,
#: serial; in halves the model ran 0.934x its 2-thread time (AOT, back-to-back medians, quiet,
#: interleaved in one process), 1 thread level.
LOCAL_SPLIT_WORK = 32768
#: Iterations assumed for a loop whose extent is not a constant.
UNKNOWN_EXTENT = 64
#: Iterations of a vectorized loop that cost one operation.
VECTOR_LANES = 8
#: Operations of one multiply-add into an accumulator (``acc = acc + x * w``: load, load,
#: multiply, add, as :func:`expr_cost` counts that store's value).
MAC_COST = 5
#: Operations of one scalar copy (a store of a plain load outside vectorized loops: layout
#: transposes, gathers), counted as one before: the NHWC transpose of a 224x224x3 input
#: took 72-87 us, one chunk by the estimate (a serial loop at 2 threads), while chunks of
#: vectorized conv tiles took 2-3 us (one thread, CPU time, mobilenet_v2 and pp_lcnet).
#: A strided scalar copy costs some 2 cycles per element against about 0.1 per counted
#: operation of vector code; 8 gives that transpose 9 chunks (its 2-thread time could not
#: be measured on a quiet machine: at load 5-8 the pool backed it off either way).
COPY_COST = 8


def _const(e: PrimExpr, default: int) -> int:
    """The value of a constant, the largest constant operand of a ``min`` (a guarded
    count), else ``default``."""
    if isinstance(e, IntImm):
        return int(e.value)
    if isinstance(e, Min):
        values = [int(a.value) for a in (e.a, e.b) if isinstance(a, IntImm)]
        return max(values) if values else default
    return default


def _tile_cost(lanes: int, first_extent: int) -> Callable[[tuple[PrimExpr, ...]], int]:
    """The cost of a float32 tile kernel call: ncols (argument 5) x ``lanes`` x the three
    reduction extents (arguments ``first_extent``, +3, +6) multiply-adds."""

    def cost(args: tuple[PrimExpr, ...]) -> int:
        ncols = _const(args[5], 6)
        e0, e1 = _const(args[first_extent], 1), _const(args[first_extent + 3], 1)
        steps = e0 * e1 * _const(args[first_extent + 6], UNKNOWN_EXTENT)
        return ncols * max(1, lanes // VECTOR_LANES) * steps * MAC_COST

    return cost


def _depthwise_cost(ncols_arg: int) -> Callable[[tuple[PrimExpr, ...]], int]:
    """The cost of a 3x3 depthwise kernel call (f32_depthwise.py): ncols (argument
    ``ncols_arg``) x 16 lanes x 9 taps multiply-adds."""

    def cost(args: tuple[PrimExpr, ...]) -> int:
        return _const(args[ncols_arg], 6) * (16 // VECTOR_LANES) * 9 * MAC_COST

    return cost


#: Cost estimates of extern kernels called from loop IR, by name: without one, a call
#: counts its argument nodes only, and a loop around a whole reduction's worth of kernel
#: calls got a grain of thousands of iterations, i.e. ran on one thread (ResNet-50's 14x14
#: and 7x7 convolutions).
EXTERN_COSTS: dict[str, Callable[[tuple[PrimExpr, ...]], int]] = {
    # ember/codegen/c/f32_kernels.py, f32_pair.py (two blocks of 16), f32_narrow.py (blocks
    # of 8 and 24), f32_lanes.py (16 positions as the lanes; a `zero` flag before the
    # extents). Without the pair kernel's entry resnet8's stride-2 32->64 layer got a grain
    # of 43 for its 2 tiles of 5 us each: one thread at any count.
    "ember_f32_conv_tile": _tile_cost(16, 9),
    "ember_f32_conv_tile2": _tile_cost(32, 9),
    "ember_f32_conv_tile2_pad": _tile_cost(32, 9),
    "ember_f32_conv_tile8": _tile_cost(8, 9),
    "ember_f32_conv_tile24": _tile_cost(24, 9),
    "ember_f32_lanes_tile": _tile_cost(16, 10),
    # f32_depthwise.py: without them a row's call counted its arguments only, and the loops
    # of mobilenet_v2's 7x7x960 and 14x14x192 stride-2 depthwise layers (420 and 168 calls
    # of 7 and 14 positions) got grains over their extents: one thread at any count.
    "ember_f32_dw3x3": _depthwise_cost(5),
    "ember_f32_dw3x3_ep": _depthwise_cost(8),
}


def _nodes(e: PrimExpr) -> int:
    count = [0]

    def visit(_: object) -> None:
        count[0] += 1

    post_order_visit(e, visit)
    return count[0]


def expr_cost(e: PrimExpr) -> int:
    """The operations of an expression: its nodes minus the index arithmetic of its loads
    (which the C compiler mostly folds into addressing)."""
    indices, calls = [0], [0]

    def visit(node: object) -> None:
        if isinstance(node, BufferLoad):
            indices[0] += sum(_nodes(i) for i in node.indices)
        elif isinstance(node, Call) and node.kind == "extern" and node.op in EXTERN_COSTS:
            calls[0] += EXTERN_COSTS[node.op](tuple(node.args))

    post_order_visit(e, visit)
    return max(1, _nodes(e) - indices[0]) + calls[0]


def _is_copy(value: PrimExpr) -> bool:
    """Whether a stored value is a plain load (or a cast of one)."""
    while isinstance(value, Cast):
        value = value.value
    return isinstance(value, BufferLoad)


def stmt_cost(s: Stmt, vector: bool = False) -> int:
    """Estimated operations of one execution of ``s``: expression operations times trip
    counts, a vectorized loop counting one per VECTOR_LANES iterations, a scalar copy
    COPY_COST (``vector``: ``s`` is inside a vectorized loop)."""
    if isinstance(s, SeqStmt):
        return sum(stmt_cost(x, vector) for x in s.seq)
    if isinstance(s, For):
        ext = int(s.extent.value) if isinstance(s.extent, IntImm) else UNKNOWN_EXTENT
        if s.kind is ForKind.VECTORIZED:
            ext = -(-ext // VECTOR_LANES)
            vector = True
        return max(1, ext) * stmt_cost(s.body, vector)
    if isinstance(s, BufferStore):
        if not vector and _is_copy(s.value):
            return COPY_COST
        return expr_cost(s.value)
    if isinstance(s, LetStmt):
        return expr_cost(s.value) + stmt_cost(s.body, vector)
    if isinstance(s, IfThenElse):
        other = stmt_cost(s.else_case, vector) if s.else_case is not None else 0
        return expr_cost(s.condition) + max(stmt_cost(s.then_case, vector), other)
    if isinstance(s, AssertStmt):
        return expr_cost(s.condition) + stmt_cost(s.body, vector)
    if isinstance(s, Allocate):
        return 1 + stmt_cost(s.body, vector)
    if isinstance(s, Evaluate):
        return expr_cost(s.value)
    return 1


def field_type(decl: str) -> str:
    """The closure field type of a local declared ``decl`` (no const, no restrict)."""
    return decl.removeprefix("const ").replace(" restrict", "")


def grain_of(body: Stmt, extent: int | None = None) -> int:
    """Iterations per chunk: enough that a chunk does about WORK_PER_CHUNK of work; a loop
    of constant ``extent`` with SPLIT_WORK or more, but under two chunks' worth, or with
    LOCAL_SPLIT_WORK or more, but under one chunk's, gets half its extent, rounded up (the
    runtime splits a loop of at least two grains)."""
    per_iteration = max(1, stmt_cost(body))
    grain = max(1, -(-WORK_PER_CHUNK // per_iteration))
    if extent is None or extent < 2 or extent >= 2 * grain:
        return grain
    work = extent * per_iteration
    if work >= SPLIT_WORK or (work >= LOCAL_SPLIT_WORK and extent < grain):
        return -(-extent // 2)
    return grain


class ParallelMixin:
    """Outlines parallel loops of CodeGenC into range lambdas (see the module docstring)."""

    # provided by CodeGenC
    perr: str | None
    perr_messages: list[str]
    perr_kind: str
    lines: list[str]
    indent: int
    scopes: list[set[str]]
    heap: list[str]
    names: Any
    opts: Any
    in_lambda: bool
    in_simd: bool
    kernel_messages: list[str]
    set_error: Callable[[str], str]
    kernel_error_prologue: Callable[[], list[str]]
    kernel_error_epilogue: Callable[[], list[str]]
    live: list[tuple[str, str]]
    outlined: list[str]
    emit: Callable[[str], None]
    expr: Callable[..., str]
    block: Callable[[Stmt], None]
    fail: Callable[[str], None]
    var: Callable[[Any], str]

    def outline(self, s: For, ctype: str, symbol: str) -> None:
        """Emit ``s`` as a call of EmberBackendParallelFor on a new lambda (see module doc)."""
        k = sum(1 for text in self.outlined if text.startswith("static "))
        fn = f"{symbol}_par{k}"
        begin, end = self.names.get(object(), "ember_begin"), self.names.get(object(), "ember_end")
        cdata, clo = self.names.get(object(), "ember_cdata"), self.names.get(object(), "ember_c")
        v = self.var(s.loop_var)
        lo = self.expr(s.min)
        start = f"({ctype}){begin}" if lo == "0" else f"({ctype}){begin} + {lo}"
        stop = f"({ctype}){end}" if lo == "0" else f"({ctype}){end} + {lo}"
        saved = (self.lines, self.indent, self.scopes, self.heap, self.in_lambda)
        saved_checks = self.kernel_messages
        self.lines, self.indent, self.scopes, self.heap = [], 1, [set()], []
        self.in_lambda, self.kernel_messages = True, []
        self.emit(f"for ({ctype} {v} = {start}; {v} < {stop}; ++{v}) {{")
        self.block(s.body)
        self.emit("}")
        # index checks in the lambda use its own flag, reported when its chunk ends
        body = [*self.kernel_error_prologue(), *self.lines, *self.kernel_error_epilogue()]
        self.lines, self.indent, self.scopes, self.heap, self.in_lambda = saved
        self.kernel_messages = saved_checks
        captured = self.captures("\n".join(body))
        head = [f"static int32_t {fn}(int64_t {begin}, int64_t {end}, void* {cdata}) {{"]
        if captured:
            fields = "".join(f"  {field_type(decl)} {n};\n" for n, decl in captured)
            self.outlined.append(f"typedef struct {{\n{fields}}} {fn}_t;\n")
            head.append(f"  const {fn}_t* {clo} = (const {fn}_t*){cdata};")
            head += [f"  {decl} {n} = {clo}->{n};" for n, decl in captured]
        else:
            head.append(f"  (void){cdata};")
        text = "\n".join([*head, *body, "  return 0;", "}", ""])
        self.outlined.append(text)
        arg = "NULL"
        if captured:
            arg = "&" + self.names.get(object(), f"ember_par{k}")
            inits = ", ".join(f".{n} = {n}" for n, _ in captured)
            self.emit(f"{fn}_t {arg[1:]} = {{{inits}}};")
        extent = self.expr(simplify(s.extent), 15)
        const_extent = simplify(s.extent)
        known = int(const_extent.value) if isinstance(const_extent, IntImm) else None
        grain = grain_of(s.body, known)
        threads = self.opts.num_threads or 0
        call = f"EmberBackendParallelFor({fn}, {arg}, (int64_t){extent}, {grain}, {threads})"
        self.emit(f"if ({call} != 0) {{")
        self.indent += 1
        self.fail("")
        self.indent -= 1
        self.emit("}")

    def close_parallel(self, flag_at: int) -> None:
        """Declare the loop's error flag before it and check it after, if it was used."""
        flag, messages = self.perr, self.perr_messages
        self.perr = None
        self.perr_messages = []
        if not messages or flag is None:
            return
        self.lines.insert(flag_at, "  " * self.indent + f"int32_t {flag} = 0;")
        self.emit(f"if ({flag} != 0) {{")
        self.indent += 1
        for code, message in enumerate(messages, start=1):
            if message:
                text = self.set_error(f"{message} (in a {self.perr_kind} loop)")
                self.emit(f"if ({flag} == {code}) {text}")
        for name in reversed(self.heap):
            self.emit(f"EmberBackendFreeWorkspace(1, 0, {name});")
        self.emit("return -1;")
        self.indent -= 1
        self.emit("}")

    def captures(self, body: str) -> list[tuple[str, str]]:
        """The variables in scope that ``body`` names: (C name, declaration type), deduplicated."""
        used = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", body))
        found: dict[str, str] = {}
        for name, decl in self.live:  # an inner declaration of a name wins
            if name in used:
                found[name] = decl
        return list(found.items())

    def parallel_kind(self, s: For) -> bool:
        """Whether ``s`` is a parallel loop that should be outlined here."""
        return (
            s.kind is ForKind.PARALLEL
            and self.opts.openmp
            and not self.in_lambda
            and not self.in_simd
        )
