"""build_llvm / build_llvmjit: PrimFuncs -> LLVM modules -> artifacts.

The kernels become one LLVM module, or, past ``GROUP_BYTES`` of IR, several modules of
whole kernels that compile in parallel (``parallel.compile_groups``, option ``-jobs``);
the grouping depends only on the kernels, so the artifacts do too.
``llvm``: each optimised module becomes ``lib<k>.o`` (codegen_id ``llvm``, loader
``native``), which the ordinary loading process links with any C artifacts. The
optimised bitcode is embedded in the object's ``.llvmbc`` section (the section
``-fembed-bitcode`` uses; not allocated, so never mapped at run time), so ``inspect``
shows its IR and assembly.
``llvmjit``: each module compiled to JIT object code into an ``InMemoryArtifact``
``lib<k>.bc`` that MCJIT loads in this process (no file, no linker, no C compiler); the
bitcode stays in the artifact for inspection. Equal inputs give byte-identical objects.

Example::

    arts = build_llvm([func], Target.create("llvm -mcpu=native"))
    arts[0].file_name            # "lib0.o"
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import llvmlite.binding as llvm

from ember.codegen.c.abi import symbol_name, symbolic_extents
from ember.codegen.llvm.branch_allocs import BRANCH_ALLOC_REGISTERS, split_branch_allocs
from ember.codegen.llvm.codegen import FuncGen, Options, Scope
from ember.codegen.llvm.ir_text import ModuleContext, Val, value_type
from ember.codegen.llvm.jit import LLVMJitArtifact, jit_loader
from ember.codegen.llvm.loop_hints import has_remainder
from ember.codegen.llvm.machine import MachineSpec, pointer_bits
from ember.codegen.llvm.parallel import CompilePool, compile_groups, usable_cores
from ember.codegen.llvm.remainder_split import split_remainder_loops
from ember.codegen.llvm.select_split import split_select_loops
from ember.codegen.llvm.tiles import AVX512_ONLY_NAMES, TILE_KERNEL_NAMES
from ember.codegen.llvm.vector_split import split_vector_loops
from ember.codegen.llvm.worker import MachineTuple
from ember.codegen.llvm.wrapper import packed_wrapper
from ember.errors import CompileError
from ember.runtime.artifact import Artifact
from ember.runtime.libruntime import TILES_KEY, tiles_digest
from ember.target import Target
from ember.target.cpu import X86_AVX512
from ember.tir.buffer import Buffer
from ember.tir.expr import Var
from ember.tir.simplify import NON_NEGATIVE_MAX
from ember.tir.stmt import PrimFunc
from ember.tir.transform import unroll_loops, vectorize_loops
from ember.tir.verify import verify

CODEGEN_ID = "llvm"
JIT_CODEGEN_ID = "llvmjit"
CODEGEN_VERSION = 1


class LLVMOptions:
    """The LLVM back end's reading of a parsed ``llvm`` or ``llvmjit`` Target."""

    def __init__(self, target: Target) -> None:
        if target.kind.name not in (CODEGEN_ID, JIT_CODEGEN_ID):
            raise CompileError(
                f"build_llvm: target '{target}' is not of kind 'llvm' or 'llvmjit'; pass "
                "Target.create('llvm ...')"
            )
        self.target = target
        self.jit = target.kind.name == JIT_CODEGEN_ID
        self.mcpu: str = target["mcpu"]
        self.mtriple: str = target["mtriple"]
        self.mattr: str = target["mattr"]
        self.opt_level: int = target["opt-level"]
        self.codegen = Options(
            target["num-threads"],
            bool(target["export-unpacked"]),
            target.cpu.vector_registers >= BRANCH_ALLOC_REGISTERS,
            target.cpu.key == X86_AVX512.key,
        )
        self.jobs: int = target["jobs"]

    def spec(self) -> MachineSpec:
        """The checked target machine description."""
        return MachineSpec.create(self.mtriple, self.mcpu, self.mattr, self.opt_level, self.jit)


def _signature(func: PrimFunc) -> tuple[list[str], list[tuple[Buffer | Var, str]]]:
    """The unpacked parameter types and (param, LLVM name) pairs, extents last."""
    where = f" of '{func.name}'"
    types: list[str] = []
    names: list[tuple[Buffer | Var, str]] = []
    for k, p in enumerate(func.params):
        types.append("ptr" if isinstance(p, Buffer) else value_type(p.dtype, where))
        names.append((p, f"%p{k}"))
    for k, v in enumerate(symbolic_extents(func)):
        types.append(value_type(v.dtype, where))
        names.append((v, f"%e{k}"))
    return types, names


def unpacked_function(func: PrimFunc, ctx: ModuleContext, opts: Options) -> list[str]:
    """The unpacked function of ``func`` and the lambdas of its parallel loops."""
    verify(func)
    sym = symbol_name(func)
    if opts.split_branch_allocs:
        func = split_branch_allocs(func)
    func = split_vector_loops(split_select_loops(func))
    if has_remainder(func.body):  # vectorizable once split (remainder_split)
        func = split_remainder_loops(func)
    func = unroll_loops(vectorize_loops(func))
    scope = Scope()
    gen = FuncGen(ctx, func, opts, scope)
    gen.func_symbol = sym
    types, names = _signature(func)
    params = []
    for ty, (p, name) in zip(types, names, strict=True):
        if isinstance(p, Buffer):
            params.append(f"ptr noalias {name}")
            gen.env[p.data] = Val("ptr", name)
            gen.noalias.add(name)
            for e in p.shape:
                if isinstance(e, Var):
                    gen.bounds.ranges[e] = (0, NON_NEGATIVE_MAX)
        else:
            params.append(f"{ty} {name}")
            gen.env[p] = Val(ty, name)
    gen.stmt(func.body)
    gen.w.op("ret i32 0")
    linkage = "" if opts.export_unpacked else "internal "
    text = (
        f"define {linkage}i32 @{sym}_unpacked({', '.join(params)}) nounwind {{\n{gen.w.body()}\n}}"
    )
    return [text, *scope.functions]


#: IR text per group: a bigger build becomes several modules (objects), compiled in parallel
GROUP_BYTES = 160_000


def _check_names(funcs: Sequence[PrimFunc]) -> None:
    seen: dict[str, str] = {}
    for f in funcs:
        if not isinstance(f, PrimFunc):
            raise CompileError(f"build_llvm: expected PrimFuncs, got {type(f).__name__}")
        sym = symbol_name(f)
        if sym in seen:
            raise CompileError(
                f"build_llvm: two kernels map to the symbol '{sym}' ('{seen[sym]}' and "
                f"'{f.name}'); give them distinct names"
            )
        seen[sym] = f.name


def _module_text(ctx: ModuleContext, functions: list[str]) -> str:
    head = f"; generated by ember.codegen.llvm (codegen version {CODEGEN_VERSION}); do not edit\n"
    return head + 'source_filename = "ember"\n' + ctx.text(functions)


#: ``emit(k, text, more)``: module ``k``'s text is final; ``more``: kernels follow it
Emit = Callable[[int, str, bool], None]


def _group_texts(
    funcs: Sequence[PrimFunc],
    opts: Options,
    size_t: str,
    group_bytes: int,
    emit: Emit | None = None,
) -> list[tuple[list[PrimFunc], str]] | None:
    """Groups of whole kernels of about ``group_bytes`` of IR each, or None when the
    kernels share more than the runtime (a call of another kernel, a static pool); each
    group's text goes to ``emit`` as soon as it is final."""
    defined = {f"{symbol_name(f)}_unpacked" for f in funcs}
    groups: list[tuple[list[PrimFunc], str]] = []
    members: list[PrimFunc] = []
    ctx = ModuleContext(size_t=size_t)
    functions: list[str] = []
    size = 0

    def close(more: bool) -> bool:
        if ctx.pools or any(name in defined for name in ctx.declarations):
            return False
        groups.append((members, _module_text(ctx, functions)))
        if emit is not None:
            emit(len(groups) - 1, groups[-1][1], more)
        return True

    for n, f in enumerate(funcs, 1):
        types, _ = _signature(f)
        ctx.defined[f"{symbol_name(f)}_unpacked"] = f"i32 ({', '.join(types)})"
        made = [*unpacked_function(f, ctx, opts), packed_wrapper(ctx, f)]
        functions += made
        members.append(f)
        size += sum(len(t) for t in made)
        if size >= group_bytes:
            if not close(n < len(funcs)):
                return None
            members, ctx, functions, size = [], ModuleContext(size_t=size_t), [], 0
    if (members or not groups) and not close(False):
        return None
    return groups


def generate_groups(
    funcs: Sequence[PrimFunc],
    opts: Options,
    size_t: str = "i64",
    group_bytes: int = 0,
    emit: Emit | None = None,
) -> list[tuple[list[PrimFunc], str]]:
    """(kernels, LLVM IR text) of each module of a build: one module unless the IR of
    independent kernels exceeds ``group_bytes`` (0: ``GROUP_BYTES``); kernels that call
    each other or share a static pool, as in AOT builds, stay in one module. ``emit``
    sees each module of a split build as soon as its text is final (not the single
    module of an unsplit one)."""
    funcs = list(funcs)
    group_bytes = group_bytes or GROUP_BYTES
    _check_names(funcs)
    if not opts.export_unpacked and len(funcs) > 1:
        groups = _group_texts(funcs, opts, size_t, group_bytes, emit)
        if groups is not None:
            return groups
    ctx = ModuleContext(size_t=size_t)
    for f in funcs:
        types, _ = _signature(f)
        ctx.defined[f"{symbol_name(f)}_unpacked"] = f"i32 ({', '.join(types)})"
    functions: list[str] = []
    for f in funcs:
        functions += unpacked_function(f, ctx, opts)
        functions.append(packed_wrapper(ctx, f))
    return [(funcs, _module_text(ctx, functions))]


def generate_ir(funcs: Sequence[PrimFunc], opts: Options, size_t: str = "i64") -> str:
    """The LLVM IR text of one module holding every function and its packed wrapper."""
    return generate_groups(funcs, opts, size_t, group_bytes=sys.maxsize)[0][1]


def compile_groups_of(
    funcs: Sequence[PrimFunc], opts: LLVMOptions, embed: bool
) -> tuple[list[tuple[list[PrimFunc], bytes, bytes]], MachineSpec]:
    """(kernels, optimised bitcode, object code) of each module of ``funcs``, the modules
    compiled in parallel (``-jobs``)."""
    spec = opts.spec()
    size_t = f"i{pointer_bits(spec)}"
    stream = _Stream(spec.as_tuple(), embed, opts.jobs)
    try:
        groups = generate_groups(list(funcs), opts.codegen, size_t, emit=stream)
        if stream.pool is not None and stream.texts == [t for _, t in groups]:
            done = stream.pool.results()
        else:  # a single module, or one module after all (kernels call each other)
            stream.close()
            done = compile_groups([t for _, t in groups], spec.as_tuple(), embed, opts.jobs)
    except RuntimeError as err:
        raise CompileError(f"LLVM codegen: the generated IR is invalid: {err}") from None
    finally:
        stream.close()
    return [(g, bc, obj) for (g, _), (bc, obj) in zip(groups, done, strict=True)], spec


class _Stream:
    """The ``emit`` of a build: from the first module that has a successor on, every
    module goes to a CompilePool (helpers started then) while the next is written."""

    def __init__(self, m: MachineTuple, embed: bool, jobs: int) -> None:
        self.machine, self.embed = m, embed
        self.jobs = jobs or usable_cores()
        self.pool: CompilePool | None = None
        self.texts: list[str] = []

    def __call__(self, k: int, text: str, more: bool) -> None:
        if self.pool is None:
            if not more or self.jobs <= 1 or k != 0:
                return
            self.pool = CompilePool(self.machine, self.embed, self.jobs)
        self.pool.submit(k, text)
        self.texts.append(text)

    def close(self) -> None:
        """Stop the helpers (what they were given is dropped)."""
        if self.pool is not None:
            self.pool.close()


def build_llvm(funcs: Sequence[PrimFunc], target: Target) -> list[Artifact]:
    """``target.build.llvm``: object files ``lib0.o``, ``lib1.o``, ... for the native loader."""
    opts = LLVMOptions(target)
    built, spec = compile_groups_of(funcs, opts, embed=True)
    out = []
    for k, (group, _, content) in enumerate(built):
        meta: dict[str, str | int | float | bool] = {
            "format": "o",
            "codegen_version": CODEGEN_VERSION,
            "num_functions": len(group),
            "triple": spec.triple,
            "mcpu": spec.cpu,
            "opt_level": spec.opt_level,
        }
        if len(spec.features) <= 4000:
            meta["mattr"] = spec.features
        listed = ",".join(symbol_name(f) for f in group)
        if len(listed) <= 4000:
            meta["functions"] = listed
        if any(name.encode() in content for name in (*TILE_KERNEL_NAMES, *AVX512_ONLY_NAMES)):
            meta[TILES_KEY] = tiles_digest()  # calls the runtime's copy: refused by another
        out.append(Artifact(CODEGEN_ID, "native", f"lib{k}.o", content, meta))
    return out


def build_llvmjit(funcs: Sequence[PrimFunc], target: Target) -> list[LLVMJitArtifact]:
    """``target.build.llvmjit``: in-memory artifacts holding JIT object code, loaded by
    MCJIT in this process (their bitcode kept for inspection)."""
    opts = LLVMOptions(target)
    spec = opts.spec()
    if not spec.is_host:
        raise CompileError(
            f"llvmjit: code for {spec.triple} cannot run in this process "
            f"({llvm.get_process_triple()}); use target 'llvm -mtriple={spec.triple}' for "
            "an object file"
        )
    built, spec = compile_groups_of(funcs, opts, embed=False)
    out = []
    for k, (group, code, obj) in enumerate(built):
        names = tuple(symbol_name(f) for f in group)
        out.append(
            LLVMJitArtifact(
                JIT_CODEGEN_ID,
                f"lib{k}.bc",
                jit_loader(obj, spec, names),
                f"{len(names)} kernels JIT-compiled by LLVM for {spec.cpu}",
                "target 'llvm' instead of 'llvmjit'",
                bitcode=code,
                triple=spec.triple,
                cpu=spec.cpu,
            )
        )
    return out
